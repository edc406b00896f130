// gdn-prefill: the chunked (WY / UT) form in two or three kernels, in four variants: v1 does every
// product in float32 SIMT arithmetic; v2 does the matrix products on TF32 tensor cores with the
// 3xTF32 split (each operand a TF32 high part plus a TF32 remainder; hi*hi + hi*lo + lo*hi keeps
// float accuracy), mma.m16n8k8 fragments straight from shared memory; v3 is v2 with the scan's
// state tile and U kept split in shared memory (Cells<true>), two prep CTAs per SM and the K > 1
// snapshots as tensor-core products; v4 is v3 with O taken out of the scan (below).
//
//   prep  (prep.cuh) grid (chunks, Hv, B): each chunk's own quantities, independent of the state
//         and so all chunks at once: G (cumulative log-gates, in double), A = strictly lower
//         beta_t e^{G_t - G_u} k_t.k_u, W and U' by forward substitution of (I + A) X = rhs,
//         P = e^{G_t - G_u} q_t.k_u (u <= t). Written to scratch.
//   scan  (scan.cuh) grid (S / 32, Hv, B): a CTA owns 32 value columns of one head's state
//         (columns of the delta rule are independent) and walks the chunks in order:
//         U = U' - W S;  O = scale (e^{G} Q S + P U);  snapshots;  S <- e^{G_last} S + K~^T U.
//   v4    the scan's sequential chain without O, on 16 columns a CTA (two CTAs an SM): it writes
//         U and each chunk's starting state S_c to scratch, and out (output.cuh), grid (chunks x
//         Hv x S / 32, B), computes every chunk's O = scale (e^{G} Q S_c + P U). out starts while
//         the scan runs and takes each chunk as soon as its scan CTAs have signalled it (ready
//         counters).
//
// The kernels move their inputs with cp.async, every load of a chunk in flight at once: with one
// CTA per SM nothing else hides a global load's latency. The scan of v1 and v4 loads the next
// chunk's W and U' while it computes O (v4: while it waits for K), its Q and P (v1) during the
// snapshots and the state update, and its K during the next chunk's U. v2 and v3 leave every copy
// to a ninth warp (kProducer), which issues them while the other eight compute.
//
// What the kernels share is in chunks.cuh and products.cuh. The variants that lost to these are in
// variants/ (the driver and the emulator check run them; the engine does not carry them).
#include <atomic>
#include <cstdint>

#include "chunks.cuh"
#include "kernel.cuh"
#include "output.cuh"
#include "prep.cuh"
#include "scan.cuh"

namespace gdn {
namespace {

template <int D, bool kTC, bool kSplit, bool kApart = false>
cudaError_t launch(const GdnArgs& a, const Scratch& s, cudaStream_t stream) {
  static std::atomic<uint64_t> scan_ready{0};
  cudaError_t e = start_prep<D, kTC, kSplit>(a, s, stream);
  if (e == cudaSuccess)
    e = start(gdn_scan<D, kTC, kSplit, kApart>, dim3(D / kScanCols<kApart>, a.Hv, a.B),
              scan_smem<D, kTC, kSplit, kApart>(), scan_ready, stream, a, s, kScanThreads<kTC, kApart>);
  if constexpr (kApart)
    if (e == cudaSuccess) e = start_out<D, kTileV / kTileV4>(a, s, stream);
  return e;
}

}  // namespace

bool gdn_prefill_supported(const GdnArgs& a) {
  // Heads and sequences are grid dimensions y and z (at most 65535 each).
  return (a.S == 64 || a.S == 128) && a.Hk > 0 && a.Hv > 0 && a.Hv <= 65535 && a.Hv % a.Hk == 0 && a.Bqk > 0 &&
         a.B > 0 && a.B <= 65535 && a.B % a.Bqk == 0 && a.T > 0 && a.K >= 1;
}

size_t gdn_prefill_scratch_bytes(const GdnArgs& a, Variant v) { return carved_bytes(a, v == Variant::kOutputApart); }

cudaError_t gdn_prefill(const GdnArgs& a, void* scratch, cudaStream_t stream, Variant v) {
  // The scan copies scratch in 16-byte pieces.
  if (!gdn_prefill_supported(a) || reinterpret_cast<uintptr_t>(scratch) % 16 != 0) return cudaErrorInvalidValue;
  const Scratch s = carve(a, scratch, v == Variant::kOutputApart);
  switch (v) {
    case Variant::kTensorCores:
      return a.S == 128 ? launch<128, true, false>(a, s, stream) : launch<64, true, false>(a, s, stream);
    case Variant::kTensorCoresSplit:
      return a.S == 128 ? launch<128, true, true>(a, s, stream) : launch<64, true, true>(a, s, stream);
    case Variant::kOutputApart:
      return a.S == 128 ? launch<128, true, true, true>(a, s, stream) : launch<64, true, true, true>(a, s, stream);
    case Variant::kSimt:
      break;
  }
  return a.S == 128 ? launch<128, false, false>(a, s, stream) : launch<64, false, false>(a, s, stream);
}

}  // namespace gdn
