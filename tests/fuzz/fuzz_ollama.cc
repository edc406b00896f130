// libFuzzer target: Ollama's API requests (untrusted, from any local client) through their
// translation into engine requests, and engine answers through the translation back, a stream
// cut at every point the input's first byte picks. A request may be refused only with an
// OllamaError; any other exception or crash is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ollama/ollama_api.h"
#include "ollama/ollama_reply.h"

namespace {

using namespace onebit;

void translate_request(const std::string& body) {
  try {
    const nlohmann::json request = parse_ollama_request(body);
    chat_call(request);
  } catch (const OllamaError&) {
  }
  for (auto call : {+[](const nlohmann::json& r) { generate_call(r); }, +[](const nlohmann::json& r) { embed_call(r, false); },
                    +[](const nlohmann::json& r) { embed_call(r, true); }}) {
    try {
      call(parse_ollama_request(body));
    } catch (const OllamaError&) {
    }
  }
}

// The answer fed in two pieces, split at `cut`; every line it yields must be JSON.
void translate_answer(std::string_view answer, size_t cut, bool stream, int status) {
  OllamaReply reply(stream ? ReplyKind::kChat : ReplyKind::kEmbed, "m", stream, std::chrono::steady_clock::now(), 0);
  reply.begin(status);
  std::string out = reply.feed(answer.substr(0, cut));
  out += reply.feed(answer.substr(cut));
  out += reply.end();
  size_t pos = 0;
  while (pos < out.size()) {
    size_t end = out.find('\n', pos);
    if (end == std::string::npos) end = out.size();
    if (nlohmann::json::parse(out.substr(pos, end - pos), nullptr, false).is_discarded()) __builtin_trap();
    pos = end + 1;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  translate_request(input);
  const size_t cut = input.empty() ? 0 : data[0] % (input.size() + 1);
  translate_answer(input, cut, true, 200);
  translate_answer(input, cut, false, 200);
  translate_answer(input, cut, true, data[0] & 1 ? 500 : 400);
  return 0;
}
