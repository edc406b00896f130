// Facts about a GGUF model file, read from its metadata only (no tensor data) with ggml's own
// gguf reader, so 1bit sees a file exactly as the engine will. These are the settings that
// follow from the file itself; tuned settings come from recipes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace onebit {

struct ModelFacts {
  std::string path;
  std::string architecture;             // general.architecture
  std::string name;                     // general.name, may be empty
  int64_t expert_count = 0;             // <arch>.expert_count, 0 when absent
  bool moe = false;                     // expert_count > 0
  std::optional<uint32_t> file_type;    // general.file_type (llama_ftype)
  bool hadamard_q4_0 = false;           // onebit.hadamard_q4_0 == 32, stamped by `1bit rotate`
  std::optional<uint64_t> context_length;  // <arch>.context_length
  std::optional<uint32_t> pooling_type;    // <arch>.pooling_type: 1-3 embedding models, 4 rerankers
  uint32_t nextn_layers = 0;            // <arch>.nextn_predict_layers: MTP heads
  std::optional<uint32_t> block_count;  // <arch>.block_count: the model's layers, MTP ones included
  std::optional<uint32_t> embedding_length;  // <arch>.embedding_length
  std::optional<uint64_t> vocab_size;   // entries of tokenizer.ggml.tokens
  // The kind of speculative drafter the file is, from its architecture and tensors: "dflash",
  // "eagle3", "mtp-head" (a next-token layer without the model under it), "" for a model.
  std::string drafter;
  std::optional<uint32_t> block_size;   // dflash.block_size
  std::vector<int64_t> target_layers;   // <arch>.target_layers: the target layers a dflash or eagle3
                                        // drafter reads (the input of each)
  std::optional<uint32_t> target_hidden_size;  // eagle3.target_hidden_size
  std::optional<uint32_t> mask_token;   // tokenizer.ggml.mask_token_id: the token a dflash block
                                        // starts from
  int64_t tensor_count = 0;
  uint64_t file_size = 0;
};

// Reads the facts of the file at `path`. Throws Error("<path>: <what is wrong>") for a missing or
// unreadable file, a file that is not GGUF, a truncated or absurd header, or metadata of the
// wrong type.
ModelFacts read_model_facts(const std::string& path);

// Same, from bytes in memory (the fuzz target); `label` stands in for the path in messages.
ModelFacts model_facts_from_buffer(const void* data, size_t size, const std::string& label);

// What the model serves, from its pooling type: "embedding" (mean, cls or last pooling),
// "reranking" (rank pooling) or "llm".
std::string model_kind(const ModelFacts& facts);

// The layers under the MTP ones: what a drafter's target layer ids index.
uint32_t trunk_layers(const ModelFacts& facts);

// "Q4_0", "F16", ... for a general.file_type value; "type N" when unknown.
std::string file_type_name(uint32_t file_type);

}  // namespace onebit
