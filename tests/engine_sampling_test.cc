// Engine patch 0011: llama-server samples the very same tokens when it takes the top-k candidates
// straight from the logits as with the engine's full candidate array (ONEBIT_SAMPLING_FULL=1), for
// greedy and seeded sampling, with and without logit biases (ignore_eos is one), and where the
// fast path must step aside (penalties, n_probs, a grammar).
#include <chrono>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "http/conn.h"
#include "http/net.h"
#include "subprocess.h"
#include "test_support.h"

namespace onebit::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

struct Case {
  const char* name;
  json fields;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"greedy", {{"temperature", 0}}},
      {"greedy, top_k 0", {{"temperature", 0}, {"top_k", 0}}},
      {"greedy, top_p 0.9, min_p 0.1", {{"temperature", 0}, {"top_p", 0.9}, {"min_p", 0.1}}},
      {"seed 42", {{"seed", 42}}},
      {"seed 7", {{"seed", 7}}},
      {"top_k 0, top_p 0.9", {{"seed", 42}, {"top_k", 0}, {"top_p", 0.9}}},
      {"top_k 1", {{"seed", 42}, {"top_k", 1}}},
      {"top_k 200, temperature 1.5", {{"seed", 42}, {"top_k", 200}, {"temperature", 1.5}, {"min_p", 0}}},
      {"grammar", {{"seed", 42}, {"grammar", "root ::= [a-z ,.]+"}}},
      {"penalties (the engine's way)", {{"seed", 42}, {"repeat_penalty", 1.2}}},
      {"n_probs (the engine's way)", {{"seed", 42}, {"n_probs", 3}}},
      {"ignore_eos, greedy", {{"temperature", 0}, {"ignore_eos", true}}},
      {"ignore_eos, greedy, top_k 0", {{"temperature", 0}, {"top_k", 0}, {"ignore_eos", true}}},
      {"ignore_eos, seed 42", {{"seed", 42}, {"ignore_eos", true}}},
      {"ignore_eos, top_k 200, temperature 1.5", {{"seed", 42}, {"top_k", 200}, {"temperature", 1.5}, {"min_p", 0}, {"ignore_eos", true}}},
      // A positive bias that lifts a token into the top k, negative ones on frequent tokens.
      {"logit_bias, seed 42", {{"seed", 42}, {"logit_bias", json::array({json::array({" dragon", 4.0}), json::array({" the", -3.0}), json::array({" a", -2.0})})}}},
      {"logit_bias, greedy", {{"temperature", 0}, {"logit_bias", json::array({json::array({" dragon", 3.0}), json::array({" the", -3.0})})}}},
      {"logit_bias, ignore_eos, seed 7", {{"seed", 7}, {"ignore_eos", true}, {"logit_bias", json::array({json::array({" forest", 2.5}), json::array({" was", -100})})}}},
  };
  return all;
}

// Every case's tokens from one llama-server, with the fast path on or off.
std::vector<json> sample_all(const std::string& model, bool full, int n_predict, const TempDir& dir) {
  const int port = pick_free_port("127.0.0.1");
  Subprocess server({llama_server_binary(), "-m", model, "-c", "1024", "-t", "2", "-np", "1", "--port", std::to_string(port)},
                    {{"ONEBIT_SAMPLING_FULL", full ? "1" : "0"}}, dir.path());
  EXPECT_TRUE(wait_engine_healthy(port, 60s)) << server.err();
  std::vector<json> out;
  for (const Case& c : cases()) {
    json body = c.fields;
    body["prompt"] = "Once upon a time, in a small village at the edge of the forest, there lived";
    body["n_predict"] = n_predict;
    body["cache_prompt"] = false;
    body["return_tokens"] = true;
    HttpResult r = http_fetch("127.0.0.1", port, "POST", "/completion", body.dump(), {{"Content-Type", "application/json"}},
                              120000);
    out.push_back(r.status == 200 ? json::parse(r.body)["tokens"] : json(r.error + r.body));
  }
  return out;
}

void expect_same_tokens(const std::string& model, int n_predict) {
  TempDir dir;
  const std::vector<json> fast = sample_all(model, false, n_predict, dir);
  const std::vector<json> full = sample_all(model, true, n_predict, dir);
  for (size_t i = 0; i < cases().size(); ++i) {
    ASSERT_TRUE(fast[i].is_array()) << cases()[i].name << ": " << fast[i];
    EXPECT_FALSE(fast[i].empty()) << cases()[i].name;
    EXPECT_EQ(fast[i], full[i]) << cases()[i].name;
  }
}

TEST(EngineSampling, TheTopKFromTheLogitsSamplesTheSameTokens) {
  expect_same_tokens(source_dir() + "/models/1bit-tiny-32m-q8_0.gguf", 128);
}

// 152 k entries of vocabulary, where the fast path saves the most.
TEST(EngineSampling, TheSameOnALargeVocabulary) {
  expect_same_tokens(source_dir() + "/models/1bit-small-145m-q4_0.gguf", 48);
}

}  // namespace
}  // namespace onebit::testing
