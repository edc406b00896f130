// 1bit synth's small shapes load and run in the real engine with finite outputs: a dense llama,
// qwen3, a qwen3 MoE and a qwen3.5-style hybrid with gated delta-net layers, in every weight type;
// its drafters (DFlash, EAGLE-3, Qwen3.5 MTP) make the engine draft for their targets.
#include <signal.h>

#include <cmath>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gguf.h"
#include "http/conn.h"
#include "model/gguf_facts.h"
#include "model/synth.h"
#include "subprocess.h"
#include "test_support.h"

namespace onebit::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

struct Case {
  const char* shape;
  const char* type;
  const char* architecture;
  bool moe;
};

class SynthRuns : public ::testing::TestWithParam<Case> {};

TEST_P(SynthRuns, LoadsAndRunsWithFiniteOutputs) {
  const Case c = GetParam();
  TempDir dir;
  SynthOptions o;
  o.vocab_dir = vocab_dir();
  o.type = c.type;
  const std::string model = dir.file("m.gguf");
  write_synth_model(*find_synth_shape(c.shape), o, model);
  ModelFacts f = read_model_facts(model);
  EXPECT_EQ(f.architecture, c.architecture);
  EXPECT_EQ(f.moe, c.moe);

  Subprocess serve({onebit_binary(), "serve", "-m", model, "--port", "0", "-c", "512"}, {}, dir.path());
  const int port = serve_ready_port(serve);
  ASSERT_GT(port, 0) << serve.err();
  HttpResult r = http_fetch("127.0.0.1", port, "POST", "/completion",
                            json{{"prompt", "def add(a, b):\n    return"}, {"n_predict", 16}, {"temperature", 0},
                                 {"ignore_eos", true}, {"n_probs", 5}}.dump(),
                            {{"Content-Type", "application/json"}}, 60000);
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["timings"]["predicted_n"], 16);
  for (const auto& step : j["completion_probabilities"])
    for (const auto& p : step["top_logprobs"]) {
      ASSERT_TRUE(p["logprob"].is_number()) << p.dump();  // NaN or inf would not be a JSON number
      EXPECT_TRUE(std::isfinite(p["logprob"].get<double>()));
    }
  serve.signal(SIGTERM);
  EXPECT_EQ(serve.wait(20s), 0);
}

