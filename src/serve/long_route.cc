#include "serve/long_route.h"

#include <nlohmann/json.hpp>

#include "http/conn.h"

namespace onebit {
namespace {

using nlohmann::json;

constexpr int kCountTimeoutMs = 30000;

bool is_chat(const std::string& path) { return path == "/v1/chat/completions" || path == "/chat/completions"; }
bool is_text(const std::string& path) {
  return path == "/v1/completions" || path == "/completions" || path == "/completion";
}

// Whether JSON text nests no deeper than `max`: the router copies and prints parsed values
// recursively, so depth is bounded before parsing (the engine still gets the body as it came).
bool nesting_within(const std::string& text, int max) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

}  // namespace

Headers LongRouter::headers() const {
  Headers h = {{"Content-Type", "application/json"}};
  if (!main_.key.empty()) h.push_back(main_.authorization());
  return h;
}

int64_t LongRouter::count_tokens(bool chat, const std::string& payload, std::string& error) const {
  std::string prompt = payload;
  if (chat) {
    HttpResult t = http_fetch("127.0.0.1", main_.port, "POST", "/apply-template", payload, headers(), kCountTimeoutMs);
    if (t.status != 200) {
      error = "cannot apply the chat template: " + (t.error.empty() ? t.body : t.error);
      return -1;
    }
    try {
      prompt = json{{"content", json::parse(t.body).at("prompt")}}.dump();
    } catch (const json::exception&) {
      error = "unexpected /apply-template answer from the engine";
      return -1;
    }
  }
  HttpResult r = http_fetch("127.0.0.1", main_.port, "POST", "/tokenize", prompt, headers(), kCountTimeoutMs);
  if (r.status != 200) {
    error = "cannot count tokens: " + (r.error.empty() ? r.body : r.error);
    return -1;
  }
  try {
    return static_cast<int64_t>(json::parse(r.body).at("tokens").size());
  } catch (const json::exception&) {
    error = "unexpected /tokenize answer from the engine";
    return -1;
  }
}

RouteDecision LongRouter::decide(const Route& r) const {
  RouteDecision d;
  d.backend = r.backend;
  d.header = std::string(r.backend == kLong ? "long" : "main") + " " + std::to_string(r.tokens);
  return d;
}

RouteDecision LongRouter::route(const RequestHead& req, const std::string& body) {
  const std::string path = req.path();
  const bool chat = is_chat(path);
  if (req.method != "POST" || !(chat || is_text(path)) || !nesting_within(body, 64)) return {};
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return {};  // the engine will answer the malformed body itself

  std::string payload;
  uint64_t key = 0;
  if (chat) {
    auto messages = j.find("messages");
    if (messages == j.end() || !messages->is_array() || messages->empty()) return {};
    json opening = json::array();
    for (const auto& m : *messages) {
      opening.push_back(m);
      if (m.is_object() && m.contains("role") && m["role"].is_string() && m["role"] == "user") break;
    }
    // Only a hash is kept: openings are exactly the long prompts this feature is for.
    key = std::hash<std::string>{}(opening.dump(-1, ' ', false, json::error_handler_t::replace));
    payload = body;  // the engine's /apply-template takes a chat request as it is
  } else {
    auto prompt = j.find("prompt");
    if (prompt == j.end()) return {};
    payload = json{{"content", *prompt}}.dump();
  }

  if (chat) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = routes_.find(key); it != routes_.end()) {
      order_.splice(order_.end(), order_, it->second.second);
      return decide(it->second.first);
    }
  }
  std::string error;
  int64_t tokens = count_tokens(chat, payload, error);
  if (tokens < 0) {
    RouteDecision d;
    d.error_status = 502;
    d.error = "long-model routing: " + error;
    return d;
  }
  Route r{tokens >= long_from_ ? kLong : kMain, tokens};
  if (chat) {
    std::lock_guard<std::mutex> lock(mu_);
    if (routes_.find(key) == routes_.end()) {
      order_.push_back(key);
      routes_.emplace(key, std::make_pair(r, std::prev(order_.end())));
      if (routes_.size() > max_conversations_) {
        routes_.erase(order_.front());
        order_.pop_front();
      }
    }
  }
  return decide(r);
}

}  // namespace onebit
