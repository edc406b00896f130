// The shipped model: `1bit serve` with no -m serves models/1bit-small (what `make serve` runs),
// it answers in the template, and --draft and --dflash with its shipped drafters draft without
// changing the greedy answer (the draft model keeping its drafted KV or not); the engine's
// profile of a decode step adds up; --alias names it for every client; on a Vulkan build it
// serves on the Vulkan device.
#include <signal.h>

#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/device.h"
#include "http/conn.h"
#include "subprocess.h"
#include "test_support.h"

namespace onebit::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const std::string kTarget = "/models/1bit-small-145m-q4_0.gguf";
const std::string kDraft = "/models/1bit-small-draft-19m-q8_0.gguf";
const std::string kDflash = "/models/1bit-small-dflash-25m-q8_0.gguf";

json chat(int port, const std::string& prompt, int max_tokens) {
  HttpResult r = http_fetch("127.0.0.1", port, "POST", "/v1/chat/completions",
                            json{{"messages", {{{"role", "user"}, {"content", prompt}}}},
                                 {"max_tokens", max_tokens}, {"temperature", 0}}.dump(),
                            {{"Content-Type", "application/json"}}, 120000);
  EXPECT_EQ(r.status, 200) << r.body << r.error;
  return json::parse(r.body, nullptr, false);
}

TEST(DefaultModel, ServeWithoutAModelServesTheShippedOne) {
  RunResult dry = run({onebit_binary(), "serve", "--dry-run"});
  ASSERT_EQ(dry.code, 0) << dry.err;
  EXPECT_NE(dry.out.find(" -m " + source_dir() + kTarget + " "), std::string::npos) << dry.out;

  TempDir dir;
  Subprocess serve({onebit_binary(), "serve", "--port", "0"}, {}, dir.path());
  int port = serve_ready_port(serve);
  ASSERT_GT(port, 0) << serve.err();
  json j = chat(port, "Write a Python function `count_vowels`: Return the number of vowels in a string.", 300);
  std::string answer = j["choices"][0]["message"]["content"];
  // Trained on docstring -> function pairs: the answer is the function asked for.
  EXPECT_EQ(answer.rfind("def count_vowels(", 0), 0u) << answer;
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop") << answer;  // it ends its turn by itself
  serve.signal(SIGTERM);
  EXPECT_EQ(serve.wait(20s), 0);
}

// --alias names the model for every client: the engine's /v1/models and replies, Ollama's tags.
TEST(DefaultModel, TheAliasIsTheModelsName) {
  TempDir dir;
  Subprocess serve({onebit_binary(), "serve", "--port", "0", "--alias", "house-model"}, {}, dir.path());
  const int port = serve_ready_port(serve);
  ASSERT_GT(port, 0) << serve.err();
  HttpResult models = http_fetch("127.0.0.1", port, "GET", "/v1/models");
  ASSERT_EQ(models.status, 200) << models.body;
  EXPECT_EQ(json::parse(models.body)["data"][0]["id"], "house-model") << models.body;
  EXPECT_EQ(chat(port, "Say hi.", 4)["model"], "house-model");
  HttpResult tags = http_fetch("127.0.0.1", port, "GET", "/api/tags");
  ASSERT_EQ(tags.status, 200) << tags.body;
  EXPECT_EQ(json::parse(tags.body)["models"][0]["name"], "house-model") << tags.body;
  HttpResult ollama_chat = http_fetch("127.0.0.1", port, "POST", "/api/chat",
                                      json{{"model", "house-model"}, {"stream", false},
                                           {"messages", {{{"role", "user"}, {"content", "Say hi."}}}},
                                           {"options", {{"num_predict", 4}}}}.dump(),
                                      {{"Content-Type", "application/json"}}, 120000);
  EXPECT_EQ(ollama_chat.status, 200) << ollama_chat.body;
  // serve owns the name: the engine's own spelling after "--" as well is refused.
  RunResult twice = run({onebit_binary(), "serve", "--alias", "a", "--dry-run", "--", "--alias", "b"});
  EXPECT_EQ(twice.code, 1);
  EXPECT_NE(twice.err.find("--alias is set twice"), std::string::npos) << twice.err;
  serve.signal(SIGTERM);
  EXPECT_EQ(serve.wait(20s), 0);
}

// A line of the engine's step profile (patch 0007): "onebit step profile: KIND, N steps, ms per
// step: NAME VALUE, NAME VALUE, ...", KIND plain or speculative.
struct StepProfile {
  long steps = 0;
  std::map<std::string, double> ms;
};

std::optional<StepProfile> step_profile_in(const std::string& log, const std::string& kind) {
  const std::string tag = "onebit step profile: " + kind + ", ";
  size_t at = log.find(tag);
  if (at == std::string::npos) return std::nullopt;
  size_t end = log.find('\n', at);
  std::istringstream in(log.substr(at + tag.size(), end == std::string::npos ? std::string::npos : end - at - tag.size()));
  StepProfile p;
  in >> p.steps;
  for (std::string word; word != "step:" && in >> word;) {  // " steps, ms per step:"
  }
  std::string name;
  double value = 0;
  while (in >> name >> value) {
    p.ms[name] = value;
    in.ignore(1);  // the comma
  }
  return p;
}

