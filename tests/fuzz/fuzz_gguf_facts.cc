// libFuzzer target: the GGUF metadata of an untrusted model file, read by model_facts_from_buffer
// through ggml's own gguf reader. Rejection must be an onebit::Error; anything else is a bug.
#include <cstddef>
#include <cstdint>

#include "base/error.h"
#include "model/gguf_facts.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    onebit::ModelFacts f = onebit::model_facts_from_buffer(data, size, "fuzz");
    // What passed validation must hold together; serve relies on these without rechecking.
    if (f.architecture.empty() || f.moe != (f.expert_count > 0) || f.file_size != size ||
        (f.block_size && (f.drafter != "dflash" || *f.block_size < 2)) || f.tensor_count < 0 ||
        (f.block_count && f.nextn_layers > *f.block_count))
      __builtin_trap();
    if (f.file_type) (void)onebit::file_type_name(*f.file_type);
  } catch (const onebit::Error&) {
    // A rejected file is the expected outcome for most inputs.
  }
  return 0;
}