INSTANTIATE_TEST_SUITE_P(Shapes, SynthRuns,
                         ::testing::Values(Case{"tiny-llama", "q4_0", "llama", false}, Case{"tiny-llama", "f32", "llama", false},
                                           Case{"tiny-qwen3", "q8_0", "qwen3", false}, Case{"tiny-qwen3moe", "q4_0", "qwen3moe", true},
                                           Case{"tiny-qwen35", "f16", "qwen35", false}, Case{"tiny-qwen35", "q4_0", "qwen35", false}),
                         [](const auto& info) {
                           std::string n = std::string(info.param.shape) + "_" + info.param.type;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// A target and its drafter (none: the target's own MTP layer drafts), run by `spec_type`.
struct DraftCase {
  const char* target;
  const char* drafter;
  const char* spec_type;
  bool borrowed_head = false;  // an eagle3 drafter without its own head: it borrows the target's
};

class SynthDrafts : public ::testing::TestWithParam<DraftCase> {};

TEST_P(SynthDrafts, TheEngineDraftsWithIt) {
  const DraftCase c = GetParam();
  TempDir dir;
  SynthOptions o;
  o.vocab_dir = vocab_dir();
  o.type = "q8_0";
  const std::string target = dir.file("target.gguf");
  write_synth_model(*find_synth_shape(c.target), o, target);
  std::vector<std::string> argv = {onebit_binary(), "serve", "-m", target, "--port", "0", "-c", "512", "--"};
  if (*c.drafter != '\0') {
    SynthShape drafter = *find_synth_shape(c.drafter);
    if (c.borrowed_head) drafter.draft_vocab = 0;
    o.type = "f16";
    write_synth_model(drafter, o, dir.file("drafter.gguf"));
    argv.insert(argv.end(), {"-md", dir.file("drafter.gguf")});
  }
  argv.insert(argv.end(), {"--spec-type", c.spec_type, "--spec-draft-n-max", "3"});

  Subprocess serve(argv, {}, dir.path());
  const int port = serve_ready_port(serve);
  ASSERT_GT(port, 0) << serve.err();
  HttpResult r = http_fetch("127.0.0.1", port, "POST", "/completion",
                            json{{"prompt", "def add(a, b):\n    return"}, {"n_predict", 16}, {"temperature", 0},
                                 {"ignore_eos", true}}.dump(),
                            {{"Content-Type", "application/json"}}, 60000);
  ASSERT_EQ(r.status, 200) << r.body;
  const json timings = json::parse(r.body)["timings"];
  EXPECT_EQ(timings["predicted_n"], 16);
  // Random weights accept next to no draft; that the engine drafted at all is what counts. A
  // drafter it fails to set up leaves it serving without one, and draft_n absent.
  ASSERT_TRUE(timings.contains("draft_n")) << r.body << serve.err();
  EXPECT_GT(timings["draft_n"].get<int>(), 0) << r.body;
  serve.signal(SIGTERM);
  EXPECT_EQ(serve.wait(20s), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Drafters, SynthDrafts,
    ::testing::Values(DraftCase{"tiny-llama", "tiny-llama-dflash", "draft-dflash"},
                      DraftCase{"tiny-llama", "tiny-llama-eagle3", "draft-eagle3"},
                      DraftCase{"tiny-llama", "tiny-llama-eagle3", "draft-eagle3", /*borrowed_head=*/true},
                      DraftCase{"tiny-qwen35", "tiny-qwen35-dflash", "draft-dflash"},
                      DraftCase{"tiny-qwen35-mtp", "", "draft-mtp"},
                      DraftCase{"tiny-qwen35", "tiny-qwen35-mtp-head", "draft-mtp"},
                      DraftCase{"tiny-qwen35-mtp", "tiny-qwen35-mtp-head", "draft-mtp"}),
    [](const auto& info) {
      std::string n = std::string(info.param.target) + "_" + (*info.param.drafter ? info.param.drafter : "own-mtp-layer") +
                      (info.param.borrowed_head ? "_borrowed-head" : "");
      for (char& ch : n)
        if (ch == '-') ch = '_';
      return n;
    });

TEST(SynthShapes, ADrafterThatCannotDraftForItsTargetIsAnError) {
  TempDir dir;
  SynthOptions o;
  o.vocab_dir = vocab_dir();
  auto write = [&](const SynthShape& s) { return error_of([&] { write_synth_model(s, o, dir.file("d.gguf")); }); };
  SynthShape narrow = *find_synth_shape("tiny-llama-dflash");
  narrow.n_embd = 32;
  EXPECT_EQ(write(narrow), "tiny-llama-dflash: a drafter has its target's vocabulary and width (tiny-llama: llama-spm, 64 wide)");
  SynthShape deep = *find_synth_shape("tiny-llama-dflash");
  deep.target_layers = {0, 2};  // tiny-llama has blocks 0 and 1; the input of block 2 does not exist
  EXPECT_EQ(write(deep), "tiny-llama-dflash: target layer 2 is not one of tiny-llama's 2 blocks");
  SynthShape two_layers = *find_synth_shape("tiny-llama-eagle3");
  two_layers.target_layers = {0, 1};
  EXPECT_EQ(write(two_layers), "tiny-llama-eagle3: an eagle3 drafter has 1 layer and reads exactly 3 target layers");
  SynthShape wide_head = *find_synth_shape("tiny-llama-eagle3");
  wide_head.draft_vocab = 32001;
  EXPECT_EQ(write(wide_head), "tiny-llama-eagle3: a draft vocabulary of 32001 tokens is larger than " + vocab_dir() +
                                 "/ggml-vocab-llama-spm.gguf's 32000");
}

TEST(SynthShapes, DFlashMasksWithASpecialTokenNoTextUses) {
  TempDir dir;
  SynthOptions o;
  o.vocab_dir = vocab_dir();
  auto mask_of = [&](const char* shape) {
    write_synth_model(*find_synth_shape(shape), o, dir.file("d.gguf"));
    gguf_init_params p{/*no_alloc=*/true, /*ctx=*/nullptr};
    gguf_context* g = gguf_init_from_file(dir.file("d.gguf").c_str(), p);
    const uint32_t mask = gguf_get_val_u32(g, gguf_find_key(g, "tokenizer.ggml.mask_token_id"));
    gguf_free(g);
    return mask;
  };
  EXPECT_EQ(mask_of("tiny-llama-dflash"), 0u);  // llama-spm's <unk>: its last token is ordinary text
  EXPECT_EQ(mask_of("tiny-qwen35-dflash"), 151935u);  // [PAD151935]
}

TEST(SynthShapes, RealDraftersHaveTheParameterCountsOfTheirTensors) {
  // llama3-8b-dflash, E 4096, 5 layers: fc {5 * 4096, 4096} = 83886080, enc.output_norm and
  // output_norm 2 * 4096; per layer q and o 2 * 4096 * 4096 = 33554432, k and v 2 * 4096 * 1024 =
  // 8388608, ffn 3 * 4096 * 14336 = 176160768, norms 2 * 4096 + 2 * 128 = 8448: 218112256.
  // 83886080 + 8192 + 5 * 218112256 = 1174455552. No embeddings or head: borrowed from the target.
  EXPECT_EQ(synth_parameter_count(*find_synth_shape("llama3-8b-dflash"), 128256), 1174455552);
  // qwen35-9b-dflash: the same with ffn 3 * 4096 * 12288 = 150994944, so 192946432 a layer.
  // 83886080 + 8192 + 5 * 192946432 = 1048626432.
  EXPECT_EQ(synth_parameter_count(*find_synth_shape("qwen35-9b-dflash"), 151936), 1048626432);
  // llama3-8b-eagle3: fc {3 * 4096, 4096} = 50331648; q {8192, 4096} = 33554432; k and v
  // {8192, 1024} = 2 * 8388608; o 16777216; ffn 176160768; head {4096, 32000} = 131072000; norms
  // (output, attn, attn_2, ffn) 4 * 4096 = 16384. Sum 424689664; d2t's 32000 ids are no weights.
  EXPECT_EQ(synth_parameter_count(*find_synth_shape("llama3-8b-eagle3"), 128256), 424689664);
  // The MTP layer of qwen35-9b (E 4096, H 16, Hkv 4, hd 256): gated q {4096, 8192} = 33554432,
  // k and v 2 * 4096 * 1024 = 8388608, o 16777216, q/k norms 512, attn and post-attention norms
  // 8192, ffn 3 * 4096 * 12288 = 150994944, eh_proj {8192, 4096} = 33554432, enorm, hnorm and
  // shared_head_norm 12288: 243290624.
  const int64_t mtp_layer = 243290624;
  const int64_t qwen35_9b = synth_parameter_count(*find_synth_shape("qwen35-9b"), 151936);
  EXPECT_EQ(synth_parameter_count(*find_synth_shape("qwen35-9b-mtp"), 151936), qwen35_9b + mtp_layer);
  // The head alone adds token_embd and the untied output, 2 * 4096 * 151936, and output_norm.
  EXPECT_EQ(synth_parameter_count(*find_synth_shape("qwen35-9b-mtp-head"), 151936),
            mtp_layer + 2 * 622329856 + 4096);
}

TEST(SynthShapes, RealShapesHaveThePublishedParameterCounts) {
  // The published totals of the models whose shapes are copied (embedding rows as released:
  // 128256 for Llama 3, 151936 for Qwen3).
  EXPECT_EQ(synth_parameter_count(*find_synth_shape("llama3-8b"), 128256), 8030261248);
  EXPECT_EQ(synth_parameter_count(*find_synth_shape("llama3.2-1b"), 128256), 1235814400);
  EXPECT_EQ(synth_parameter_count(*find_synth_shape("qwen3-8b"), 151936), 8190735360);
  EXPECT_EQ(synth_parameter_count(*find_synth_shape("qwen3-30b-a3b"), 151936), 30532122624);
  EXPECT_EQ(find_synth_shape("gpt-5"), nullptr);
}

}  // namespace
}  // namespace onebit::testing
