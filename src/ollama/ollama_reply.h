// The engine's OpenAI-shaped answers, translated into Ollama's as they pass (http/server.h's
// BodyTranslation): an SSE stream becomes NDJSON, one line per event as it arrives, and a
// whole answer one JSON object.
//
// Each line or object carries model and created_at (RFC 3339, UTC), then "message" (chat) or
// "response" (generate) and done; the last one done: true, done_reason ("stop" or "length") and
// the durations in nanoseconds, from the engine's `timings`: prompt_eval_count (the prompt's
// tokens, those the engine had cached included) and prompt_eval_duration, eval_count and
// eval_duration, load_duration (loading the model for this request) and total_duration (since
// the request arrived). An engine error becomes {"error": message}: with the engine's status,
// or as the stream's last line once the stream has begun.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "http/server.h"

namespace onebit {

// RFC 3339 in UTC with microseconds: "2025-01-02T03:04:05.123456Z".
std::string ollama_time(std::chrono::system_clock::time_point t);

// Ollama's timing fields from the engine's `timings` object.
nlohmann::json ollama_durations(const nlohmann::json& timings, int64_t total_ns, int64_t load_ns);

enum class ReplyKind { kChat, kGenerate, kEmbed, kEmbeddings };

// The answer to a request that only loads or unloads its model: done_reason "load" or "unload".
nlohmann::json ollama_load_reply(const std::string& model, ReplyKind kind, const std::string& done_reason);

class OllamaReply : public BodyTranslation {
 public:
  using Clock = std::chrono::steady_clock;
  OllamaReply(ReplyKind kind, std::string model, bool stream, Clock::time_point start, int64_t load_ns)
      : kind_(kind), model_(std::move(model)), stream_(stream), start_(start), load_ns_(load_ns) {}

  std::string begin(int status) override;
  std::string feed(std::string_view data) override;
  std::string end() override;

 private:
  // One SSE event's data; returns its NDJSON line, or "" when it says nothing to the client.
  std::string event(const std::string& data);
  // The whole answer of a non-streamed request.
  nlohmann::json whole(const nlohmann::json& engine) const;
  // Model, created_at and the text (or tool calls) in chat's or generate's field.
  nlohmann::json line(const std::string& text, const std::string& thinking, const nlohmann::json& tool_calls) const;
  nlohmann::json final_line();
  int64_t elapsed_ns() const;

  ReplyKind kind_;
  std::string model_;
  bool stream_;
  Clock::time_point start_;
  int64_t load_ns_;
  int status_ = 0;
  std::string pending_;  // bytes of an event (or of a whole body) not complete yet
  bool done_ = false;    // the last line went out
  std::string done_reason_ = "stop";
  nlohmann::json timings_ = nlohmann::json::object();
  std::map<int64_t, nlohmann::json> tool_calls_;  // streamed tool calls by index, completed at the end
};

}  // namespace onebit
