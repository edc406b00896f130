#include "ollama/ollama_reply.h"

#include <cstdio>
#include <ctime>
#include <limits>

#include "ollama/ollama_api.h"

namespace onebit {
namespace {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Milliseconds as nanoseconds, held to [0, INT64_MAX]: a double out of an integer's range has no
// conversion, so an answer saying 1e300 ms must not reach the cast.
int64_t ms_to_ns(const json& timings, const char* key) {
  if (!timings.contains(key) || !timings[key].is_number()) return 0;
  const double ns = timings[key].get<double>() * 1e6;
  if (!(ns > 0)) return 0;
  return ns < 9.2e18 ? static_cast<int64_t>(ns) : std::numeric_limits<int64_t>::max();
}

// A count or index of an engine answer; 0 where it is absent, fractional, negative or past 2^62,
// so that two of them add up without overflow.
int64_t count(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number_integer()) return 0;
  constexpr int64_t kMax = int64_t{1} << 62;
  if (j[key].is_number_unsigned()) return j[key].get<uint64_t>() <= uint64_t{kMax} ? j[key].get<int64_t>() : 0;
  const int64_t n = j[key].get<int64_t>();
  return n >= 0 && n <= kMax ? n : 0;
}

// The message of an engine error: {"error": {"message": ...}} or {"error": "..."}, else the text.
std::string error_message(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error")) {
    const json& e = j["error"];
    if (e.is_string()) return e;
    if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"];
  }
  return body.empty() ? "the engine answered with an error and no message" : body;
}

std::string done_reason(const json& finish) {
  return finish == "length" ? "length" : "stop";  // "stop" and "tool_calls" both end a turn
}

// OpenAI's tool calls (arguments as a JSON string) in Ollama's shape (arguments as an object).
json ollama_tool_call(const std::string& name, const std::string& arguments) {
  json args = json::parse(arguments.empty() ? std::string("{}") : arguments, nullptr, false);
  if (args.is_discarded()) args = arguments;
  return {{"function", {{"name", name}, {"arguments", args}}}};
}

}  // namespace

std::string ollama_time(std::chrono::system_clock::time_point t) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(us / 1000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];  // room for any int fields, so the compiler can see no truncation
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(us % 1000000));
  return buf;
}

json ollama_durations(const json& timings, int64_t total_ns, int64_t load_ns) {
  return {{"total_duration", total_ns},
          {"load_duration", load_ns},
          {"prompt_eval_count", count(timings, "prompt_n") + count(timings, "cache_n")},
          {"prompt_eval_duration", ms_to_ns(timings, "prompt_ms")},
          {"eval_count", count(timings, "predicted_n")},
          {"eval_duration", ms_to_ns(timings, "predicted_ms")}};
}

json ollama_load_reply(const std::string& model, ReplyKind kind, const std::string& reason) {
  json j = {{"model", model}, {"created_at", ollama_time(std::chrono::system_clock::now())}};
  if (kind == ReplyKind::kChat) j["message"] = {{"role", "assistant"}, {"content", ""}};
  else j["response"] = "";
  j["done"] = true;
  j["done_reason"] = reason;
  return j;
}

int64_t OllamaReply::elapsed_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_).count();
}

std::string OllamaReply::begin(int status) {
  status_ = status;
  return status == 200 && stream_ ? "application/x-ndjson" : "application/json; charset=utf-8";
}

json OllamaReply::line(const std::string& text, const std::string& thinking, const json& tool_calls) const {
  json j = {{"model", model_}, {"created_at", ollama_time(std::chrono::system_clock::now())}};
  if (kind_ == ReplyKind::kChat) {
    json m = {{"role", "assistant"}, {"content", text}};
    if (!thinking.empty()) m["thinking"] = thinking;
    if (!tool_calls.empty()) m["tool_calls"] = tool_calls;
    j["message"] = m;
  } else {
    j["response"] = text;
    if (!thinking.empty()) j["thinking"] = thinking;
  }
  j["done"] = false;
  return j;
}

json OllamaReply::final_line() {
  json calls = json::array();
  for (const auto& [index, c] : tool_calls_) calls.push_back(ollama_tool_call(c.value("name", ""), c.value("arguments", "")));
  json j = line("", "", calls);
  j["done"] = true;
  j["done_reason"] = done_reason_;
  j.update(ollama_durations(timings_, elapsed_ns(), load_ns_));
  done_ = true;
  return j;
}

