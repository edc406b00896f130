#include "model/rotate.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>

#include <gtest/gtest.h>

#include "base/error.h"
#include "ggml.h"
#include "gguf.h"
#include "model/gguf_facts.h"
#include "model/synth.h"
#include "test_support.h"

namespace onebit {
namespace {

using testing::error_of;
using testing::TempDir;

// A GGUF read whole, its tensors' data in memory.
struct Loaded {
  gguf_context* g = nullptr;
  ggml_context* data = nullptr;
  explicit Loaded(const std::string& path) { g = gguf_init_from_file(path.c_str(), {/*no_alloc=*/false, &data}); }
  ~Loaded() {
    gguf_free(g);
    ggml_free(data);
  }
  const ggml_tensor* tensor(const char* name) const { return ggml_get_tensor(data, name); }
  // Row r of a 2-D tensor as floats.
  std::vector<float> row(const char* name, int64_t r) const {
    const ggml_tensor* t = tensor(name);
    std::vector<float> out(static_cast<size_t>(t->ne[0]));
    const char* p = static_cast<const char*>(t->data) + r * t->nb[1];
    if (t->type == GGML_TYPE_F32) std::memcpy(out.data(), p, out.size() * sizeof(float));
    else ggml_get_type_traits(t->type)->to_float(p, out.data(), t->ne[0]);
    return out;
  }
};

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

struct GgufFree {
  void operator()(gguf_context* c) const { gguf_free(c); }
};
using GgufPtrForTest = std::unique_ptr<gguf_context, GgufFree>;

std::string synth(const TempDir& dir, const std::string& name, const std::string& type) {
  SynthOptions o;
  o.vocab_dir = testing::vocab_dir();
  o.type = type;
  const std::string path = dir.file(name);
  write_synth_model(*find_synth_shape("tiny-llama"), o, path);
  return path;
}

// An importance matrix as llama-imatrix writes it: for each weight named, its sums of x_i^2 over
// `count` tokens (`scale` * (1 + i % 7) each) and the count; `wrong` gives one of them too few.
void write_importance(const std::string& src, const std::string& path, const std::string& wrong = "") {
  Loaded a(src);
  GgufPtrForTest g(gguf_init_empty());
  ggml_context* ctx = ggml_init({64 * 1024 * 1024, nullptr, false});
  for (int64_t i = 0; i < gguf_get_n_tensors(a.g); ++i) {
    const std::string name = gguf_get_tensor_name(a.g, i);
    if (!is_rotated_weight(name)) continue;
    const int64_t n = a.tensor(name.c_str())->ne[0] - (name == wrong ? 32 : 0);
    ggml_tensor* sums = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n, 1);
    ggml_tensor* counts = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 1, 1);
    for (int64_t j = 0; j < n; ++j) static_cast<float*>(sums->data)[j] = 10.0f * static_cast<float>(1 + j % 7);
    static_cast<float*>(counts->data)[0] = 10.0f;
    ggml_set_name(sums, (name + ".in_sum2").c_str());
    ggml_set_name(counts, (name + ".counts").c_str());
    gguf_add_tensor(g.get(), sums);
    gguf_add_tensor(g.get(), counts);
  }
  gguf_write_to_file(g.get(), path.c_str(), false);
  ggml_free(ctx);
}

}  // namespace

TEST(Rotate, HadamardIsOrthonormalAndItsOwnInverse) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> x(32), y;
  for (auto& v : x) v = normal(rng);
  y = x;
  hadamard32(y.data());
  EXPECT_NEAR(dot(y, y), dot(x, x), 1e-3);
  hadamard32(y.data());
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(y[i], x[i], 1e-5);
  // The first row of H is all 1/sqrt(32): a block of ones goes to sqrt(32) e0.
  std::vector<float> ones(32, 1.0f);
  hadamard32(ones.data());
  EXPECT_NEAR(ones[0], std::sqrt(32.0f), 1e-5);
  EXPECT_NEAR(ones[5], 0.0f, 1e-6);
}

TEST(Rotate, WhichTensorsRotate) {
  for (const char* n : {"blk.0.attn_q.weight", "blk.3.attn_qkv.weight", "blk.1.attn_output.weight", "blk.2.ffn_down.weight",
                        "blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_shexp.weight", "blk.4.ssm_out.weight", "blk.4.attn_gate.weight"})
    EXPECT_TRUE(is_rotated_weight(n)) << n;
  for (const char* n : {"token_embd.weight", "output.weight", "output_norm.weight", "blk.0.attn_norm.weight",
                        "blk.0.ffn_gate_inp.weight", "blk.0.attn_q_norm.weight", "blk.0.ssm_conv1d.weight"})
    EXPECT_FALSE(is_rotated_weight(n)) << n;
}

