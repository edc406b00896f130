// Where 1bit finds what it was not told on the command line. A build tree and an installed
// prefix share one layout: bin/1bit beside bin/llama-server, and share/vocab with the engine's
// tokenizer-only GGUFs; a checkout also has models/ two levels above bin/.
#pragma once

#include <string>

namespace onebit {

std::string executable_dir();        // the directory of the running 1bit binary
std::string default_llama_server();  // bin/llama-server beside 1bit
std::string engine_vocab_dir();      // share/vocab
// The default model: the first models/1bit-small-*.gguf that is not a drafter, else the first
// 1bit-tiny-*.gguf (the same directory first), looked for in
// $ONEBIT_MODELS_DIR, then the checkout's models/, then share/1bit/models; "" when none.
std::string default_model_path();
// The first of those directories that exists; "" when none does.
std::string default_models_dir();

}  // namespace onebit
