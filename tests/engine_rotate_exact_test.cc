// The engine's rotation of activations is exact: every Q4_0 product of a rotated file takes a
// rotated input on each architecture 1bit rotates for (llama, the qwen35 hybrid's delta-net
// layers, qwen3moe's experts), and on llama and qwen3moe the numbers show it:
//
// From a plain Q4_0 file P (weights W0 that Q4_0 holds exactly) this builds an F32 source S whose
// rotated weights are W0 again: each 32-block of S is H·w0 (H·H = I). `1bit rotate S` must give
// back P's blocks byte for byte, so a rotated file R computes w0·(Hx) where S computes
// (H·w0)·x: the same product. R against S then differs only as P against its own F32 copy D
// does, by the rounding of the activations to 8 bits; an engine that did not rotate would compute
// w0·x instead.
#include <cmath>
#include <cstring>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ggml.h"
#include "gguf.h"
#include "model/rotate.h"
#include "model/synth.h"
#include "subprocess.h"
#include "test_support.h"

namespace onebit::testing {
namespace {

struct GgufFree {
  void operator()(gguf_context* c) const { gguf_free(c); }
};
struct GgmlFree {
  void operator()(ggml_context* c) const { ggml_free(c); }
};

// Writes `out` from `in` with every Q4_0 tensor as F32: dequantized, and each 32-block of its rows
// rotated by H when `rotate`.
void write_f32_copy(const std::string& in, const std::string& out, bool rotate) {
  ggml_context* data_raw = nullptr;
  std::unique_ptr<gguf_context, GgufFree> src(gguf_init_from_file(in.c_str(), {/*no_alloc=*/false, &data_raw}));
  ASSERT_NE(src, nullptr) << in;
  std::unique_ptr<ggml_context, GgmlFree> data(data_raw);
  std::unique_ptr<gguf_context, GgufFree> dst(gguf_init_empty());
  gguf_set_kv(dst.get(), src.get());
  gguf_set_val_u32(dst.get(), "general.file_type", 0);  // all F32
  size_t bytes = 0;
  for (int64_t i = 0; i < gguf_get_n_tensors(src.get()); ++i)
    bytes += ggml_nelements(ggml_get_tensor(data.get(), gguf_get_tensor_name(src.get(), i))) * sizeof(float) + 1024;
  std::unique_ptr<ggml_context, GgmlFree> ctx(ggml_init({bytes, nullptr, false}));
  for (int64_t i = 0; i < gguf_get_n_tensors(src.get()); ++i) {
    const ggml_tensor* t = ggml_get_tensor(data.get(), gguf_get_tensor_name(src.get(), i));
    if (t->type != GGML_TYPE_Q4_0) {
      gguf_add_tensor(dst.get(), t);
      continue;
    }
    ggml_tensor* f = ggml_new_tensor(ctx.get(), GGML_TYPE_F32, ggml_n_dims(t), t->ne);
    ggml_set_name(f, ggml_get_name(t));
    float* w = static_cast<float*>(f->data);
    ggml_get_type_traits(GGML_TYPE_Q4_0)->to_float(t->data, w, ggml_nelements(t));
    if (rotate)
      for (int64_t b = 0; b < ggml_nelements(t); b += 32) hadamard32(w + b);
    gguf_add_tensor(dst.get(), f);
  }
  ASSERT_TRUE(gguf_write_to_file(dst.get(), out.c_str(), false)) << out;
}

// The Q4_0 tensors of two files are the same bytes.
bool same_q4_0_blocks(const std::string& a, const std::string& b) {
  ggml_context *da = nullptr, *db = nullptr;
  std::unique_ptr<gguf_context, GgufFree> ga(gguf_init_from_file(a.c_str(), {false, &da}));
  std::unique_ptr<gguf_context, GgufFree> gb(gguf_init_from_file(b.c_str(), {false, &db}));
  std::unique_ptr<ggml_context, GgmlFree> ca(da), cb(db);
  int64_t compared = 0;
  for (int64_t i = 0; i < gguf_get_n_tensors(ga.get()); ++i) {
    const ggml_tensor* x = ggml_get_tensor(da, gguf_get_tensor_name(ga.get(), i));
    const ggml_tensor* y = ggml_get_tensor(db, gguf_get_tensor_name(ga.get(), i));
    if (x->type != GGML_TYPE_Q4_0) continue;
    if (y == nullptr || y->type != GGML_TYPE_Q4_0 || std::memcmp(x->data, y->data, ggml_nbytes(x)) != 0) return false;
    ++compared;
  }
  return compared > 0;
}

// The engine's mean KLD of `model`'s token distributions from `base`'s on a fixed text.
double kld(const TempDir& dir, const std::string& base, const std::string& model) {
  const std::string perplexity = engine_prefix() + "/bin/llama-perplexity";
  const std::string text = source_dir() + "/models/licenses/Python-3.11.txt";
  const std::string logits = dir.file("base.kld");
  const std::vector<std::string> common = {perplexity, "-f", text, "-c", "128", "--chunks", "4", "-t", "2",
                                           "--kl-divergence-base", logits};
  std::vector<std::string> argv = common;
  argv.insert(argv.begin() + 1, {"-m", base});
  RunResult r = run(argv, {}, std::chrono::seconds(120));
  EXPECT_EQ(r.code, 0) << r.err.substr(r.err.size() > 2000 ? r.err.size() - 2000 : 0);
  argv = common;
  argv.insert(argv.begin() + 1, {"-m", model});
  argv.push_back("--kl-divergence");
  r = run(argv, {}, std::chrono::seconds(120));
  EXPECT_EQ(r.code, 0) << r.err.substr(r.err.size() > 2000 ? r.err.size() - 2000 : 0);
  const std::string all = r.out + r.err;
  const size_t at = all.find("Mean    KLD:");
  EXPECT_NE(at, std::string::npos) << all.substr(all.size() > 2000 ? all.size() - 2000 : 0);
  return at == std::string::npos ? 1e9 : std::atof(all.c_str() + at + std::strlen("Mean    KLD:"));
}

// The engine's graph for `model` as its scheduler prints it (GGML_SCHED_DEBUG=2): one line per
// node, the node's sources after it.
std::vector<std::string> graph_lines(const std::string& model) {
  const std::string perplexity = engine_prefix() + "/bin/llama-perplexity";
  RunResult r = run({perplexity, "-m", model, "-f", source_dir() + "/models/licenses/Python-3.11.txt", "-c", "128",
                     "--chunks", "1", "-t", "2", "-v"},
                    {{"GGML_SCHED_DEBUG", "2"}}, std::chrono::seconds(120));
  EXPECT_EQ(r.code, 0) << r.err.substr(r.err.size() > 2000 ? r.err.size() - 2000 : 0);
  std::vector<std::string> lines;
  size_t at = 0;
  const std::string all = r.out + r.err;
  while (at < all.size()) {
    size_t end = all.find('\n', at);
    if (end == std::string::npos) end = all.size();
    lines.push_back(all.substr(at, end - at));
    at = end + 1;
  }
  return lines;
}

class RotateExact : public ::testing::TestWithParam<const char*> {};

// Every product of a layer's Q4_0 weight takes a rotated input: a check of the graph, which holds
// where the numbers cannot show it (the random hybrid below amplifies even the rounding of its
// activations into a different distribution).
TEST_P(RotateExact, EveryQ4_0ProductTakesARotatedInput) {
  TempDir dir;
  SynthOptions o;
  o.vocab_dir = vocab_dir();
  write_synth_model(*find_synth_shape(GetParam()), o, dir.file("f16.gguf"));
  rotate_model(dir.file("f16.gguf"), dir.file("rotated.gguf"), {});
  // The scheduler cuts names to 20 characters: "blk.0.ffn_gate_exps.", the rotated input "rot-ffn_norm-0 (resh".
  const std::regex rotated_weight(R"( blk\.[0-9]+\.(attn_(q|k|v|qkv|gate|output)|ffn_(gate|up|down)(_exps|_shexp)?|ssm_(in|out|alpha|beta))\.)");
  int products = 0;
  for (const std::string& line : graph_lines(dir.file("rotated.gguf"))) {
    if (line.find("MUL_MAT") == std::string::npos || !std::regex_search(line, rotated_weight)) continue;
    ++products;
    EXPECT_NE(line.find(" rot-"), std::string::npos) << line;
  }
  EXPECT_GT(products, 10);
}

class RotateExactNumbers : public ::testing::TestWithParam<const char*> {};

TEST_P(RotateExactNumbers, ARotatedFileComputesWhatItsSourceDoes) {
  TempDir dir;
  SynthOptions o;
  o.vocab_dir = vocab_dir();
  write_synth_model(*find_synth_shape(GetParam()), o, dir.file("f16.gguf"));
  rotate_model(dir.file("f16.gguf"), dir.file("plain.gguf"), {/*plain=*/true});
  write_f32_copy(dir.file("plain.gguf"), dir.file("plain-f32.gguf"), false);
  write_f32_copy(dir.file("plain.gguf"), dir.file("source.gguf"), true);
  rotate_model(dir.file("source.gguf"), dir.file("rotated.gguf"), {});
  ASSERT_TRUE(same_q4_0_blocks(dir.file("plain.gguf"), dir.file("rotated.gguf")))
      << "rotating H·w0 back did not give w0's Q4_0 blocks";
  const double activations_only = kld(dir, dir.file("plain-f32.gguf"), dir.file("plain.gguf"));
  const double rotated = kld(dir, dir.file("source.gguf"), dir.file("rotated.gguf"));
  std::cout << GetParam() << ": KLD of the rotated file from its source " << rotated
            << ", of the plain file from its F32 copy " << activations_only << "\n";
  EXPECT_LE(rotated, 2 * activations_only + 1e-3);
}

std::string param_name(const ::testing::TestParamInfo<const char*>& info) {
  std::string name = info.param;
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Architectures, RotateExact, ::testing::Values("tiny-llama", "tiny-qwen35", "tiny-qwen3moe"),
                         param_name);
// The random tiny-qwen35 is left out here: its own F32 copy and Q4_0 file already disagree at a
// KLD of 0.93 (the rounding of the activations alone), so no bound could tell a right runtime.
INSTANTIATE_TEST_SUITE_P(Architectures, RotateExactNumbers, ::testing::Values("tiny-llama", "tiny-qwen3moe"), param_name);

}  // namespace
}  // namespace onebit::testing