// W'·(H x) is W·x up to Q4_0's rounding, block by block; W'·x, the rotation forgotten, is not.
TEST(Rotate, ARotatedWeightTimesARotatedActivationIsTheProduct) {
  TempDir dir;
  const std::string src = synth(dir, "src.gguf", "f16");
  RotateSummary s = rotate_model(src, dir.file("rot.gguf"), {});
  rotate_model(src, dir.file("plain.gguf"), {/*plain=*/true});
  EXPECT_EQ(s.rotated, 14);  // 2 layers x (q, k, v, output, gate, up, down)
  EXPECT_EQ(s.kept, 7);
  EXPECT_EQ(s.bytes, std::filesystem::file_size(dir.file("rot.gguf")));
  EXPECT_TRUE(read_model_facts(dir.file("rot.gguf")).hadamard_q4_0);
  EXPECT_FALSE(read_model_facts(dir.file("plain.gguf")).hadamard_q4_0);
  EXPECT_EQ(file_type_name(*read_model_facts(dir.file("rot.gguf")).file_type), "Q4_0");

  Loaded a(src), rot(dir.file("rot.gguf")), plain(dir.file("plain.gguf"));
  ASSERT_NE(a.g, nullptr);
  ASSERT_NE(rot.g, nullptr);
  EXPECT_EQ(rot.tensor("blk.1.ffn_down.weight")->type, GGML_TYPE_Q4_0);
  // Every other tensor is the source's, byte for byte.
  for (const char* kept : {"token_embd.weight", "output_norm.weight", "blk.0.attn_norm.weight"}) {
    const ggml_tensor *x = a.tensor(kept), *y = rot.tensor(kept);
    ASSERT_EQ(x->type, y->type) << kept;
    ASSERT_EQ(ggml_nbytes(x), ggml_nbytes(y)) << kept;
    EXPECT_EQ(std::memcmp(x->data, y->data, ggml_nbytes(x)), 0) << kept;
  }
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  const char* w = "blk.1.ffn_down.weight";
  const int64_t n = a.tensor(w)->ne[0];
  double err_rot = 0, err_plain = 0, err_forgot = 0, norm = 0;
  for (int trial = 0; trial < 4; ++trial) {
    std::vector<float> x(static_cast<size_t>(n)), hx;
    for (auto& v : x) v = normal(rng);
    hx = x;
    for (int64_t b = 0; b < n; b += 32) hadamard32(hx.data() + b);
    for (int64_t r = 0; r < a.tensor(w)->ne[1]; ++r) {
      const double ref = dot(a.row(w, r), x);
      err_rot += std::pow(dot(rot.row(w, r), hx) - ref, 2);
      err_plain += std::pow(dot(plain.row(w, r), x) - ref, 2);
      err_forgot += std::pow(dot(rot.row(w, r), x) - ref, 2);
      norm += ref * ref;
    }
  }
  const double rel_rot = std::sqrt(err_rot / norm), rel_plain = std::sqrt(err_plain / norm), rel_forgot = std::sqrt(err_forgot / norm);
  EXPECT_LT(rel_rot, 0.2) << "rotated " << rel_rot << ", plain " << rel_plain;
  EXPECT_LT(rel_plain, 0.2);
  EXPECT_GT(rel_forgot, 0.8) << "without the activations' rotation the product is noise";
}

