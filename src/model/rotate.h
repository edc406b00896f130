// `1bit rotate`: a Hadamard-rotated Q4_0 file (H32) from a higher-precision one.
//
// Every weight that multiplies activations (attention q/k/v/qkv/gate/output, FFN gate/up/down and
// their expert and shared-expert forms, the delta-net projections) is multiplied, per 32-element
// block of its input dimension, by the normalized 32-point Hadamard matrix H (H·Hᵀ = I) and then
// quantized to Q4_0 with the engine's own quantizer; every other tensor keeps the source's type
// and bytes, and the file is stamped onebit.hadamard_q4_0 = 32. A runtime that rotates each
// 32-block of the activations meeting such a weight the same way computes W'·(Hx) = W·x up to
// rounding, with the outliers of both spread over their blocks. `plain` quantizes the same
// tensors without rotating or stamping, so the two can be compared from one source.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace onebit {

// Whether a tensor of this name is one rotate rotates (and quantizes).
bool is_rotated_weight(const std::string& tensor_name);

// x[0..31] := H·x, H the normalized 32-point Hadamard matrix (a fast Walsh-Hadamard transform).
void hadamard32(float* x);

// An importance matrix (llama-imatrix's GGUF output): for each weight, the mean square of each
// input over the tokens it saw, one row of the input's length per matrix (per expert).
struct Importance {
  std::map<std::string, std::vector<float>> weights;  // weight name -> matrices x input length
};

// Reads one. Throws Error for a file that is not a GGUF importance matrix or holds none.
Importance load_importance(const std::string& path);

struct RotateOptions {
  bool plain = false;                     // quantize without rotating or stamping
  int threads = 0;                        // 0: every core
  const Importance* importance = nullptr;  // weights the quantizer's error by it (block means when rotated)
};

struct RotateProgress {
  int64_t tensor = 0, tensors = 0;  // 1-based tensor being written, of how many
  uint64_t bytes = 0, total = 0;    // output bytes written, of how many
};

struct RotateSummary {
  int64_t rotated = 0, kept = 0;  // tensors quantized to Q4_0, tensors kept as they were
  uint64_t bytes = 0;             // the output's size
  int64_t without_importance = 0;  // of those quantized, the ones the importance matrix had no data for
};

// Writes `out` from `in`. The output appears under its name only when complete and checked (every
// Q4_0 tensor in it is one this run quantized); nothing is left behind on failure. Throws Error for
// a source that is not a readable GGUF, already stamped, or holding a weight to rotate in another
// type than F32, F16, BF16 or Q8_0 (rotating weights already rounded to 4 bits adds their error),
// a weight whose input dimension is not a multiple of 32, an importance matrix whose entry for a
// weight has another size, and a failed write.
RotateSummary rotate_model(const std::string& in, const std::string& out, const RotateOptions& options,
                           const std::function<void(const RotateProgress&)>& progress = nullptr);

}  // namespace onebit
