// 1bit synth's small shapes load and run in the real engine with finite outputs: a dense llama,
// qwen3, a qwen3 MoE and a qwen3.5-style hybrid with gated delta-net layers, in every weight type.
#include <signal.h>

#include <cmath>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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