TEST(Rotate, AnImportanceMatrixWeighsTheQuantization) {
  TempDir dir;
  const std::string src = synth(dir, "src.gguf", "f16");
  write_importance(src, dir.file("imatrix.gguf"));
  const Importance imp = load_importance(dir.file("imatrix.gguf"));
  ASSERT_EQ(imp.weights.count("blk.0.attn_q.weight"), 1u);
  EXPECT_FLOAT_EQ(imp.weights.at("blk.0.attn_q.weight")[3], 4.0f);  // the mean: sum 40 over 10 tokens
  RotateOptions with;
  with.importance = &imp;
  RotateSummary s = rotate_model(src, dir.file("rot-imatrix.gguf"), with);
  EXPECT_EQ(s.without_importance, 0);
  rotate_model(src, dir.file("rot.gguf"), {});
  Loaded a(src), weighed(dir.file("rot-imatrix.gguf")), unweighed(dir.file("rot.gguf"));
  EXPECT_TRUE(read_model_facts(dir.file("rot-imatrix.gguf")).hadamard_q4_0);
  const char* w = "blk.0.ffn_up.weight";
  const ggml_tensor *x = weighed.tensor(w), *y = unweighed.tensor(w);
  ASSERT_EQ(x->type, GGML_TYPE_Q4_0);
  EXPECT_NE(std::memcmp(x->data, y->data, ggml_nbytes(x)), 0) << "the importance changed no block";
  // Still the product, up to Q4_0 rounding.
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  const int64_t n = x->ne[0];
  std::vector<float> in(static_cast<size_t>(n)), hx;
  for (auto& v : in) v = normal(rng);
  hx = in;
  for (int64_t b = 0; b < n; b += 32) hadamard32(hx.data() + b);
  double err = 0, norm = 0;
  for (int64_t r = 0; r < x->ne[1]; ++r) {
    const double ref = dot(a.row(w, r), in);
    err += std::pow(dot(weighed.row(w, r), hx) - ref, 2);
    norm += ref * ref;
  }
  EXPECT_LT(std::sqrt(err / norm), 0.2);
}

TEST(Rotate, BadImportanceMatricesGetOneLine) {
  TempDir dir;
  const std::string src = synth(dir, "src.gguf", "f16");
  write_importance(src, dir.file("short.gguf"), "blk.1.ffn_down.weight");
  const Importance imp = load_importance(dir.file("short.gguf"));
  RotateOptions o;
  o.importance = &imp;
  const int64_t n = Loaded(src).tensor("blk.1.ffn_down.weight")->ne[0];
  EXPECT_EQ(error_of([&] { rotate_model(src, dir.file("x.gguf"), o); }),
            src + ": the importance matrix has " + std::to_string(n - 32) + " values for blk.1.ffn_down.weight, which needs " +
                std::to_string(n) + ": it was made for another model");
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.gguf")));
  std::ofstream(dir.file("text.dat")) << "not an importance matrix";
  EXPECT_EQ(error_of([&] { load_importance(dir.file("text.dat")); }),
            dir.file("text.dat") + ": not a GGUF importance matrix (llama-imatrix writes one with -o FILE.gguf)");
  EXPECT_EQ(error_of([&] { load_importance(src); }), src + ": holds no importance data (no *.in_sum2 tensors)");
  EXPECT_EQ(error_of([&] { load_importance(dir.file("none.gguf")); }), dir.file("none.gguf") + ": no such importance matrix file");
}

TEST(Rotate, BadInputsGetOneLineAndLeaveNothing) {
  TempDir dir;
  const std::string src = synth(dir, "src.gguf", "f16");
  rotate_model(src, dir.file("rot.gguf"), {});
  const std::string q4 = synth(dir, "q4.gguf", "q4_0");
  EXPECT_EQ(error_of([&] { rotate_model(dir.file("rot.gguf"), dir.file("again.gguf"), {}); }),
            dir.file("rot.gguf") + ": is already rotated (onebit.hadamard_q4_0 = 32)");
  EXPECT_EQ(error_of([&] { rotate_model(q4, dir.file("x.gguf"), {}); }),
            q4 + ": tensor blk.0.attn_q.weight is q4_0; rotating weights already rounded to few bits adds their error: "
                 "rotate from an F32, F16, BF16 or Q8_0 file");
  EXPECT_EQ(error_of([&] { rotate_model(src, src, {}); }), src + ": is the source; write the rotated file elsewhere");
  EXPECT_EQ(error_of([&] { rotate_model(src, dir.file("no/such/dir/x.gguf"), {}); }),
            dir.file("no/such/dir/x.gguf.part") + ": cannot write: No such file or directory");
  // Cut short: the header reads, the data does not.
  std::filesystem::copy_file(src, dir.file("cut.gguf"));
  std::filesystem::resize_file(dir.file("cut.gguf"), std::filesystem::file_size(src) / 2);
  EXPECT_NE(error_of([&] { rotate_model(dir.file("cut.gguf"), dir.file("x.gguf"), {}); }), "");
  for (const char* left : {"again.gguf", "x.gguf", "x.gguf.part", "again.gguf.part"})
    EXPECT_FALSE(std::filesystem::exists(dir.file(left))) << left;
}

}  // namespace onebit
