// What the CUDA kernel and the CPU reference must agree on.
#pragma once

namespace gdn {

constexpr int kChunk = 64;           // tokens per chunk
constexpr double kSnrBarDb = 100.0;  // the accuracy bar against the float64 oracle

}  // namespace gdn
