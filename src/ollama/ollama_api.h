// Ollama's API requests, translated into the engine's OpenAI-compatible ones. Pure functions, no
// I/O: ollama_routes.h sends what they return.
//
// The contract, as Ollama documents its API:
// - /api/chat goes to the engine's /v1/chat/completions; /api/generate too, its prompt (and
//   `system`) as the conversation, so the model's chat template applies as Ollama applies it,
//   or with "raw": true to /v1/completions with the prompt as it is. /api/embed and
//   /api/embeddings go to /v1/embeddings.
// - "stream" is true unless the request says false.
// - `options`: num_predict, temperature, top_p, top_k, min_p, typical_p, seed, stop,
//   repeat_penalty, repeat_last_n, presence_penalty, frequency_penalty, mirostat,
//   mirostat_tau, mirostat_eta and num_keep become the engine's sampling fields. Options that
//   size a running engine (num_ctx, num_batch, num_gpu, num_thread, ...) are ignored, as Ollama
//   ignores them once the model is loaded: the engine's context is the one it was started with.
//   Other keys are ignored, as Ollama ignores options it does not know.
// - "format": "json" asks for a JSON object, a JSON schema in "format" for JSON that fits it
//   (the engine's response_format). "think": true/false switches the template's thinking.
// - "images" are refused: the engine runs text models without a vision projector.
// - Bad input (not JSON, no model, a field of the wrong type) is an OllamaError(400) that says
//   which field and why; the routes answer it as Ollama does, {"error": "..."}.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace onebit {

// A failure with Ollama's shape: {"error": message} with `status` (400 bad input, 404 unknown
// model, 500 a load or engine failure).
struct OllamaError : Error {
  OllamaError(int status, const std::string& message) : Error(message), status(status) {}
  int status;
};

// {"error": message}.
std::string ollama_error_body(const std::string& message);

// The request body as a JSON object; OllamaError(400) when it is not one.
nlohmann::json parse_ollama_request(const std::string& body);

// The model a request names ("model", or the older "name"), without a ":latest" tag, which
// names the same model. OllamaError(400) when it names none.
std::string requested_model(const nlohmann::json& request);

// How long the model stays loaded after the request, from "keep_alive": seconds as a number,
// or a duration ("5m", "1h30m", "90s", "500ms"; a bare number is seconds). Negative: forever.
struct KeepAlive {
  bool given = false;  // absent: the server's own rule
  bool forever = false;
  std::chrono::milliseconds duration{0};
  bool unload_now() const { return given && !forever && duration.count() == 0; }
};
KeepAlive parse_keep_alive(const nlohmann::json& request);

// What the engine is asked, and how its answer is shaped back.
struct EngineCall {
  std::string path;  // the engine's endpoint
  nlohmann::json body;
  std::string model;
  bool stream = true;
  bool chat_reply = true;  // the answer is a "message" (chat) rather than a "response" (generate)
  bool empty = false;      // nothing to generate: the request only loads or unloads the model
  KeepAlive keep_alive;
};

EngineCall chat_call(const nlohmann::json& request);
EngineCall generate_call(const nlohmann::json& request);
// `legacy`: /api/embeddings' {"prompt"} rather than /api/embed's {"input": text or list}.
EngineCall embed_call(const nlohmann::json& request, bool legacy);

// Ollama's `options` laid onto an engine request body.
void apply_options(const nlohmann::json& options, nlohmann::json& engine_body);

}  // namespace onebit
