// The answers a kernel is judged by, per (sequence, value head) pair.
//   oracle:    float64, token by token, exactly the engine op's recurrence (problem.h).
//   reference: float, the chunked form the CUDA kernel computes (its arithmetic, in order), so a
//              change of algorithm is checked on the CPU before it meets the GPU:
//     per chunk of C tokens, with G_t the cumulative log-gate inside the chunk,
//       A[t][s] = beta_t exp(G_t - G_s) k_t.k_s (s < t);  (I + A) W = diag(beta e^G) K;
//       (I + A) U' = diag(beta) V;  P[t][s] = exp(G_t - G_s) q_t.k_s (s <= t)
//     then, carrying the state S from chunk to chunk:
//       U = U' - W S;  O = scale (diag(e^G) Q S + P U);  S <- e^{G_last} S + (diag(e^{G_last - G}) K)^T U
#pragma once

#include <vector>

#include "accuracy.h"
#include "problem.h"

namespace gdn {

using kernels::Accuracy;
using kernels::compare;

// A pair's outputs: attn[t * S + col], then the written snapshot slots in slot order, each in the
// state's transposed layout (col * S + i).
template <typename T>
struct PairOutput {
  std::vector<T> attn;
  std::vector<T> snapshots;
};

// Appends one pair's outputs to those of the pairs before it.
template <typename T>
void append(PairOutput<T>& all, const PairOutput<T>& one) {
  all.attn.insert(all.attn.end(), one.attn.begin(), one.attn.end());
  all.snapshots.insert(all.snapshots.end(), one.snapshots.begin(), one.snapshots.end());
}

// Attention outputs and snapshots, each judged against the oracle.
struct Judged {
  Accuracy attn, snapshots;
};
inline Judged judge(const PairOutput<double>& want, const PairOutput<float>& got) {
  return {compare(want.attn, got.attn), compare(want.snapshots, got.snapshots)};
}

// How many snapshot slots the op writes: 1 for K == 1, else min(T, K).
int written_slots(const Shape& s);

void oracle_pair(const Problem& p, Pair pair, PairOutput<double>& out);
// How the reference carries U from chunk to chunk. kSequential: U = U' - W S after the state
// update, as the kernels do. kLookAhead: the next chunk's U from this chunk's state and U before
// the update, U(c+1) = U'(c+1) - e^{G_last} W(c+1) S(c) - M(c+1) U(c) with M(c+1) = W(c+1) K~(c)^T
// (program.md, idea 1): the same result by other products, checked for float accuracy here
// before a kernel takes it.
enum class Chain { kSequential, kLookAhead };
void reference_pair(const Problem& p, Pair pair, int chunk, PairOutput<float>& out,
                    Chain chain = Chain::kSequential);
// A pair's outputs taken from a whole output buffer in the engine's layout.
void gather_pair(const Problem& p, const std::vector<float>& out, Pair pair, PairOutput<float>& got);

// The oracle on every checked pair of the problem (cases.h), and a whole output's checked pairs,
// each concatenated in checked_pairs() order.
PairOutput<double> oracle_checked(const Problem& p);
PairOutput<float> gather_checked(const Problem& p, const std::vector<float>& out);

}  // namespace gdn
