#include "ollama/ollama_api.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

namespace onebit {
namespace {

using nlohmann::json;

const char kNoImages[] =
    "images are not supported: 1bit runs text-only models, without a vision projector";

// Options that become the engine's field of the same meaning: Ollama's name, the engine's.
struct OptionField {
  const char* ollama;
  const char* engine;
  bool integer;
};
constexpr OptionField kOptionFields[] = {
    {"temperature", "temperature", false},     {"top_p", "top_p", false},
    {"top_k", "top_k", true},                  {"min_p", "min_p", false},
    {"typical_p", "typical_p", false},         {"seed", "seed", true},
    {"repeat_penalty", "repeat_penalty", false}, {"repeat_last_n", "repeat_last_n", true},
    {"presence_penalty", "presence_penalty", false}, {"frequency_penalty", "frequency_penalty", false},
    {"mirostat", "mirostat", true},            {"mirostat_tau", "mirostat_tau", false},
    {"mirostat_eta", "mirostat_eta", false},   {"num_keep", "n_keep", true},
};

bool is_true(const json& request, const char* key, bool fallback) {
  if (!request.contains(key) || request[key].is_null()) return fallback;
  if (!request[key].is_boolean()) throw OllamaError(400, std::string(key) + " must be true or false");
  return request[key].get<bool>();
}

std::string text_field(const json& object, const char* key, const std::string& where) {
  if (!object.contains(key) || object[key].is_null()) return std::string();
  if (!object[key].is_string()) throw OllamaError(400, where + key + " must be a string");
  return object[key].get<std::string>();
}

void refuse_images(const json& object) {
  if (object.contains("images") && object["images"].is_array() && !object["images"].empty())
    throw OllamaError(400, kNoImages);
}

// "format": "json" or a JSON schema, as the engine's response_format.
void apply_format(const json& request, json& body) {
  if (!request.contains("format") || request["format"].is_null()) return;
  const json& f = request["format"];
  if (f.is_string() && f.get<std::string>().empty()) return;
  if (f == "json") {
    // With a schema: the engine's chat formats take an empty one for none at all.
    body["response_format"] = {{"type", "json_object"}, {"schema", {{"type", "object"}}}};
  } else if (f.is_object()) {
    body["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "format"}, {"schema", f}}}};
  } else {
    throw OllamaError(400, "format must be \"json\" or a JSON schema object, not " + f.dump());
  }
}

void apply_think(const json& request, json& body) {
  if (!request.contains("think") || request["think"].is_null()) return;
  if (!request["think"].is_boolean()) throw OllamaError(400, "think must be true or false");
  body["chat_template_kwargs"] = {{"enable_thinking", request["think"].get<bool>()}};
}

// One of Ollama's chat messages as the engine's OpenAI-shaped one.
json engine_message(const json& m, size_t index) {
  const std::string where = "messages[" + std::to_string(index) + "].";
  if (!m.is_object()) throw OllamaError(400, "messages[" + std::to_string(index) + "] must be an object");
  refuse_images(m);
  const std::string role = text_field(m, "role", where);
  if (role.empty()) throw OllamaError(400, where + "role is required");
  json out = {{"role", role}, {"content", text_field(m, "content", where)}};
  if (const std::string thinking = text_field(m, "thinking", where); !thinking.empty())
    out["reasoning_content"] = thinking;
  if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
    if (!m["tool_calls"].is_array()) throw OllamaError(400, where + "tool_calls must be a list");
    json calls = json::array();
    for (const json& c : m["tool_calls"]) {
      const std::string at = where + "tool_calls[" + std::to_string(calls.size()) + "].";
      if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
        throw OllamaError(400, at + "function must be an object");
      const json& fn = c["function"];
      const json args = fn.contains("arguments") ? fn["arguments"] : json::object();
      calls.push_back({{"id", "call_" + std::to_string(calls.size())},
                       {"type", "function"},
                       {"function", {{"name", text_field(fn, "name", at + "function.")},
                                     {"arguments", args.is_string() ? args : json(args.dump())}}}});
    }
    out["tool_calls"] = calls;
  }
  if (const std::string id = text_field(m, "tool_call_id", where); !id.empty()) out["tool_call_id"] = id;
  return out;
}

// The fields every generating call shares: model, stream, options, format, think.
EngineCall generating_call(const json& request, const std::string& path, bool chat_reply) {
  EngineCall call;
  call.model = requested_model(request);
  call.path = path;
  call.chat_reply = chat_reply;
  call.stream = is_true(request, "stream", true);
  call.keep_alive = parse_keep_alive(request);
  call.body = {{"model", call.model}, {"stream", call.stream}};
  if (request.contains("options") && !request["options"].is_null()) {
    if (!request["options"].is_object()) throw OllamaError(400, "options must be an object");
    apply_options(request["options"], call.body);
  }
  apply_format(request, call.body);
  return call;
}

}  // namespace

std::string ollama_error_body(const std::string& message) {
  return json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

json parse_ollama_request(const std::string& body) {
  json j = json::parse(body.empty() ? std::string("{}") : body, nullptr, false);
  if (j.is_discarded()) throw OllamaError(400, "the request body is not valid JSON");
  if (!j.is_object()) throw OllamaError(400, "the request body must be a JSON object");
  return j;
}

std::string requested_model(const json& request) {
  std::string name = text_field(request, "model", "");
  if (name.empty()) name = text_field(request, "name", "");
  if (name.empty()) throw OllamaError(400, "model is required");
  constexpr std::string_view kLatest = ":latest";
  if (name.size() > kLatest.size() && name.compare(name.size() - kLatest.size(), kLatest.size(), kLatest) == 0)
    name.resize(name.size() - kLatest.size());
  return name;
}

KeepAlive parse_keep_alive(const json& request) {
  KeepAlive k;
  if (!request.contains("keep_alive") || request["keep_alive"].is_null()) return k;
  const json& v = request["keep_alive"];
  k.given = true;
  // Negative is forever, and so is a time past what milliseconds in int64 hold (292 million years).
  auto set_seconds = [&k](double s) {
    if (s < 0 || !(s * 1000 < 9.2e18)) k.forever = true;
    else k.duration = std::chrono::milliseconds(static_cast<int64_t>(std::llround(s * 1000)));
  };
  if (v.is_number()) {
    set_seconds(v.get<double>());
    return k;
  }
  const std::string bad = "keep_alive must be a number of seconds or a duration such as \"5m\", not " + v.dump();
  if (!v.is_string() || v.get<std::string>().empty()) throw OllamaError(400, bad);
  const std::string s = v.get<std::string>();
  size_t i = 0;
  const bool negative = s[0] == '-';
  if (negative) ++i;
  double total = 0;
  bool any = false;
  while (i < s.size()) {
    size_t start = i, digits = 0, points = 0;
    for (; i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.'); ++i)
      (s[i] == '.' ? points : digits)++;
    if (digits == 0 || points > 1) throw OllamaError(400, bad);
    // Digits with at most one point always parse; too many of them are infinity, not an error.
    const double number = std::strtod(s.substr(start, i - start).c_str(), nullptr);
    size_t unit_start = i;
    while (i < s.size() && std::isalpha(static_cast<unsigned char>(s[i]))) ++i;
    const std::string unit = s.substr(unit_start, i - unit_start);
    double scale;
    if (unit.empty() && !any && i == s.size()) scale = 1;  // a bare number: seconds
    else if (unit == "ms") scale = 1e-3;
    else if (unit == "s") scale = 1;
    else if (unit == "m") scale = 60;
    else if (unit == "h") scale = 3600;
    else throw OllamaError(400, bad);
    total += number * scale;
    any = true;
  }
  if (!any) throw OllamaError(400, bad);
  set_seconds(negative ? -total : total);
  return k;
}

void apply_options(const json& options, json& body) {
  for (const OptionField& f : kOptionFields) {
    if (!options.contains(f.ollama) || options[f.ollama].is_null()) continue;
    const json& v = options[f.ollama];
    if (!v.is_number() || (f.integer && !v.is_number_integer()))
      throw OllamaError(400, std::string("options.") + f.ollama + " must be " + (f.integer ? "an integer" : "a number"));
    body[f.engine] = v;
  }
  if (options.contains("num_predict") && !options["num_predict"].is_null()) {
    if (!options["num_predict"].is_number_integer()) throw OllamaError(400, "options.num_predict must be an integer");
    // Negative is Ollama's "no limit" (-1) or "fill the context" (-2): the engine's own default.
    if (const int64_t n = options["num_predict"]; n >= 0) body["max_tokens"] = n;
  }
  if (options.contains("stop") && !options["stop"].is_null()) {
    json stop = options["stop"].is_string() ? json::array({options["stop"]}) : options["stop"];
    if (!stop.is_array()) throw OllamaError(400, "options.stop must be a list of strings");
    for (const json& s : stop)
      if (!s.is_string()) throw OllamaError(400, "options.stop must be a list of strings");
    body["stop"] = stop;
  }
}

EngineCall chat_call(const json& request) {
  EngineCall call = generating_call(request, "/v1/chat/completions", true);
  json messages = json::array();
  if (request.contains("messages") && !request["messages"].is_null()) {
    if (!request["messages"].is_array()) throw OllamaError(400, "messages must be a list");
    for (const json& m : request["messages"]) messages.push_back(engine_message(m, messages.size()));
  }
  call.empty = messages.empty();
  call.body["messages"] = messages;
  if (request.contains("tools") && !request["tools"].is_null()) {
    if (!request["tools"].is_array()) throw OllamaError(400, "tools must be a list");
    if (!request["tools"].empty()) call.body["tools"] = request["tools"];
  }
  apply_think(request, call.body);
  return call;
}

EngineCall generate_call(const json& request) {
  refuse_images(request);
  if (!text_field(request, "suffix", "").empty())
    throw OllamaError(400, "suffix (fill in the middle) is not supported; send the whole prompt");
  if (request.contains("context") && request["context"].is_array() && !request["context"].empty())
    throw OllamaError(400, "context (the token list of an earlier answer) is not supported; use /api/chat "
                           "to continue a conversation");
  if (!text_field(request, "template", "").empty())
    throw OllamaError(400, "template is not supported: the model's own chat template applies (or \"raw\": true)");
  const bool raw = is_true(request, "raw", false);
  EngineCall call = generating_call(request, raw ? "/v1/completions" : "/v1/chat/completions", false);
  const std::string prompt = text_field(request, "prompt", "");
  const std::string system = text_field(request, "system", "");
  call.empty = prompt.empty();
  if (raw) {
    call.body["prompt"] = prompt;
  } else {
    json messages = json::array();
    if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
    messages.push_back({{"role", "user"}, {"content", prompt}});
    call.body["messages"] = messages;
    apply_think(request, call.body);
  }
  return call;
}

EngineCall embed_call(const json& request, bool legacy) {
  EngineCall call;
  call.model = requested_model(request);
  call.path = "/v1/embeddings";
  call.stream = false;
  call.keep_alive = parse_keep_alive(request);
  json input;
  if (legacy) {
    input = text_field(request, "prompt", "");
  } else {
    input = request.value("input", json());
    const bool texts = input.is_array() && std::all_of(input.begin(), input.end(), [](const json& t) { return t.is_string(); });
    if (!input.is_string() && !texts) throw OllamaError(400, "input must be a string or a list of strings");
  }
  call.empty = input.empty() || (input.is_string() && input.get<std::string>().empty());
  call.body = {{"model", call.model}, {"input", input}, {"encoding_format", "float"}};
  return call;
}

}  // namespace onebit
