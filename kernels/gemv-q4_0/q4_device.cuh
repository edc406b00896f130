// Device helpers the GEMV variants share: reading a Q4_0 block's 2-byte-aligned quants and f16
// scales, and turning nibbles into the signed bytes the integer dot products take.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "blocks.h"
#include "device.cuh"

namespace gemv {

// Bytes 4i..4i+3 of a block's quants. A Q4_0 block is 18 bytes, so they are only 2-byte aligned:
// two halves.
__device__ __forceinline__ int quants_at(const uint8_t* qs, int i) {
  const uint16_t* p = reinterpret_cast<const uint16_t*>(qs) + 2 * i;
  return static_cast<int>(p[0] | (static_cast<uint32_t>(p[1]) << 16));
}

__device__ __forceinline__ float half_bits(uint16_t bits) { return __half2float(__ushort_as_half(bits)); }

// Four bytes 0..15 minus 8, as signed bytes: adding 0x78 cannot carry out of a byte, and the
// xor with 0x80 turns 0x78..0x87 into -8..7. Two instructions; __vsubss4, which saturates, is a
// dozen on sm_90.
__device__ __forceinline__ int nibbles_minus_8(int v) {
  return static_cast<int>((static_cast<uint32_t>(v) + 0x78787878u) ^ 0x80808080u);
}
// Low and high nibbles of four quant bytes (elements 4i.. and 16+4i..), minus 8.
__device__ __forceinline__ int low_minus_8(int v) { return nibbles_minus_8(v & 0x0F0F0F0F); }
__device__ __forceinline__ int high_minus_8(int v) { return nibbles_minus_8((v >> 4) & 0x0F0F0F0F); }

}  // namespace gemv