// On an engine built with Vulkan (make build VULKAN=1) the shipped model serves on a Vulkan
// device: the first one, which is Mesa's lavapipe on the CPU where there is no GPU (the engine
// lists a CPU's Vulkan device only when GGML_VK_VISIBLE_DEVICES names it).
TEST(DefaultModel, ServesOnVulkan) {
  if (!engine_built_with_vulkan()) GTEST_SKIP() << "the engine was built without Vulkan (make build VULKAN=1)";
  TempDir dir;
  const std::string log = dir.path() + "/engine.log";
  // -lv 4: the engine then logs the device it loads onto.
  Subprocess serve({onebit_binary(), "serve", "--port", "0", "--device", "vulkan", "--engine-log", log, "--", "-lv", "4"},
                   {{"GGML_VK_VISIBLE_DEVICES", "0"}}, dir.path());
  int port = serve_ready_port(serve, 300s);
  ASSERT_GT(port, 0) << serve.err();
  json j = chat(port, "Write a Python function `count_vowels`: Return the number of vowels in a string.", 16);
  std::string answer = j["choices"][0]["message"]["content"];
  EXPECT_EQ(answer.rfind("def count_vowels(", 0), 0u) << answer;
  serve.signal(SIGTERM);
  EXPECT_EQ(serve.wait(20s), 0);
  // The layers went to the Vulkan device.
  const std::string text = read_file(log);
  EXPECT_NE(text.find("using device Vulkan0"), std::string::npos) << text.substr(0, 4000);
  EXPECT_NE(text.find("repeating layers to GPU"), std::string::npos) << text.substr(0, 4000);
}

TEST(DefaultModel, TheShippedDrafterDrafts) {
  TempDir dir;
  const std::string log = dir.path() + "/engine.log";
  Subprocess serve({onebit_binary(), "serve", "--port", "0", "--draft", source_dir() + kDraft, "--engine-log", log},
                   {}, dir.path());
  int port = serve_ready_port(serve);
  ASSERT_GT(port, 0) << serve.err();
  json j = chat(port, "Write a Python function `getpos`: Return current line number and offset.", 64);
  // The drafter was trained on the same data with the same tokenizer: some drafts are right.
  EXPECT_GT(j["timings"]["draft_n"].get<int>(), 0) << j.dump();
  EXPECT_GT(j["timings"]["draft_n_accepted"].get<int>(), 0) << j.dump();
  serve.signal(SIGTERM);
  EXPECT_EQ(serve.wait(20s), 0);
  const std::string text = read_file(log);
  EXPECT_EQ(text.find("onebit step profile"), std::string::npos) << "the profile is off without ONEBIT_STEP_PROFILE";
}

// The profile of one answer of `max_tokens` from serve with `extra` arguments and the profile on.
std::optional<StepProfile> profile_of_answer(const std::vector<std::string>& extra, const std::string& kind,
                                             int max_tokens, int* predicted) {
  TempDir dir;
  const std::string log = dir.path() + "/engine.log";
  std::vector<std::string> argv = {onebit_binary(), "serve", "--port", "0", "--engine-log", log};
  argv.insert(argv.end(), extra.begin(), extra.end());
  Subprocess serve(argv, {{"ONEBIT_STEP_PROFILE", "1"}}, dir.path());
  int port = serve_ready_port(serve);
  EXPECT_GT(port, 0) << serve.err();
  if (port <= 0) return std::nullopt;
  json j = chat(port, "Write a Python function `getpos`: Return current line number and offset.", max_tokens);
  *predicted = j["timings"]["predicted_n"].get<int>();
  // The lines come once the slot is idle, right after the answer.
  std::optional<StepProfile> p;
  for (int i = 0; i < 100 && !(p = step_profile_in(read_file(log), kind)); ++i) std::this_thread::sleep_for(100ms);
  serve.signal(SIGTERM);
  EXPECT_EQ(serve.wait(20s), 0);
  EXPECT_TRUE(p) << read_file(log);
  return p;
}

// Each phase is there and not negative, and they add up to the step.
void expect_phases_add_up(StepProfile& p, const std::vector<std::string>& parts) {
  double sum = 0;
  for (const auto& phase : parts) {
    ASSERT_TRUE(p.ms.count(phase)) << phase << " missing from the profile";
    EXPECT_GE(p.ms[phase], 0.0) << phase;
    sum += p.ms[phase];
  }
  EXPECT_NEAR(sum, p.ms["step"], 0.01 + 1e-3 * p.ms["step"]);
  EXPECT_GE(p.ms["between"], 0.0);
}

