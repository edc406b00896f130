// The gated delta-net problem in the engine's layout (ggml's GGML_OP_GATED_DELTA_NET with a scalar
// gate per token and head), contiguous, and its inputs for a case.
//
// Per value head h of sequence b, with q/k head h % Hk (heads are tiled, as the engine does), the
// state S is Sk x Sv (rows over the key dimension, columns over the value dimension) and per token:
//   a = exp(g_t);  S <- a S;  delta = beta_t (v_t - S^T k_t);  S <- S + k_t delta^T;
//   out_t = S^T q_t / sqrt(S)
// Layouts (first index fastest, as ggml's ne[]):
//   q, k   [S, Hk, T, B]      v, attn out [S, Hv, T, B]      g, beta [1, Hv, T, B]
//   state  [S, S, Hv, B], stored transposed: state[(b Hv + h) S^2 + col S + i] = S[i][col]
//   output attn, then K snapshot slots of S^2 Hv B floats each: with K == 1 slot 0 is the final
//   state; with K > 1 the state after token t goes to slot T-1-t when that is below K (when T < K
//   only slots 0..T-1 are written).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gdn {

struct Shape {
  std::string name;
  int S = 128;     // head size (key and value)
  int Hv = 32;     // value heads
  int Hk = 32;     // q/k heads, dividing Hv
  int64_t T = 1;   // tokens per sequence
  int B = 1;       // sequences
  int K = 1;       // state snapshots
  bool large = false;  // checked on a few heads, timed in bench mode
};

// How the inputs are drawn. q and k rows are L2-normalized in every mode, beta from [0, 1].
enum class Mode {
  kHarsh,   // gates from [-20, -1e-4]: most tokens wipe the state, a few keep it
  kGentle,  // gates from [-0.05, -1e-4]: long memory, the state carries across chunks
};
const char* mode_name(Mode m);
const std::vector<Mode>& all_modes();

struct Problem {
  Shape shape;
  Mode mode = Mode::kHarsh;
  std::vector<float> q, k, v, g, beta, state;

  int64_t attn_elems() const { return int64_t{shape.S} * shape.Hv * shape.T * shape.B; }
  int64_t snapshot_elems() const { return int64_t{shape.S} * shape.S * shape.Hv * shape.B; }
  int64_t out_elems() const { return attn_elems() + shape.K * snapshot_elems(); }

  // Element offsets in the engine's contiguous layout.
  int64_t qk_at(int b, int64_t t, int hk) const { return ((b * shape.T + t) * shape.Hk + hk) * shape.S; }
  int64_t v_at(int b, int64_t t, int h) const { return ((b * shape.T + t) * shape.Hv + h) * shape.S; }
  int64_t gate_at(int b, int64_t t, int h) const { return (b * shape.T + t) * shape.Hv + h; }
  int64_t state_at(int b, int h) const { return (int64_t{b} * shape.Hv + h) * shape.S * shape.S; }
  int64_t snapshot_at(int slot, int b, int h) const { return attn_elems() + slot * snapshot_elems() + state_at(b, h); }
  // The slot that receives the state after token t, or -1.
  int slot_of(int64_t t) const {
    if (shape.K == 1) return t == shape.T - 1 ? 0 : -1;
    const int64_t slot = shape.T - 1 - t;
    return slot < shape.K ? static_cast<int>(slot) : -1;
  }
};

Problem make_problem(const Shape& s, Mode m, uint64_t seed);

// One (sequence, value head) pair: the unit the oracle and the checks work on.
struct Pair {
  int b, h;
};

}  // namespace gdn
