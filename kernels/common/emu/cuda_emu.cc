#include "cuda_emu.h"


#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <vector>

// Switching between fibers: save the callee-saved registers on the current stack, swap stack
// pointers, restore. (ucontext's swapcontext also saves the signal mask, a system call per
// switch, which made it most of the emulator's run time.)
extern "C" void cuda_emu_switch(void** save_sp, void* load_sp);
#if defined(__x86_64__)
asm(R"(
    .text
    .globl cuda_emu_switch
    .type cuda_emu_switch, @function
cuda_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size cuda_emu_switch, .-cuda_emu_switch
    .section .note.GNU-stack, "", @progbits
    .text
)");
#elif defined(__aarch64__)
asm(R"(
    .text
    .globl cuda_emu_switch
    .type cuda_emu_switch, %function
cuda_emu_switch:
    sub sp, sp, #176
    stp x19, x20, [sp, #0]
    stp x21, x22, [sp, #16]
    stp x23, x24, [sp, #32]
    stp x25, x26, [sp, #48]
    stp x27, x28, [sp, #64]
    stp x29, x30, [sp, #80]
    stp d8, d9, [sp, #96]
    stp d10, d11, [sp, #112]
    stp d12, d13, [sp, #128]
    stp d14, d15, [sp, #144]
    mov x9, sp
    str x9, [x0]
    mov sp, x1
    ldp x19, x20, [sp, #0]
    ldp x21, x22, [sp, #16]
    ldp x23, x24, [sp, #32]
    ldp x25, x26, [sp, #48]
    ldp x27, x28, [sp, #64]
    ldp x29, x30, [sp, #80]
    ldp d8, d9, [sp, #96]
    ldp d10, d11, [sp, #112]
    ldp d12, d13, [sp, #128]
    ldp d14, d15, [sp, #144]
    add sp, sp, #176
    ret
    .size cuda_emu_switch, .-cuda_emu_switch
    .section .note.GNU-stack, "", %progbits
    .text
)");
#else
#error "the CUDA emulator switches fibers for x86-64 and AArch64 only"
#endif

// The bounds of the static __shared__ arrays' section (cuda_emu.h), from the linker; weak, so a
// program without any links (both are null then).
extern "C" __attribute__((weak)) char __start_cuda_emu_shared[];
extern "C" __attribute__((weak)) char __stop_cuda_emu_shared[];

namespace cuda_emu {

Index thread_index, block_index;
dim3 block_dim, grid_dim;

namespace {

constexpr size_t kDefaultShared = 48 * 1024;
constexpr size_t kMaxShared = 227 * 1024;
constexpr size_t kStackBytes = 256 * 1024;

enum class State { kRunnable, kBarrier, kNamedBarrier, kClusterBarrier, kWarpOp, kDone };

// A warp-wide operation's inputs and outputs for one thread.
struct WarpSlot {
  int op = 0;        // which operation (kShfl*, kMma*)
  int in[10] = {};   // shfl: the value; mma: a0..a3, b0, b1, c0..c3
  float fin[10] = {};  // the same for float operands
  float f = 0;       // shfl of a float: the value
  int mask = 0;      // shfl: the lane mask (xor), the source lane (idx) or the distance (up)
  int out[4] = {};
  float fout4[4] = {};
  float fout = 0;
  // wgmma: the operands' descriptors, the width, whether D accumulates, and the thread's D.
  uint64_t desc[2] = {};
  int n = 0;
  bool accumulate = false;
  float* d = nullptr;
};

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
float tf32_truncated(float x) { return float_of(bits_of(x) & 0xffffe000u); }
constexpr int kShflInt = 1, kShflFloat = 2, kMma = 3, kMmaTf32 = 4, kSyncWarp = 5, kWgmmaTf32 = 6, kShflIdx = 7,
              kShflUp = 8, kBallot = 9;

struct PendingCopy {
  void* dst;
  const void* src;
  int bytes;
};

// A thread's share of a wgmma not yet waited for: its result, which lands in its registers at the
// wait that covers it, and the operands as they were read, which must not change until then.
struct WgmmaOperands {
  uint64_t desc_a, desc_b;
  int n;
  std::vector<float> a, b;
  // Whether shared memory still holds them (checked by the warpgroup's first thread to wait).
  bool checked = false;
};
struct PendingWgmma {
  float* d;
  std::vector<float> result;
  std::shared_ptr<WgmmaOperands> operands;  // one for the warpgroup
};

struct Fiber {
  void* sp = nullptr;  // its saved stack pointer while it is not running
  std::vector<PendingCopy> open_group;               // cp.async copies since the last commit
  std::vector<std::vector<PendingCopy>> committed;  // oldest first
  // Allocated uninitialized: the pages a fiber never touches cost no memory, which matters for
  // clusters (up to 8 x 1024 fibers).
  std::unique_ptr<char[]> stack;
  State state = State::kRunnable;
  // Where the barrier is in the source, to tell barriers apart (a return address would not do:
  // an optimizer may copy one barrier's call into both arms of a branch before it). Two barriers
  // on one line, or one in a helper called from two places, count as one.
  const char* file = nullptr;
  int line = 0;
  WarpSlot slot;
  std::vector<PendingWgmma> wgmma_open;                    // since the last wgmma_commit
  std::vector<std::vector<PendingWgmma>> wgmma_committed;  // oldest first
  bool wgmma_fenced = false;                               // a wgmma_fence since the last wait
  int named = -1;                                          // the named barrier it waits at
};

// A named barrier of a block (bar.sync / bar.arrive with an id): the threads counted in its
// current phase, and the count the phase was opened with.
struct NamedBarrier {
  int arrived = 0, count = 0;
};
constexpr int kNamedBarriers = 16;

// The blocks of one cluster run together: fiber r * threads + t is thread t of the block of rank
// r. A plain launch is a cluster of one block.
struct Emulator {
  Order order = Order::kForward;
  std::mt19937_64 rng{1};
  std::string problems;
  cudaError_t last_error = cudaSuccess;
  std::map<const void*, size_t> max_shared;
  std::vector<Fiber> fibers;
  std::vector<std::array<NamedBarrier, kNamedBarriers>> named;  // each block's, in the running cluster
  int threads = 0;  // per block
  int cluster = 1;  // blocks per cluster
  Index cluster_first{};  // the block index of the cluster's rank 0
  int rank = 0;  // the block whose fiber runs (or whose warps the scheduler completes)
  std::vector<std::vector<unsigned char>> shared;  // each block's dynamic shared memory
  std::vector<int> finished;  // each block's finished threads
  // The static shared section holds block `resident`'s arrays; the others wait in static_copy.
  std::vector<std::vector<char>> static_copy;
  int resident = 0;
  void* scheduler = nullptr;  // the scheduler's saved stack pointer
  int current = -1;
  const std::function<void()>* body = nullptr;
  bool abort_block = false;
  // Thread t of the block of rank `rank` in the running cluster.
  Fiber& fiber(int rank, int t) { return fibers[static_cast<size_t>(rank * threads + t)]; }
};
Emulator& emu() {
  static Emulator e;
  return e;
}

void problem(const std::string& line) {
  Emulator& e = emu();
  if (e.problems.size() < 4096) e.problems += line + "\n";
}

std::vector<unsigned char>& block_shared() {
  Emulator& e = emu();
  return e.shared[static_cast<size_t>(e.rank)];
}

size_t static_bytes() { return static_cast<size_t>(__stop_cuda_emu_shared - __start_cuda_emu_shared); }

// Makes block `rank` of the cluster the current one: its index, its dynamic shared memory, and its
// static shared arrays in the section (the previous block's saved aside).
void select_block(int rank) {
  Emulator& e = emu();
  e.rank = rank;
  block_index = {e.cluster_first.x + static_cast<unsigned>(rank), e.cluster_first.y, e.cluster_first.z};
  if (rank == e.resident || __start_cuda_emu_shared == nullptr) return;
  std::memcpy(e.static_copy[static_cast<size_t>(e.resident)].data(), __start_cuda_emu_shared, static_bytes());
  std::memcpy(__start_cuda_emu_shared, e.static_copy[static_cast<size_t>(rank)].data(), static_bytes());
  e.resident = rank;
}

void yield(State s) {
  Emulator& e = emu();
  e.fibers[e.current].state = s;
  cuda_emu_switch(&e.fibers[e.current].sp, e.scheduler);
  if (e.abort_block) {
    // Unwinding a fiber is not possible without exceptions; park it for good.
    e.fibers[e.current].state = State::kDone;
    while (true) cuda_emu_switch(&e.fibers[e.current].sp, e.scheduler);
  }
}

// Where a fiber starts; it never returns (the scheduler never resumes a finished fiber).
[[noreturn]] void fiber_entry() {
  Emulator& e = emu();
  (*e.body)();
  e.fibers[e.current].state = State::kDone;
  // A block that has ended leaves its shared memory to the next block on the GPU: what the rest of
  // its cluster reads there afterwards (no cluster_sync before the end) is NaN.
  if (e.cluster > 1 && ++e.finished[static_cast<size_t>(e.rank)] == e.threads)
    std::memset(block_shared().data(), 0xff, block_shared().size());
  while (true) cuda_emu_switch(&e.fibers[e.current].sp, e.scheduler);
}

// A fresh fiber's stack as cuda_emu_switch leaves a suspended one: the saved registers (zero),
// then fiber_entry as the return address, at the alignment a called function expects.
void* initial_stack(char* stack) {
  auto top = reinterpret_cast<uintptr_t>(stack + kStackBytes) & ~uintptr_t{15};
  void** sp = reinterpret_cast<void**>(top);
#if defined(__x86_64__)
  *--sp = nullptr;                                   // fiber_entry's own "return address" slot
  *--sp = reinterpret_cast<void*>(&fiber_entry);     // popped by ret
  for (int i = 0; i < 6; ++i) *--sp = nullptr;       // rbp, rbx, r12-r15
#else
  sp -= 22;                                          // x19-x30, d8-d15, padding: 176 bytes
  for (int i = 0; i < 22; ++i) sp[i] = nullptr;
  sp[11] = reinterpret_cast<void*>(&fiber_entry);    // x30, the link register ret jumps to
#endif
  return sp;
}

Index index_of(unsigned linear, dim3 d) { return {linear % d.x, (linear / d.x) % d.y, linear / (d.x * d.y)}; }

std::string block_name() {
  const Index b = block_index;
  return "block (" + std::to_string(b.x) + "," + std::to_string(b.y) + "," + std::to_string(b.z) + ")";
}

std::string cluster_name() {
  const Emulator& e = emu();
  const Index b = e.cluster_first;
  return "cluster of blocks (" + std::to_string(b.x) + ".." + std::to_string(b.x + static_cast<unsigned>(e.cluster) - 1) +
         "," + std::to_string(b.y) + "," + std::to_string(b.z) + ")";
}

// One operand of wgmma as its descriptor says: element (row, k) of `rows` rows and k < 8, read as
// TF32. Empty (after a problem line) when the descriptor does not fit the block's shared memory.
std::vector<float> wgmma_operand(uint64_t desc, int rows) {
  const size_t start = (desc & 0x3FFF) << 4, lbo = ((desc >> 16) & 0x3FFF) << 4, sbo = ((desc >> 32) & 0x3FFF) << 4;
  if (desc >> 62 != 0) {
    problem(block_name() + ": a wgmma descriptor with swizzling, which the emulator does not model");
    return {};
  }
  std::vector<float> m(static_cast<size_t>(rows) * 8);
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < 8; ++k) {
      const size_t at = start + (r / 8) * sbo + (k / 4) * lbo + (r % 8) * 16 + (k % 4) * 4;
      if (at + 4 > block_shared().size()) {
        problem(block_name() + ": a wgmma operand reaches past the dynamic shared memory");
        return {};
      }
      float v;
      std::memcpy(&v, block_shared().data() + at, 4);
      m[static_cast<size_t>(r) * 8 + k] = tf32_truncated(v);
    }
  return m;
}

// Completes a wgmma when all four warps of the warpgroup holding warp `w` of the current block are
// at it.
bool finish_wgmma(int w, int threads) {
  Emulator& e = emu();
  const int base = e.rank * e.threads;
  const int first = w / 4 * 128, last = first + 128;
  if (last > threads) return false;
  for (int t = first; t < last; ++t)
    if (e.fibers[base + t].state != State::kWarpOp || e.fibers[base + t].slot.op != kWgmmaTf32) return false;
  const WarpSlot& lead = e.fibers[base + first].slot;
  for (int t = first; t < last; ++t) {
    const WarpSlot& s = e.fibers[base + t].slot;
    if (s.desc[0] != lead.desc[0] || s.desc[1] != lead.desc[1] || s.n != lead.n || s.accumulate != lead.accumulate) {
      problem(block_name() + ": the threads of a warpgroup give one wgmma different operands");
      break;
    }
  }
  auto operands = std::make_shared<WgmmaOperands>(
      WgmmaOperands{lead.desc[0], lead.desc[1], lead.n, wgmma_operand(lead.desc[0], 64), wgmma_operand(lead.desc[1], lead.n)});
  const std::vector<float>&a = operands->a, &b = operands->b;
  if (!a.empty() && !b.empty()) {
    bool unfenced = false;
    for (int t = first; t < last; ++t) {
      Fiber& f = e.fibers[base + t];
      const WarpSlot& s = f.slot;
      unfenced = unfenced || !f.wgmma_fenced;
      // Accumulating onto a wgmma still in flight adds to its result, as the hardware chains them.
      const float* before = s.d;
      for (auto it = f.wgmma_open.rbegin(); it != f.wgmma_open.rend() && before == s.d; ++it)
        if (it->d == s.d) before = it->result.data();
      for (auto g = f.wgmma_committed.rbegin(); g != f.wgmma_committed.rend() && before == s.d; ++g)
        for (auto it = g->rbegin(); it != g->rend() && before == s.d; ++it)
          if (it->d == s.d) before = it->result.data();
      PendingWgmma p{s.d, std::vector<float>(static_cast<size_t>(s.n / 2)), operands};
      const int l = t % 32;
      for (int i = 0; i < s.n / 2; ++i) {
        const int row = 16 * (t / 32 % 4) + l / 4 + 8 * (i / 2 % 2), col = 8 * (i / 4) + 2 * (l % 4) + i % 2;
        float sum = s.accumulate ? before[i] : 0.0f;
        for (int k = 0; k < 8; ++k) sum += a[static_cast<size_t>(row) * 8 + k] * b[static_cast<size_t>(col) * 8 + k];
        p.result[static_cast<size_t>(i)] = sum;
        s.d[i] = NAN;  // undefined until the wait
      }
      f.wgmma_open.push_back(std::move(p));
    }
    if (unfenced) problem(block_name() + ": a wgmma without a wgmma_fence since the thread's last wait");
  }
  for (int t = first; t < last; ++t) e.fibers[base + t].state = State::kRunnable;
  return true;
}

// Completes the warp-wide operation every thread of warp `w` of the current block waits at; false
// when the warp is not all there (divergence).
bool finish_warp_op(int w, int threads) {
  Emulator& e = emu();
  const int base = e.rank * e.threads;
  const int first = w * 32, last = std::min(threads, first + 32);
  const int op = e.fibers[base + first].slot.op;
  if (op == kWgmmaTf32) return finish_wgmma(w, threads);
  for (int t = first; t < last; ++t)
    if (e.fibers[base + t].state != State::kWarpOp || e.fibers[base + t].slot.op != op) return false;
  if (last - first != 32) return false;  // a partial warp: our kernels never use one
  auto lane = [&](int l) -> WarpSlot& { return e.fibers[base + first + l].slot; };
  if (op == kSyncWarp) {
    // Nothing to compute: the warp has met.
  } else if (op == kShflInt || op == kShflFloat) {
    for (int l = 0; l < 32; ++l) {
      const int src = l ^ lane(l).mask;
      lane(l).out[0] = lane(src).in[0];
      lane(l).fout = lane(src).f;
    }
  } else if (op == kShflIdx) {
    for (int l = 0; l < 32; ++l) lane(l).out[0] = lane(lane(l).mask & 31).in[0];
  } else if (op == kShflUp) {
    // a lane below the distance keeps its own value
    for (int l = 0; l < 32; ++l) {
      const int src = l - lane(l).mask;
      lane(l).out[0] = lane(src >= 0 ? src : l).in[0];
    }
  } else if (op == kBallot) {
    uint32_t bits = 0;
    for (int l = 0; l < 32; ++l)
      if (lane(l).in[0] != 0) bits |= uint32_t{1} << l;
    for (int l = 0; l < 32; ++l) lane(l).out[0] = static_cast<int>(bits);
  } else if (op == kMma) {
    // A 16x32 (rows g and g+8, k 4t.. and 16+4t..), B 32x8 (column g), C 16x8 (row g and g+8,
    // columns 2t and 2t+1), with g = lane / 4 and t = lane % 4.
    int8_t a[16][32], b[32][8];
    int c[16][8];
    for (int l = 0; l < 32; ++l) {
      const int g = l / 4, t = l % 4;
      const int* r = lane(l).in;
      for (int i = 0; i < 4; ++i) {
        a[g][4 * t + i] = static_cast<int8_t>(r[0] >> (8 * i));
        a[g + 8][4 * t + i] = static_cast<int8_t>(r[1] >> (8 * i));
        a[g][16 + 4 * t + i] = static_cast<int8_t>(r[2] >> (8 * i));
        a[g + 8][16 + 4 * t + i] = static_cast<int8_t>(r[3] >> (8 * i));
        b[4 * t + i][g] = static_cast<int8_t>(r[4] >> (8 * i));
        b[16 + 4 * t + i][g] = static_cast<int8_t>(r[5] >> (8 * i));
      }
    }
    for (int row = 0; row < 16; ++row)
      for (int col = 0; col < 8; ++col) {
        int sum = 0;
        for (int k = 0; k < 32; ++k) sum += a[row][k] * b[k][col];
        c[row][col] = sum;
      }
    for (int l = 0; l < 32; ++l) {
      const int g = l / 4, t = l % 4;
      WarpSlot& s = lane(l);
      s.out[0] = s.in[6] + c[g][2 * t];
      s.out[1] = s.in[7] + c[g][2 * t + 1];
      s.out[2] = s.in[8] + c[g + 8][2 * t];
      s.out[3] = s.in[9] + c[g + 8][2 * t + 1];
    }
  } else if (op == kMmaTf32) {
    // A 16x8 (a0 row g col t, a1 row g+8 col t, a2 row g col t+4, a3 row g+8 col t+4), B 8x8
    // (b0 row t col g, b1 row t+4 col g), C 16x8 as for the int8 shape.
    float a[16][8], b[8][8];
    for (int l = 0; l < 32; ++l) {
      const int g = l / 4, t = l % 4;
      const float* r = lane(l).fin;
      a[g][t] = tf32_truncated(r[0]);
      a[g + 8][t] = tf32_truncated(r[1]);
      a[g][t + 4] = tf32_truncated(r[2]);
      a[g + 8][t + 4] = tf32_truncated(r[3]);
      b[t][g] = tf32_truncated(r[4]);
      b[t + 4][g] = tf32_truncated(r[5]);
    }
    for (int l = 0; l < 32; ++l) {
      const int g = l / 4, t = l % 4;
      WarpSlot& s = lane(l);
      const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
      for (int i = 0; i < 4; ++i) {
        float sum = s.fin[6 + i];
        for (int k = 0; k < 8; ++k) sum += a[rows[i]][k] * b[k][cols[i]];
        s.fout4[i] = sum;
      }
    }
  }
  for (int t = first; t < last; ++t) e.fibers[base + t].state = State::kRunnable;
  return true;
}

// Runs the threads of the blocks `ranks` (of the current cluster) round after round, each round
// every runnable one in the chosen order until it waits; then warp operations complete and a
// block whose threads all wait at one __syncthreads passes it. Returns when none of them can move
// on alone: each is done or waits at a cluster barrier, or the block is stuck.
void run_blocks(const std::vector<int>& ranks) {
  Emulator& e = emu();
  const int threads = e.threads;
  std::vector<int> order;
  while (true) {
    order.clear();
    for (int r : ranks)
      for (int t = 0; t < threads; ++t) order.push_back(r * threads + t);
    if (e.order == Order::kReverse) std::reverse(order.begin(), order.end());
    if (e.order == Order::kShuffled) std::shuffle(order.begin(), order.end(), e.rng);
    for (int i : order)
      if (e.fibers[i].state == State::kRunnable) {
        select_block(i / threads);
        e.current = i;
        thread_index = index_of(static_cast<unsigned>(i % threads), block_dim);
        cuda_emu_switch(&e.scheduler, e.fibers[i].sp);
      }
    // Every thread now waits at a barrier or a warp operation, is done, or (below) runnable again.
    bool progressed = false;
    for (int r : ranks) {
      select_block(r);
      for (int w = 0; w * 32 < threads; ++w) {
        bool any = false;
        for (int t = w * 32; t < std::min(threads, w * 32 + 32); ++t) any = any || e.fiber(r, t).state == State::kWarpOp;
        if (any) progressed = finish_warp_op(w, threads) || progressed;
      }
    }
    // A wgmma finished early (by its last thread) leaves its warpgroup runnable after its turn.
    for (int i : order) progressed = progressed || e.fibers[i].state == State::kRunnable;
    if (progressed) continue;
    for (int r : ranks) {
      const Fiber& first = e.fiber(r, 0);
      bool same = first.state == State::kBarrier;
      for (int t = 1; t < threads && same; ++t) {
        const Fiber& f = e.fiber(r, t);
        same = f.state == State::kBarrier && f.line == first.line && std::strcmp(f.file, first.file) == 0;
      }
      if (same) {
        for (int t = 0; t < threads; ++t) e.fiber(r, t).state = State::kRunnable;
        progressed = true;
      }
    }
    if (!progressed) return;
  }
}

// Runs the blocks of one cluster (e.cluster of them, from e.cluster_first) to the end. In the
// shuffled order their threads interleave; in the forward and reverse orders each block in turn
// (rank 0 first in the forward order) runs as far as it can, to a cluster barrier or its end,
// which shows a block barrier used where the cluster's was needed. The cluster passes a
// cluster_sync once all its threads wait there.
void run_cluster() {
  Emulator& e = emu();
  const int threads = e.threads, all = e.cluster * threads;
  for (int t = 0; t < all; ++t) {
    Fiber& f = e.fibers[t];
    f.state = State::kRunnable;
    f.file = nullptr;
    f.open_group.clear();
    f.committed.clear();
    f.wgmma_open.clear();
    f.wgmma_committed.clear();
    f.wgmma_fenced = false;
    f.named = -1;
    f.sp = initial_stack(f.stack.get());
  }
  e.named.assign(static_cast<size_t>(e.cluster), {});
  std::fill(e.finished.begin(), e.finished.end(), 0);
  e.abort_block = false;
  std::vector<int> ranks(static_cast<size_t>(e.cluster));
  for (int r = 0; r < e.cluster; ++r) ranks[static_cast<size_t>(r)] = r;
  if (e.order == Order::kReverse) std::reverse(ranks.begin(), ranks.end());
  while (true) {
    if (e.order == Order::kShuffled) run_blocks(ranks);
    else
      for (int r : ranks) run_blocks({r});
    // What each block's threads wait at.
    struct Count {
      int done = 0, barrier = 0, cluster = 0;
      bool same = true, warp_stuck = false, named = false;
    };
    std::vector<Count> counts(static_cast<size_t>(e.cluster));
    int done = 0, at_cluster = 0;
    for (int r = 0; r < e.cluster; ++r) {
      Count& c = counts[static_cast<size_t>(r)];
      const Fiber* first = nullptr;
      for (int t = 0; t < threads; ++t) {
        const Fiber& f = e.fiber(r, t);
        if (f.state == State::kDone) ++c.done;
        else if (f.state == State::kWarpOp) c.warp_stuck = true;
        else if (f.state == State::kNamedBarrier) c.named = true;
        else if (f.state == State::kClusterBarrier) ++c.cluster;
        else {
          ++c.barrier;
          if (first == nullptr) first = &f;
          else c.same = c.same && f.line == first->line && std::strcmp(f.file, first->file) == 0;
        }
      }
      done += c.done;
      at_cluster += c.cluster;
    }
    if (at_cluster == all) {
      for (int i = 0; i < all; ++i) e.fibers[i].state = State::kRunnable;
      continue;
    }
    if (done == all) {
      for (int r = 0; r < e.cluster; ++r)
        for (int t = 0; t < threads; ++t)
          if (!e.fiber(r, t).wgmma_open.empty() || !e.fiber(r, t).wgmma_committed.empty()) {
            select_block(r);
            problem(block_name() + ": a thread ended with a wgmma it never waited for");
            break;
          }
      return;
    }
    // Stuck: say why, then let every thread left end.
    for (int r = 0; r < e.cluster; ++r) {
      const Count& c = counts[static_cast<size_t>(r)];
      select_block(r);
      if (c.warp_stuck) problem(block_name() + ": a warp-wide operation not reached by the whole warp");
      else if (c.named) problem(block_name() + ": threads wait at a named barrier that too few threads reach");
      else if (c.barrier > 0 && c.done > 0)
        problem(block_name() + ": " + std::to_string(c.barrier + c.cluster) + " threads wait at a barrier that " +
                std::to_string(c.done) + " finished threads never reach");
      else if (c.barrier > 0 && !c.same) problem(block_name() + ": threads wait at different barriers");
      else if (c.barrier > 0 && c.cluster > 0)
        problem(block_name() + ": " + std::to_string(c.cluster) + " threads wait at a cluster barrier and " +
                std::to_string(c.barrier) + " at a block barrier");
    }
    if (at_cluster > 0 && done > 0)
      problem(cluster_name() + ": " + std::to_string(at_cluster) + " threads wait at a cluster barrier that " +
              std::to_string(done) + " finished threads never reach");
    e.abort_block = true;
    for (int i = 0; i < all; ++i)
      if (e.fibers[i].state != State::kDone) {
        select_block(i / threads);
        e.current = i;
        cuda_emu_switch(&e.scheduler, e.fibers[i].sp);
      }
    return;
  }
}

}  // namespace

void set_order(Order order, uint64_t seed) {
  emu().order = order;
  emu().rng.seed(seed);
}

void ready_signal(int* counter) {
  syncthreads(__FILE__, __LINE__);
  if (thread_index.x == 0 && thread_index.y == 0 && thread_index.z == 0) ++*counter;
}

void ready_wait(const int* counter, int count) {
  if (thread_index.x == 0 && thread_index.y == 0 && thread_index.z == 0 && *counter < count)
    problem(block_name() + ": waits for a counter at " + std::to_string(*counter) + " of " + std::to_string(count) +
            " that no block left to run can raise");
  syncthreads(__FILE__, __LINE__);
}

const std::string& problems() { return emu().problems; }
void clear_problems() { emu().problems.clear(); }

cudaError_t set_max_dynamic_shared(const void* kernel, int bytes) {
  if (bytes < 0 || static_cast<size_t>(bytes) > kMaxShared) return cudaErrorInvalidValue;
  emu().max_shared[kernel] = static_cast<size_t>(bytes);
  return cudaSuccess;
}

cudaError_t launch(const void* kernel, dim3 grid, dim3 block, size_t dynamic_bytes, const std::function<void()>& body,
                   unsigned cluster_x) {
  Emulator& e = emu();
  const unsigned threads = block.x * block.y * block.z;
  auto it = e.max_shared.find(kernel);
  const size_t limit = std::max(kDefaultShared, it == e.max_shared.end() ? 0 : it->second);
  std::string why;
  if (threads == 0 || threads > 1024 || block.z > 64) why = "a block of " + std::to_string(threads) + " threads";
  else if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535)
    why = "a grid of " + std::to_string(grid.x) + " x " + std::to_string(grid.y) + " x " + std::to_string(grid.z);
  else if (dynamic_bytes > limit)
    why = std::to_string(dynamic_bytes) + " bytes of dynamic shared memory (the kernel may use " + std::to_string(limit) + ")";
  else if (cluster_x == 0 || cluster_x > 8 || grid.x % cluster_x != 0)
    why = "clusters of " + std::to_string(cluster_x) + " blocks on a grid x of " + std::to_string(grid.x) +
          " (1 to 8 blocks, dividing it)";
  if (!why.empty()) {
    problem("launch refused: " + why);
    e.last_error = cudaErrorInvalidConfiguration;
    return e.last_error;
  }
  const size_t fibers = static_cast<size_t>(threads) * cluster_x;
  if (e.fibers.size() < fibers) {
    e.fibers.resize(fibers);
    for (Fiber& f : e.fibers)
      if (f.stack == nullptr) f.stack.reset(new char[kStackBytes]);
  }
  e.threads = static_cast<int>(threads);
  e.cluster = static_cast<int>(cluster_x);
  e.shared.assign(cluster_x, std::vector<unsigned char>(dynamic_bytes));
  e.finished.assign(cluster_x, 0);
  e.static_copy.assign(cluster_x > 1 ? cluster_x : 0, std::vector<char>(static_bytes()));
  e.body = &body;
  block_dim = block;
  grid_dim = grid;
  const size_t before = e.problems.size();
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; x += cluster_x) {
        e.cluster_first = {x, y, z};
        // NaN, as uninitialized as it gets: each block's dynamic shared memory and static arrays.
        for (std::vector<unsigned char>& s : e.shared) std::memset(s.data(), 0xff, s.size());
        for (std::vector<char>& s : e.static_copy) std::memset(s.data(), 0xff, s.size());
        if (__start_cuda_emu_shared != nullptr) std::memset(__start_cuda_emu_shared, 0xff, static_bytes());
        e.resident = 0;
        select_block(0);
        run_cluster();
      }
  if (e.problems.size() != before) e.last_error = cudaErrorLaunchFailure;
  return cudaSuccess;
}

cudaError_t take_last_error() {
  const cudaError_t e = emu().last_error;
  emu().last_error = cudaSuccess;
  return e;
}

void syncthreads(const char* file, int line) {
  Emulator& e = emu();
  e.fibers[e.current].file = file;
  e.fibers[e.current].line = line;
  yield(State::kBarrier);
}

namespace {
enum class Arrival { kRefused, kWaiting, kCompleted };
// Counts the running thread into named barrier `id` of its block; when the phase is full, the
// threads waiting there run again and the next phase starts.
Arrival named_arrival(int id, int count) {
  Emulator& e = emu();
  if (id < 1 || id >= kNamedBarriers || count <= 0 || count % 32 != 0 || count > e.threads) {
    problem(block_name() + ": named barrier " + std::to_string(id) + " with a count of " + std::to_string(count) +
            " (ids 1 to 15, whole warps, at most the block)");
    return Arrival::kRefused;
  }
  NamedBarrier& b = e.named[static_cast<size_t>(e.rank)][static_cast<size_t>(id)];
  if (b.arrived == 0) b.count = count;
  else if (b.count != count)
    problem(block_name() + ": named barrier " + std::to_string(id) + " used with counts " + std::to_string(b.count) +
            " and " + std::to_string(count) + " in one phase");
  ++b.arrived;
  if (b.arrived < b.count) return Arrival::kWaiting;
  for (int t = 0; t < e.threads; ++t) {
    Fiber& f = e.fiber(e.rank, t);
    if (f.state == State::kNamedBarrier && f.named == id) {
      f.state = State::kRunnable;
      f.named = -1;
    }
  }
  b.arrived = 0;
  return Arrival::kCompleted;
}
}  // namespace

void named_barrier_sync(int id, int count) {
  if (named_arrival(id, count) != Arrival::kWaiting) return;  // the phase is complete (or refused)
  Emulator& e = emu();
  e.fibers[e.current].named = id;
  yield(State::kNamedBarrier);
}

void named_barrier_arrive(int id, int count) { named_arrival(id, count); }

void* dynamic_shared() { return block_shared().data(); }

unsigned cluster_rank() { return static_cast<unsigned>(emu().rank); }
unsigned cluster_size() { return static_cast<unsigned>(emu().cluster); }

void cluster_sync() { yield(State::kClusterBarrier); }

void* cluster_map_shared(const void* p, int rank) {
  Emulator& e = emu();
  const auto* at = static_cast<const unsigned char*>(p);
  const std::vector<unsigned char>& own = block_shared();
  if (at < own.data() || at >= own.data() + own.size()) {
    problem(block_name() + ": cluster_map_shared of an address outside the block's dynamic shared memory");
    return const_cast<void*>(p);
  }
  if (rank < 0 || rank >= e.cluster) {
    problem(block_name() + ": cluster_map_shared to rank " + std::to_string(rank) + " of a cluster of " +
            std::to_string(e.cluster));
    return const_cast<void*>(p);
  }
  return e.shared[static_cast<size_t>(rank)].data() + (at - own.data());
}

void syncwarp() {
  Emulator& e = emu();
  e.fibers[e.current].slot.op = kSyncWarp;
  yield(State::kWarpOp);
}

float shfl_xor(float v, int mask) {
  Emulator& e = emu();
  WarpSlot& s = e.fibers[e.current].slot;
  s.op = kShflFloat;
  s.f = v;
  s.mask = mask;
  yield(State::kWarpOp);
  return s.fout;
}

namespace {
// A warp-wide operation on one int a lane, with its lane mask, source lane or distance.
int warp_op(int op, int v, int mask) {
  Emulator& e = emu();
  WarpSlot& s = e.fibers[e.current].slot;
  s.op = op;
  s.in[0] = v;
  s.mask = mask;
  yield(State::kWarpOp);
  return s.out[0];
}
}  // namespace

int shfl_xor(int v, int mask) { return warp_op(kShflInt, v, mask); }
int shfl_idx(int v, int src) { return warp_op(kShflIdx, v, src); }
int shfl_up(int v, unsigned delta) { return warp_op(kShflUp, v, static_cast<int>(delta)); }
uint32_t ballot(bool pred) { return static_cast<uint32_t>(warp_op(kBallot, pred ? 1 : 0, 0)); }

void mma_tf32_m16n8k8(float (&d)[4], float a0, float a1, float a2, float a3, float b0, float b1, const float (&c)[4]) {
  Emulator& e = emu();
  WarpSlot& s = e.fibers[e.current].slot;
  s.op = kMmaTf32;
  const float in[10] = {a0, a1, a2, a3, b0, b1, c[0], c[1], c[2], c[3]};
  std::copy(in, in + 10, s.fin);
  yield(State::kWarpOp);
  std::copy(s.fout4, s.fout4 + 4, d);
}

uint64_t shared_descriptor(const void* at, uint32_t lbo, uint32_t sbo) {
  const auto* p = static_cast<const unsigned char*>(at);
  const std::vector<unsigned char>& shared = block_shared();
  if (p < shared.data() || p >= shared.data() + shared.size()) {
    problem(block_name() + ": a wgmma operand outside the dynamic shared memory");
    return 0;
  }
  const uint64_t offset = static_cast<uint64_t>(p - shared.data());
  if ((offset | lbo | sbo) % 16 != 0) problem(block_name() + ": a wgmma descriptor not in 16-byte steps");
  return ((offset & 0x3FFFF) >> 4) | (uint64_t{(lbo & 0x3FFFF) >> 4} << 16) | (uint64_t{(sbo & 0x3FFFF) >> 4} << 32);
}

void wgmma_tf32(float* d, int n, uint64_t a, uint64_t b, bool accumulate) {
  Emulator& e = emu();
  Fiber& f = e.fibers[e.current];
  WarpSlot& s = f.slot;
  s.op = kWgmmaTf32;
  s.desc[0] = a;
  s.desc[1] = b;
  s.n = n;
  s.accumulate = accumulate;
  s.d = d;
  // The last thread of the warpgroup to arrive computes it at once, before the rest of the block
  // runs on: a wgmma that reads shared memory other warpgroups have not written yet (a missing
  // barrier) reads it unwritten, as it could on the GPU.
  f.state = State::kWarpOp;
  if (finish_wgmma(e.current % e.threads / 32, e.threads)) return;
  yield(State::kWarpOp);
}

void wgmma_fence() { emu().fibers[emu().current].wgmma_fenced = true; }

void wgmma_commit() {
  Fiber& f = emu().fibers[emu().current];
  f.wgmma_committed.push_back(std::move(f.wgmma_open));
  f.wgmma_open.clear();
}

void wgmma_wait(int pending) {
  Fiber& f = emu().fibers[emu().current];
  while (static_cast<int>(f.wgmma_committed.size()) > pending) {
    for (const PendingWgmma& p : f.wgmma_committed.front()) {
      WgmmaOperands& o = *p.operands;
      if (!o.checked && (wgmma_operand(o.desc_a, 64) != o.a || wgmma_operand(o.desc_b, o.n) != o.b))
        problem(block_name() + ": a wgmma's operand changed in shared memory while it was in flight");
      o.checked = true;
      std::copy(p.result.begin(), p.result.end(), p.d);
    }
    f.wgmma_committed.erase(f.wgmma_committed.begin());
  }
  f.wgmma_fenced = false;
}

float round_to_tf32(float x) {
  // Add half of the dropped range to the magnitude, then drop it: nearest, ties away from zero.
  // The same integer steps as device.cuh's to_tf32, non-finite x included.
  return float_of((bits_of(x) + 0x1000u) & 0xffffe000u);
}

void mma_s8_m16n8k32(int (&d)[4], int a0, int a1, int a2, int a3, int b0, int b1, const int (&c)[4]) {
  Emulator& e = emu();
  WarpSlot& s = e.fibers[e.current].slot;
  s.op = kMma;
  const int in[10] = {a0, a1, a2, a3, b0, b1, c[0], c[1], c[2], c[3]};
  std::copy(in, in + 10, s.in);
  yield(State::kWarpOp);
  std::copy(s.out, s.out + 4, d);
}

void copy_async(void* dst, const void* src, int bytes, bool read_src) {
  Emulator& e = emu();
  if ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) % static_cast<uintptr_t>(bytes) != 0)
    problem(block_name() + ": cp.async of " + std::to_string(bytes) + " bytes at an address not aligned to it");
  alignas(16) static const unsigned char zeros[16] = {};
  if (!read_src) src = zeros;
  if (e.order == Order::kShuffled) std::memcpy(dst, src, static_cast<size_t>(bytes));
  else e.fibers[e.current].open_group.push_back({dst, src, bytes});
}

void copy_async_commit() {
  Fiber& f = emu().fibers[emu().current];
  f.committed.push_back(std::move(f.open_group));
  f.open_group.clear();
}

void copy_async_wait(int pending) {
  Fiber& f = emu().fibers[emu().current];
  while (static_cast<int>(f.committed.size()) > pending) {
    for (const PendingCopy& c : f.committed.front()) std::memcpy(c.dst, c.src, static_cast<size_t>(c.bytes));
    f.committed.erase(f.committed.begin());
  }
}

float half_bits_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  float v;
  if (exponent == 0) v = std::ldexp(static_cast<float>(mantissa), -24);
  else if (exponent == 31) v = mantissa ? NAN : INFINITY;
  else v = std::ldexp(static_cast<float>(mantissa | 0x400), static_cast<int>(exponent) - 25);
  return sign ? -v : v;
}

}  // namespace cuda_emu

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    default: return "unspecified launch failure";
  }
}