TEST(DefaultModel, TheStepProfileAddsUp) {
  int predicted = 0;
  std::optional<StepProfile> spec =
      profile_of_answer({"--dflash", source_dir() + kDflash, "--draft-max", "7"}, "speculative", 48, &predicted);
  ASSERT_TRUE(spec);
  // Every speculative step verifies a draft and yields at least one token.
  EXPECT_GE(spec->steps, 1);
  EXPECT_LE(spec->steps, predicted);
  expect_phases_add_up(*spec, {"draft", "checkpoint", "verify", "inject", "accept", "other"});
  // The drafter and the target both run in each step.
  EXPECT_GT(spec->ms["draft"], 0.0);
  EXPECT_GT(spec->ms["verify"], 0.0);
  EXPECT_GT(spec->ms["inject"], 0.0);

  std::optional<StepProfile> plain = profile_of_answer({}, "plain", 24, &predicted);
  ASSERT_TRUE(plain);
  // Every token after the first (which the prompt's update samples) is one plain step.
  EXPECT_EQ(plain->steps, predicted - 1);
  expect_phases_add_up(*plain, {"draft", "decode", "sample", "other"});
  EXPECT_EQ(plain->ms["draft"], 0.0);
  EXPECT_GT(plain->ms["decode"], 0.0);
  // Patch 0019: the sampler and the token's text are parts of the sample phase.
  ASSERT_TRUE(plain->ms.count("sampler") && plain->ms.count("text"));
  EXPECT_GT(plain->ms["sampler"], 0.0);
  EXPECT_GE(plain->ms["text"], 0.0);
  EXPECT_LE(plain->ms["sampler"] + plain->ms["text"], plain->ms["sample"] + 0.002);
}

// Patch 0008: the draft model keeps its drafted KV rather than decoding each verification batch
// again. Greedy answers stay those of the target alone either way, also for short answers on a
// server that reuses its cache (a fully accepted draft followed by a step without one, which must
// still give the drafter the token it never decoded), and the drafter, which must see every
// token of the sequence, drafts about as well as when it decodes them all again.
TEST(DefaultModel, TheDraftModelKeepsItsKv) {
  const std::string prompts[] = {
      "Write a Python function `is_palindrome`: Return True if a string reads the same backwards.",
      "Write a Python function `getpos`: Return current line number and offset."};
  const int lengths[] = {96, 3, 5, 9, 17, 33};
  std::vector<std::string> answers[3];
  int accepted[3] = {0, 0, 0}, drafted[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    TempDir dir;
    std::vector<std::string> argv = {onebit_binary(), "serve", "--port", "0"};
    if (i > 0) argv.insert(argv.end(), {"--draft", source_dir() + kDraft, "--draft-max", "4"});
    std::map<std::string, std::string> env;
    if (i == 2) env["ONEBIT_DRAFT_REEVAL"] = "1";
    Subprocess serve(argv, env, dir.path());
    int port = serve_ready_port(serve);
    ASSERT_GT(port, 0) << serve.err();
    for (const auto& prompt : prompts) {
      for (int n : lengths) {
        json j = chat(port, prompt, n);
        answers[i].push_back(j.value("/choices/0/message/content"_json_pointer, std::string("(no answer)")));
        if (i > 0 && n == lengths[0]) {
          drafted[i] += j["timings"]["draft_n"].get<int>();
          accepted[i] += j["timings"]["draft_n_accepted"].get<int>();
        }
      }
    }
    serve.signal(SIGTERM);
    EXPECT_EQ(serve.wait(20s), 0);
  }
  EXPECT_EQ(answers[1], answers[0]);
  EXPECT_EQ(answers[2], answers[0]);
  ASSERT_GT(drafted[2], 0);
  ASSERT_GT(accepted[2], 0);
  const double kept = double(accepted[1]) / drafted[1], again = double(accepted[2]) / drafted[2];
  EXPECT_GT(kept, 0.8 * again) << accepted[1] << "/" << drafted[1] << " kept against " << accepted[2] << "/"
                               << drafted[2] << " decoded again";
}

TEST(DefaultModel, TheShippedDflashDrafterDraftsTheSameAnswer) {
  const std::string prompt = "Write a Python function `is_palindrome`: Return True if a string reads the same backwards.";
  std::string answers[2];
  for (int i = 0; i < 2; ++i) {
    TempDir dir;
    std::vector<std::string> argv = {onebit_binary(), "serve", "--port", "0"};
    if (i == 1) argv.insert(argv.end(), {"--dflash", source_dir() + kDflash, "--draft-max", "7"});
    Subprocess serve(argv, {}, dir.path());
    int port = serve_ready_port(serve);
    ASSERT_GT(port, 0) << serve.err();
    json j = chat(port, prompt, 64);
    answers[i] = j["choices"][0]["message"]["content"];
    if (i == 1) {
      // It reads the target's hidden states: trained against this target, some blocks are right.
      EXPECT_GT(j["timings"]["draft_n"].get<int>(), 0) << j.dump();
      EXPECT_GT(j["timings"]["draft_n_accepted"].get<int>(), 0) << j.dump();
    }
    serve.signal(SIGTERM);
    EXPECT_EQ(serve.wait(20s), 0);
  }
  EXPECT_EQ(answers[1], answers[0]);
}

}  // namespace
}  // namespace onebit::testing
