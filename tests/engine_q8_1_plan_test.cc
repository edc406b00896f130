// Engine patch 0012's plan of which Q4_0 products share one quantization of their input
// (onebit-q8_1-plan.h, host code of ggml-cuda), on graphs laid out by ggml's own allocator: the
// allocator gives a dead tensor's memory to later ones, so an address alone does not name an
// input, and an in-place op changes one between two of its readers.
#include "onebit-q8_1-plan.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"

namespace {

constexpr int64_t kEmbd = 256;
constexpr int64_t kFfn  = 512;

struct Graph {
  ggml_context*  ctx    = nullptr;
  ggml_cgraph*   graph  = nullptr;
  ggml_gallocr_t galloc = nullptr;

  Graph() {
    ggml_init_params params = {64 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    ctx = ggml_init(params);
    graph = ggml_new_graph(ctx);
  }
  ~Graph() {
    if (galloc) ggml_gallocr_free(galloc);
    ggml_free(ctx);
  }
  ggml_tensor* weight(ggml_type type, int64_t k, int64_t m, const std::string& name) {
    ggml_tensor* w = ggml_new_tensor_2d(ctx, type, k, m);
    ggml_set_name(w, name.c_str());
    ggml_set_input(w);
    return w;
  }
  ggml_tensor* named(ggml_tensor* t, const std::string& name) {
    ggml_set_name(t, name.c_str());
    return t;
  }
  // Lays the graph out in a CPU buffer with ggml's graph allocator (no data is computed).
  void allocate(ggml_tensor* out) {
    ggml_set_output(out);
    ggml_build_forward_expand(graph, out);
    galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    ASSERT_TRUE(ggml_gallocr_alloc_graph(galloc, graph));
  }
  // The groups of Q4_0 products, each as the names of its readers.
  std::vector<std::vector<std::string>> groups() {
    std::vector<std::vector<std::string>> out;
    for (const auto& g : onebit_q8_1_groups(graph, [](const ggml_tensor* node) {
           return node->op == GGML_OP_MUL_MAT && node->src[0]->type == GGML_TYPE_Q4_0 ? 1 : 0;
         })) {
      std::vector<std::string> names;
      std::set<const ggml_tensor*> inputs;
      for (int i : g.readers) {
        names.push_back(ggml_graph_node(graph, i)->name);
        inputs.insert(ggml_graph_node(graph, i)->src[1]);
      }
      // Every reader of a group reads the same tensor: an address reused for another input
      // must start a group of its own.
      EXPECT_EQ(inputs.size(), 1u) << "a group mixes inputs, first reader " << names.front();
      out.push_back(names);
    }
    return out;
  }
};

// Two Llama-shaped layers: q, k and v of the normed input, the attention's stand-in (their sum, in
// the input's shape), o, then gate and up of the second normed input, SwiGLU and down.
TEST(Q8_1SharePlan, LlamaLayersShareQkvAndGateUp) {
  Graph g;
  ggml_tensor* x = g.named(ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, kEmbd, 1), "x");
  ggml_set_input(x);
  for (int l = 0; l < 2; ++l) {
    const std::string s = std::to_string(l);
    ggml_tensor* cur = ggml_mul(g.ctx, ggml_rms_norm(g.ctx, x, 1e-5f), g.weight(GGML_TYPE_F32, kEmbd, 1, "attn_norm" + s));
    ggml_tensor* q = g.named(ggml_mul_mat(g.ctx, g.weight(GGML_TYPE_Q4_0, kEmbd, kEmbd, "wq" + s), cur), "q" + s);
    ggml_tensor* k = g.named(ggml_mul_mat(g.ctx, g.weight(GGML_TYPE_Q4_0, kEmbd, kEmbd, "wk" + s), cur), "k" + s);
    ggml_tensor* v = g.named(ggml_mul_mat(g.ctx, g.weight(GGML_TYPE_Q4_0, kEmbd, kEmbd, "wv" + s), cur), "v" + s);
    ggml_tensor* att = ggml_add(g.ctx, ggml_scale(g.ctx, q, 0.5f), ggml_add(g.ctx, k, v));
    ggml_tensor* o = g.named(ggml_mul_mat(g.ctx, g.weight(GGML_TYPE_Q4_0, kEmbd, kEmbd, "wo" + s), att), "o" + s);
    x = ggml_add(g.ctx, o, x);
    ggml_tensor* cur2 = ggml_mul(g.ctx, ggml_rms_norm(g.ctx, x, 1e-5f), g.weight(GGML_TYPE_F32, kEmbd, 1, "ffn_norm" + s));
    ggml_tensor* gate = g.named(ggml_mul_mat(g.ctx, g.weight(GGML_TYPE_Q4_0, kEmbd, kFfn, "wg" + s), cur2), "gate" + s);
    ggml_tensor* up = g.named(ggml_mul_mat(g.ctx, g.weight(GGML_TYPE_Q4_0, kEmbd, kFfn, "wu" + s), cur2), "up" + s);
    ggml_tensor* down = g.named(ggml_mul_mat(g.ctx, g.weight(GGML_TYPE_Q4_0, kFfn, kEmbd, "wd" + s),
                                             ggml_swiglu_split(g.ctx, gate, up)), "down" + s);
    x = ggml_add(g.ctx, down, x);
  }
  g.allocate(x);

  std::set<std::vector<std::string>> shared;
  size_t alone = 0;
  for (const auto& names : g.groups()) {
    if (names.size() > 1) shared.insert(names);
    else ++alone;
  }
  std::set<std::vector<std::string>> want;
  for (const std::string s : {"0", "1"}) {
    std::vector<std::string> qkv = {"q" + s, "k" + s, "v" + s}, gu = {"gate" + s, "up" + s};
    want.insert(qkv);
    want.insert(gu);
  }
  EXPECT_EQ(shared, want);
  EXPECT_EQ(alone, 4u);  // o and down of each layer
}

// An input scaled in place between products: those after the write read the same view (data,
// shape, strides) with other values, so they share a quantization of their own, not the first
// one's; and a write between readers ends their group rather than refusing it whole (the form
// that, grouping by address, shared nothing in Llama 3 8B's decode graph, where the allocator had
// put the rope of k and then the attention's output at the normed input's address).
TEST(Q8_1SharePlan, AnInPlaceWriteEndsTheGroup) {
  Graph g;
  ggml_tensor* b = g.named(ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, kEmbd, 4), "b");
  ggml_set_input(b);
  ggml_tensor* first = g.named(ggml_mul_mat(g.ctx, g.weight(GGML_TYPE_Q4_0, kEmbd, kEmbd, "w1"), b), "first");
  ggml_tensor* other = g.named(ggml_mul_mat(g.ctx, g.weight(GGML_TYPE_Q8_0, kEmbd, kEmbd, "w2"), b), "q8_0");
  ggml_tensor* scaled = ggml_scale_inplace(g.ctx, b, -2.0f);
  ggml_tensor* second = g.named(ggml_mul_mat(g.ctx, g.weight(GGML_TYPE_Q4_0, kEmbd, kEmbd, "w3"), scaled), "second");
  ggml_tensor* third = g.named(ggml_mul_mat(g.ctx, g.weight(GGML_TYPE_Q4_0, kEmbd, kEmbd, "w4"), scaled), "third");
  g.allocate(ggml_add(g.ctx, ggml_add(g.ctx, first, other), ggml_add(g.ctx, second, third)));

  const auto groups = g.groups();
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0], std::vector<std::string>({"first"}));
  EXPECT_EQ(groups[1], std::vector<std::string>({"second", "third"}));
}

}  // namespace