std::string OllamaReply::event(const std::string& data) {
  if (data == "[DONE]") return dump(final_line()) + "\n";
  const json j = json::parse(data, nullptr, false);
  if (!j.is_object()) return std::string();
  if (j.contains("error")) {
    done_ = true;
    return ollama_error_body(error_message(data)) + "\n";
  }
  if (j.contains("timings") && j["timings"].is_object()) timings_ = j["timings"];
  if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return std::string();
  const json& choice = j["choices"][0];
  if (choice.contains("finish_reason") && !choice["finish_reason"].is_null())
    done_reason_ = done_reason(choice["finish_reason"]);
  std::string text, thinking;
  if (choice.contains("delta") && choice["delta"].is_object()) {
    const json& d = choice["delta"];
    if (d.contains("content") && d["content"].is_string()) text = d["content"];
    if (d.contains("reasoning_content") && d["reasoning_content"].is_string()) thinking = d["reasoning_content"];
    if (d.contains("tool_calls") && d["tool_calls"].is_array())
      for (const json& c : d["tool_calls"]) {
        json& call = tool_calls_.try_emplace(count(c, "index"), json::object()).first->second;
        const json fn = c.value("function", json::object());
        if (fn.contains("name") && fn["name"].is_string()) call["name"] = call.value("name", "") + fn["name"].get<std::string>();
        if (fn.contains("arguments") && fn["arguments"].is_string())
          call["arguments"] = call.value("arguments", "") + fn["arguments"].get<std::string>();
      }
  } else if (choice.contains("text") && choice["text"].is_string()) {
    text = choice["text"];
  }
  if (text.empty() && thinking.empty()) return std::string();
  return dump(line(text, thinking, json::array())) + "\n";
}

std::string OllamaReply::feed(std::string_view data) {
  pending_.append(data);
  if (status_ != 200 || !stream_ || done_) return std::string();
  std::string out;
  size_t end;
  while (!done_ && (end = pending_.find("\n\n")) != std::string::npos) {
    const std::string ev = pending_.substr(0, end);
    pending_.erase(0, end + 2);
    // An event's data lines, joined; comment lines (": ping") and other fields say nothing here.
    std::string payload;
    size_t pos = 0;
    while (pos < ev.size()) {
      size_t eol = ev.find('\n', pos);
      if (eol == std::string::npos) eol = ev.size();
      const std::string_view l(ev.data() + pos, eol - pos);
      if (l.rfind("data:", 0) == 0) {
        std::string_view v = l.substr(5);
        if (!v.empty() && v[0] == ' ') v.remove_prefix(1);
        if (!payload.empty()) payload += '\n';
        payload.append(v);
      }
      pos = eol + 1;
    }
    try {
      if (!payload.empty()) out += event(payload);
    } catch (const json::exception&) {
      // An event of a shape the engine does not send says nothing.
    }
  }
  return out;
}

json OllamaReply::whole(const json& engine) const {
  const json usage = engine.value("usage", json::object());
  if (kind_ == ReplyKind::kEmbed || kind_ == ReplyKind::kEmbeddings) {
    std::map<int64_t, json> by_index;
    for (const json& d : engine.value("data", json::array())) by_index[count(d, "index")] = d.value("embedding", json::array());
    json vectors = json::array();
    for (auto& [i, v] : by_index) vectors.push_back(v);
    if (kind_ == ReplyKind::kEmbeddings) return {{"embedding", vectors.empty() ? json::array() : vectors[0]}};
    return {{"model", model_}, {"embeddings", vectors}, {"total_duration", elapsed_ns()},
            {"load_duration", load_ns_}, {"prompt_eval_count", count(usage, "prompt_tokens")}};
  }
  const json choices = engine.value("choices", json::array());
  const json choice = choices.empty() ? json::object() : choices[0];
  std::string text, thinking;
  json calls = json::array();
  if (choice.contains("message") && choice["message"].is_object()) {
    const json& m = choice["message"];
    if (m.contains("content") && m["content"].is_string()) text = m["content"];
    if (m.contains("reasoning_content") && m["reasoning_content"].is_string()) thinking = m["reasoning_content"];
    for (const json& c : m.value("tool_calls", json::array())) {
      const json fn = c.value("function", json::object());
      calls.push_back(ollama_tool_call(fn.value("name", ""), fn.value("arguments", "")));
    }
  } else if (choice.contains("text") && choice["text"].is_string()) {
    text = choice["text"];
  }
  json j = line(text, thinking, calls);
  j["done"] = true;
  j["done_reason"] = done_reason(choice.value("finish_reason", json("stop")));
  j.update(ollama_durations(engine.value("timings", json::object()), elapsed_ns(), load_ns_));
  return j;
}

std::string OllamaReply::end() {
  if (status_ != 200) return ollama_error_body(error_message(pending_));
  if (!stream_) {
    const json j = json::parse(pending_, nullptr, false);
    try {
      if (j.is_object()) return dump(whole(j));
    } catch (const json::exception&) {
    }
    return ollama_error_body("the engine's answer is not of the shape it sends");
  }
  if (done_) return std::string();
  done_ = true;
  return ollama_error_body("the engine's stream ended before its last event") + "\n";
}

}  // namespace onebit
