// `1bit lemonade` as Lemonade's own integration suites see a server: every route under every
// prefix, health, models, load/unload, system info, stats, errors and security, model
// management (eviction, busy models, failed loads, dead backends). Real engines on the shipped
// 1bit-tiny models and on random-weight models; real processes and sockets.
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/device.h"
#include "http/conn.h"
#include "model/synth.h"
#include "subprocess.h"
#include "test_support.h"

namespace onebit::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const char* const kPrefixes[] = {"/api/v0", "/api/v1", "/v0", "/v1"};

class Lemonade {
 public:
  explicit Lemonade(std::vector<std::string> extra = {}, std::map<std::string, std::string> env = {}) {
    std::filesystem::create_directories(dir_.file("extra"));
    SynthOptions o;
    o.vocab_dir = vocab_dir();
    write_synth_model(*find_synth_shape("tiny-llama"), o, dir_.file("extra/synth-llama.gguf"));
    std::vector<std::string> args = {onebit_binary(), "lemonade", "--port", "0", "--models-dir", source_dir() + "/models",
                                     "--extra-models-dir", dir_.file("extra"), "--state-dir", dir_.file("state")};
    args.insert(args.end(), extra.begin(), extra.end());
    proc_ = std::make_unique<Subprocess>(args, env, dir_.path());
    EXPECT_TRUE(proc_->wait_for_stderr("listening on http://127.0.0.1:", 10s)) << proc_->err();
    std::string err = proc_->err();
    port_ = std::atoi(err.c_str() + err.find("listening on http://127.0.0.1:") + 30);
  }
  ~Lemonade() {
    proc_->signal(SIGTERM);
    proc_->wait(30s);
  }
  HttpResult get(const std::string& path, const Headers& h = {}) { return http_fetch("127.0.0.1", port_, "GET", path, "", h, 120000); }
  HttpResult post(const std::string& path, const json& body, const Headers& h = {}) {
    Headers all = h;
    all.push_back({"Content-Type", "application/json"});
    return http_fetch("127.0.0.1", port_, "POST", path, body.dump(), all, 120000);
  }
  json health() { return json::parse(get("/api/v1/health").body); }
  std::vector<std::string> loaded() {
    std::vector<std::string> names;
    const json h = health();  // kept alive: a range-for over health()[...] would dangle
    for (const auto& m : h["all_models_loaded"]) names.push_back(m["model_name"]);
    std::sort(names.begin(), names.end());
    return names;
  }
  json chat(const std::string& model, const std::string& prompt, int max_tokens = 16) {
    HttpResult r = post("/api/v1/chat/completions", {{"model", model}, {"max_tokens", max_tokens}, {"temperature", 0},
                                                     {"messages", {{{"role", "user"}, {"content", prompt}}}}});
    EXPECT_EQ(r.status, 200) << r.body << r.error;
    return json::parse(r.body, nullptr, false);
  }
  int port() const { return port_; }
  Subprocess& process() { return *proc_; }
  TempDir& dir() { return dir_; }

 private:
  TempDir dir_;
  std::unique_ptr<Subprocess> proc_;
  int port_ = 0;
};

TEST(LemonadeEndpoints, EveryRouteOnEveryPrefix) {
  Lemonade l;
  for (const char* p : kPrefixes) {
    const std::string prefix = p;
    for (const char* r : {"health", "live", "models", "models/1bit-tiny", "system-info", "system-stats", "stats"}) {
      HttpResult head = http_fetch("127.0.0.1", l.port(), "HEAD", prefix + "/" + r);
      EXPECT_EQ(head.status, 200) << prefix << "/" << r;
      EXPECT_EQ(l.get(prefix + "/" + r).status, 200) << prefix << "/" << r;
    }
    for (const char* r : {"load", "unload", "pull", "delete", "chat/completions", "completions", "responses",
                          "embeddings", "reranking"}) {
      HttpResult g = l.get(prefix + "/" + r);
      EXPECT_EQ(g.status, 405) << prefix << "/" << r;
      EXPECT_TRUE(json::parse(g.body)["error"].is_string()) << g.body;
      EXPECT_NE(http_fetch("127.0.0.1", l.port(), "HEAD", prefix + "/" + r).status, 404);
    }
    EXPECT_EQ(l.get(prefix + "/nonsense").status, 404);
  }
  EXPECT_EQ(json::parse(l.get("/live").body), json({{"status", "ok"}}));
  HttpResult metrics = l.get("/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("onebit_lemonade_requests_total{route=\"health\"}"), std::string::npos);
  EXPECT_EQ(l.get("/api/v1/metrics").status, 404);  // only at the root
  HttpResult pre = http_fetch("127.0.0.1", l.port(), "OPTIONS", "/api/v1/chat/completions");
  EXPECT_EQ(pre.status, 204);
  EXPECT_EQ(*find_header(pre.headers, "Access-Control-Allow-Origin"), "*");
  HttpResult page = l.get("/");
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("<title>1bit lemonade</title>"), std::string::npos);
}

// As serve: on loopback, another Host (DNS rebinding) or a foreign Origin gets 403;
// an allowed origin passes.
TEST(LemonadeEndpoints, LoopbackRefusesOtherHostsAndOrigins) {
  Lemonade l({"--allow-origin", "http://localhost:5173"});
  EXPECT_EQ(l.get("/api/v1/health").status, 200);
  EXPECT_EQ(l.get("/api/v1/health", {{"Host", "rebind.example"}}).status, 403);
  EXPECT_EQ(l.get("/api/v1/models", {{"Origin", "https://evil.example"}}).status, 403);
  EXPECT_EQ(l.get("/api/v1/models", {{"Origin", "http://localhost:5173"}}).status, 200);
}

TEST(LemonadeEndpoints, HealthModelsAndSystem) {
  Lemonade l;
  json h = l.health();
  EXPECT_EQ(h["status"], "ok");
  EXPECT_TRUE(h["version"].is_string());
  EXPECT_TRUE(h["model_loaded"].is_null());
  EXPECT_TRUE(h["all_models_loaded"].is_array());
  for (const char* t : {"llm", "embedding", "reranking"}) EXPECT_EQ(h["max_models"][t], 1);

  json models = json::parse(l.get("/api/v1/models").body);
  EXPECT_EQ(models["object"], "list");
  std::set<std::string> ids;
  for (const auto& m : models["data"]) {
    ids.insert(m["id"]);
    EXPECT_EQ(m["object"], "model");
    EXPECT_EQ(m["recipe"], "llamacpp");
    EXPECT_TRUE(m["downloaded"].get<bool>());
    for (const char* k : {"owned_by", "created", "checkpoint", "suggested", "labels", "recipe_options", "size"})
      EXPECT_TRUE(m.contains(k)) << k;
  }
  EXPECT_TRUE(ids.count("1bit-tiny") && ids.count("1bit-tiny-draft") && ids.count("synth-llama"));
  EXPECT_FALSE(ids.count("Qwen3-0.6B-GGUF"));  // not on disk
  json all = json::parse(l.get("/api/v1/models?show_all=true").body);
  bool remote = false;
  for (const auto& m : all["data"])
    if (m["id"] == "Qwen3-0.6B-GGUF") remote = !m["downloaded"].get<bool>();
  EXPECT_TRUE(remote);
  json one = json::parse(l.get("/api/v1/models/1bit-tiny").body);
  EXPECT_EQ(one["checkpoint"], "1bit-tiny-32m-q8_0.gguf");
  EXPECT_EQ(one["labels"], json({"coding"}));
  EXPECT_NEAR(one["size"].get<double>(), 0.035, 0.001);
  HttpResult missing = l.get("/api/v1/models/nope");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(json::parse(missing.body)["error"]["code"], "model_not_found");

  json info = json::parse(l.get("/api/v1/system-info").body);
  for (const char* k : {"OS Version", "Processor", "Physical Memory"}) EXPECT_TRUE(info[k].is_string()) << k;
  EXPECT_TRUE(info["devices"]["cpu"]["cores"].is_number());
  EXPECT_GE(info["devices"]["cpu"]["cores"].get<int>(), 1);
  EXPECT_LE(info["devices"]["cpu"]["cores"].get<int>(), info["devices"]["cpu"]["threads"].get<int>());
  EXPECT_TRUE(info["devices"]["nvidia_gpu"].is_array());
  EXPECT_TRUE(info["devices"]["amd_gpu"].is_array());
  EXPECT_EQ(info["recipes"]["llamacpp"]["backends"]["cpu"]["state"], "installed");
  const std::string cuda = info["recipes"]["llamacpp"]["backends"]["cuda"]["state"];
  EXPECT_TRUE(cuda == "installed" || cuda == "installable" || cuda == "unsupported") << cuda;
  // This build's engine: Vulkan only where it was built with it and lists a Vulkan GPU.
  const json vulkan = info["recipes"]["llamacpp"]["backends"]["vulkan"];
  if (!engine_built_with_vulkan()) {
    EXPECT_NE(vulkan["state"], "installed") << vulkan;
    EXPECT_TRUE(vulkan["devices"].empty()) << vulkan;
  }
  const std::string backend = info["recipes"]["llamacpp"]["default_backend"];
  EXPECT_EQ(backend == "cpu" || info["recipes"]["llamacpp"]["backends"][backend]["state"] == "installed", true) << backend;
  json stats = json::parse(l.get("/api/v1/system-stats").body);
  EXPECT_GE(stats["cpu_percent"].get<double>(), 0);
  EXPECT_GT(stats["memory_gb"].get<double>(), 0);
  EXPECT_TRUE(stats.contains("gpu_percent") && stats.contains("vram_gb"));
}

// A loaded model's engine /props, asked directly at its backend_url with the key only 1bit and
// the engine know (read from the engine's environment, as only its own user can).
json engine_props(const json& loaded) {
  const std::string url = loaded["backend_url"];
  const int port = std::atoi(url.c_str() + url.rfind(':') + 1);
  const int pid = loaded["pid"];
  EXPECT_EQ(http_fetch("127.0.0.1", port, "GET", "/props").status, 401);  // nobody else gets in
  return json::parse(
      http_fetch("127.0.0.1", port, "GET", "/props", "", {{"Authorization", "Bearer " + proc_env(pid, "LLAMA_API_KEY")}}).body);
}

TEST(LemonadeModels, LoadUnloadAndOptions) {
  Lemonade l({"--ctx-size", "768"});
  HttpResult r = l.post("/api/v1/load", {{"model_name", "1bit-tiny"}});
  ASSERT_EQ(r.status, 200) << r.body << r.error;
  EXPECT_EQ(json::parse(r.body), json({{"status", "success"}, {"model_name", "1bit-tiny"},
                                       {"checkpoint", "1bit-tiny-32m-q8_0.gguf"}, {"recipe", "llamacpp"}}));
  json m = l.health()["all_models_loaded"][0];
  EXPECT_EQ(m["model_name"], "1bit-tiny");
  EXPECT_EQ(m["type"], "llm");
  EXPECT_EQ(m["device"], "cpu");
  EXPECT_EQ(m["recipe_options"]["ctx_size"], 768);  // the server's default
  EXPECT_TRUE(m["pid"].is_number());
  // The engine really runs with that context: ask it through its own URL.
  EXPECT_EQ(engine_props(m)["default_generation_settings"]["n_ctx"], 768);

  // Request options win over saved ones, which win over the server's; save_options keeps them.
  r = l.post("/api/v1/load", {{"model_name", "1bit-tiny"}, {"ctx_size", 512}, {"llamacpp_args", "-np 2"}, {"save_options", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  m = l.health()["all_models_loaded"][0];
  EXPECT_EQ(m["recipe_options"]["ctx_size"], 512);
  EXPECT_EQ(m["recipe_options"]["llamacpp_args"], "-np 2");
  EXPECT_EQ(engine_props(m)["default_generation_settings"]["n_ctx"], 512 / 2);
  EXPECT_EQ(json::parse(l.get("/api/v1/models/1bit-tiny").body)["recipe_options"]["ctx_size"], 512);
  ASSERT_EQ(l.post("/api/v1/unload", {{"model_name", "1bit-tiny"}}).status, 200);
  ASSERT_EQ(l.post("/api/v1/load", {{"model_name", "1bit-tiny"}}).status, 200);  // saved options apply
  EXPECT_EQ(l.health()["all_models_loaded"][0]["recipe_options"]["ctx_size"], 512);

  // Unload: one, a missing one, all.
  HttpResult missing = l.post("/api/v1/unload", {{"model_name", "synth-llama"}});
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(json::parse(missing.body)["error"]["code"], "model_not_found");
  EXPECT_EQ(l.post("/api/v1/unload", {{"model_name", "1bit-tiny"}}).status, 200);
  EXPECT_TRUE(l.loaded().empty());
  EXPECT_EQ(l.post("/api/v1/load", {{"model_name", "1bit-tiny"}}).status, 200);
  EXPECT_EQ(l.post("/api/v1/unload", json::object()).status, 200);
  EXPECT_TRUE(l.loaded().empty());

  // Bad options are refused before anything starts.
  HttpResult bad = l.post("/api/v1/load", {{"model_name", "1bit-tiny"}, {"ctx_size", "big"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(json::parse(bad.body)["error"], "ctx_size must be a non-negative integer");
  HttpResult owned = l.post("/api/v1/load", {{"model_name", "1bit-tiny"}, {"llamacpp_args", "--port 5"}});
  EXPECT_EQ(owned.status, 500);
  EXPECT_EQ(json::parse(owned.body)["error"]["code"], "model_load_error");
  EXPECT_EQ(l.get("/api/v1/health").status, 200);
}

TEST(LemonadeModels, InferenceLoadsOnDemandAndEvictsByLru) {
  Lemonade l;
  json a = l.chat("1bit-tiny", "define apple", 24);
  EXPECT_NE(a["choices"][0]["message"]["content"].get<std::string>().find("apple"), std::string::npos) << a.dump();
  EXPECT_EQ(l.loaded(), std::vector<std::string>{"1bit-tiny"});
  EXPECT_EQ(l.health()["model_loaded"], "1bit-tiny");
  json s = json::parse(l.get("/api/v1/stats").body);
  EXPECT_GT(s["tokens_per_second"].get<double>(), 0);
  EXPECT_EQ(s["output_tokens"], a["usage"]["completion_tokens"]);
  EXPECT_GT(s["input_tokens"].get<int>(), 0);
  EXPECT_GT(s["time_to_first_token"].get<double>(), 0);

  l.chat("1bit-tiny-draft", "Quote Genesis 1:1.");
  EXPECT_EQ(l.loaded(), std::vector<std::string>{"1bit-tiny-draft"});  // max 1 llm: the other went
  // max_completion_tokens is honoured.
  HttpResult r = l.post("/api/v1/chat/completions", {{"model", "1bit-tiny-draft"}, {"max_completion_tokens", 3},
                                                     {"messages", {{{"role", "user"}, {"content", "define cat"}}}}});
  EXPECT_EQ(json::parse(r.body)["usage"]["completion_tokens"], 3) << r.body;
  // Completions, streamed: the engine's SSE passes through, and stats come from its events.
  HttpResult stream = l.post("/v1/completions", {{"model", "1bit-tiny-draft"}, {"prompt", "def f(x):"}, {"max_tokens", 12},
                                                 {"stream", true}, {"temperature", 0}});
  EXPECT_EQ(stream.status, 200);
  EXPECT_NE(stream.body.find("data: [DONE]"), std::string::npos);
  EXPECT_GE(json::parse(l.get("/api/v1/stats").body)["decode_token_times"].size(), 5u);
}

// /stats describes the request whose response just ended, even asked at once: the stats are in
// place before the response's last bytes leave 1bit.
TEST(LemonadeModels, StatsAreInPlaceWhenTheResponseEnds) {
  Lemonade l;
  for (int i = 0; i < 20; ++i) {
    const int tokens = i % 2 ? 9 : 4;
    HttpResult r = l.post("/v1/completions", {{"model", "1bit-tiny"}, {"prompt", "def f(x):"}, {"max_tokens", tokens},
                                              {"ignore_eos", true}, {"stream", i % 4 < 2}, {"temperature", 0}});
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(json::parse(l.get("/api/v1/stats").body)["output_tokens"], tokens) << "request " << i;
  }
}

// The responses API through lemonade, plain and streamed (its events carry an "event:" line
// before the data), with the stats taken from its usage.
TEST(LemonadeModels, Responses) {
  Lemonade l;
  HttpResult plain = l.post("/api/v1/responses", {{"model", "1bit-tiny"}, {"input", "Say hello."}, {"max_output_tokens", 6},
                                                  {"temperature", 0}});
  ASSERT_EQ(plain.status, 200) << plain.body;
  const json answer = json::parse(plain.body);
  EXPECT_EQ(answer["object"], "response") << plain.body;
  EXPECT_EQ(answer["usage"]["output_tokens"], 6) << plain.body;
  EXPECT_EQ(json::parse(l.get("/api/v1/stats").body)["output_tokens"], 6);

  HttpResult streamed = l.post("/api/v1/responses", {{"model", "1bit-tiny"}, {"input", "Say hello."}, {"max_output_tokens", 5},
                                                     {"temperature", 0}, {"stream", true}});
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  EXPECT_NE(streamed.body.find("event: response.completed"), std::string::npos) << streamed.body;
  const json stats = json::parse(l.get("/api/v1/stats").body);
  EXPECT_EQ(stats["output_tokens"], 5) << stats.dump();
  EXPECT_GE(stats["decode_token_times"].size(), 4u) << stats.dump();
}

TEST(LemonadeModels, TwoModelsStayWithALimitOfTwo) {
  Lemonade l({"--max-loaded-models", "2"});
  l.chat("1bit-tiny", "hi");
  l.chat("synth-llama", "hi");
  EXPECT_EQ(l.loaded(), (std::vector<std::string>{"1bit-tiny", "synth-llama"}));
  l.chat("1bit-tiny-draft", "hi");  // the least recently used (1bit-tiny) goes
  EXPECT_EQ(l.loaded(), (std::vector<std::string>{"1bit-tiny-draft", "synth-llama"}));
}

TEST(LemonadeModels, ABusyModelIsNotEvictedMidStream) {
  Lemonade l;
  ASSERT_EQ(l.post("/api/v1/load", {{"model_name", "1bit-tiny"}, {"llamacpp_args", "-np 1"}}).status, 200);
  // A long stream on 1bit-tiny (900 tokens, a couple of seconds on two cores).
  std::string streamed;
  std::thread reader([&] {
    HttpResult r = l.post("/api/v1/completions", {{"model", "1bit-tiny"}, {"prompt", "x"}, {"max_tokens", 900},
                                                  {"ignore_eos", true}, {"stream", true}, {"temperature", 0}});
    streamed = r.body;
  });
  std::this_thread::sleep_for(300ms);
  ASSERT_TRUE(l.health()["all_models_loaded"][0]["busy"].get<bool>());
  // Another model under a limit of 1 must wait for the stream, which must end whole.
  json other = l.chat("synth-llama", "hi", 4);
  reader.join();
  EXPECT_NE(streamed.find("data: [DONE]"), std::string::npos) << streamed.substr(streamed.size() > 300 ? streamed.size() - 300 : 0);
  size_t events = 0;
  for (size_t p = 0; (p = streamed.find("data: ", p)) != std::string::npos; ++p) ++events;
  EXPECT_GE(events, 900u);
  EXPECT_EQ(other["usage"]["completion_tokens"], 4);
  EXPECT_EQ(l.loaded(), std::vector<std::string>{"synth-llama"});
}

// Under a limit of 1, a model waiting to be evicted takes no new requests: they wait for the
// other model's load and then load it again. Otherwise steady traffic to the loaded model would
// keep it busy, and the other model's load (and every load behind it) would wait forever.
TEST(LemonadeModels, AModelBeingEvictedTakesNoNewRequests) {
  Lemonade l;
  ASSERT_EQ(l.post("/api/v1/load", {{"model_name", "1bit-tiny"}, {"llamacpp_args", "-np 2"}}).status, 200);
  using Clock = std::chrono::steady_clock;
  Clock::time_point other_done, late_done;
  std::thread reader([&] {
    l.post("/api/v1/completions", {{"model", "1bit-tiny"}, {"prompt", "x"}, {"max_tokens", 900}, {"ignore_eos", true},
                                   {"stream", true}, {"temperature", 0}});
  });
  std::this_thread::sleep_for(300ms);
  std::thread other([&] {
    EXPECT_EQ(l.chat("synth-llama", "hi", 4)["usage"]["completion_tokens"], 4);
    other_done = Clock::now();
  });
  std::this_thread::sleep_for(300ms);  // synth-llama's load now waits for 1bit-tiny to be idle
  json late = l.chat("1bit-tiny", "hi", 4);
  late_done = Clock::now();
  reader.join();
  other.join();
  EXPECT_EQ(late["usage"]["completion_tokens"], 4);
  EXPECT_LT(other_done, late_done) << "1bit-tiny served a new request while synth-llama waited to load";
  EXPECT_EQ(l.loaded(), std::vector<std::string>{"1bit-tiny"});
}

TEST(LemonadeModels, AFailedLoadLeavesTheServerHealthy) {
  Lemonade l;
  // A GGUF with metadata but no real tensors: facts read fine, the engine refuses it.
  write_gguf(l.dir().file("extra/broken.gguf"), {{"general.architecture", std::string("llama")}});
  HttpResult r = l.post("/api/v1/load", {{"model_name", "broken"}});
  EXPECT_EQ(r.status, 500);
  json e = json::parse(r.body)["error"];
  EXPECT_EQ(e["code"], "model_load_error");
  EXPECT_EQ(e["requested_model"], "broken");
  EXPECT_NE(e["message"].get<std::string>().find("the engine exited with code"), std::string::npos) << e.dump();
  EXPECT_EQ(l.get("/api/v1/health").status, 200);
  l.chat("1bit-tiny", "hi");
  EXPECT_EQ(l.loaded(), std::vector<std::string>{"1bit-tiny"});
}

// Under a limit of 1, the model unloaded to make room for a load that fails is loaded again.
TEST(LemonadeModels, AFailedLoadGivesBackTheModelItEvicted) {
  Lemonade l;
  ASSERT_EQ(l.post("/api/v1/load", {{"model_name", "1bit-tiny"}}).status, 200);
  write_gguf(l.dir().file("extra/broken.gguf"), {{"general.architecture", std::string("llama")}});
  EXPECT_EQ(l.post("/api/v1/load", {{"model_name", "broken"}}).status, 500);
  EXPECT_EQ(l.loaded(), std::vector<std::string>{"1bit-tiny"});
  EXPECT_EQ(l.chat("1bit-tiny", "hi", 4)["usage"]["completion_tokens"], 4);
  // Loading it again with options the engine refuses gives back the running one.
  EXPECT_EQ(l.post("/api/v1/load", {{"model_name", "1bit-tiny"}, {"llamacpp_args", "--port 5"}}).status, 500);
  EXPECT_EQ(l.loaded(), std::vector<std::string>{"1bit-tiny"});
  EXPECT_EQ(l.chat("1bit-tiny", "hi", 4)["usage"]["completion_tokens"], 4);
}

// Another program takes the backend's port before the engine binds it: the load goes on, on a
// fresh port, and requests reach our own engine, never the stranger.
TEST(LemonadeModels, APortTakenByAnotherProgramIsLeftForAFreshOne) {
  TempDir scratch;
  KillPidInFile stranger(scratch.file("stranger.pid"));
  Lemonade l({"--llama-server", fake_backend_binary()}, {{"FAKE_STRANGER", scratch.file("stranger.pid")}});
  HttpResult r = l.post("/api/v1/load", {{"model_name", "1bit-tiny"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(l.process().err().find("was taken by another program; trying another"), std::string::npos) << l.process().err();
  const std::string url = l.health()["all_models_loaded"][0]["backend_url"];
  const int stranger_port = std::atoi(l.process().err().c_str() + l.process().err().find(": port ") + 7);
  EXPECT_EQ(url.find(":" + std::to_string(stranger_port) + "/"), std::string::npos) << url;
  HttpResult chat = l.post("/api/v1/chat/completions", {{"model", "1bit-tiny"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  EXPECT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(chat.body.find("stranger"), std::string::npos) << chat.body;
}

TEST(LemonadeModels, ADeadBackendIsNoticedAndReloaded) {
  Lemonade l;
  l.chat("1bit-tiny", "hi");
  pid_t pid = l.health()["all_models_loaded"][0]["pid"];
  ::kill(pid, SIGKILL);
  ASSERT_TRUE(wait_process_gone(pid, 5s));
  json h;
  for (int i = 0; i < 40; ++i) {
    std::this_thread::sleep_for(100ms);
    h = l.health();
    if (!h["crashed_models"].empty()) break;
  }
  EXPECT_TRUE(h["all_models_loaded"].empty()) << h.dump();
  ASSERT_EQ(h["crashed_models"].size(), 1u);
  EXPECT_EQ(h["crashed_models"][0]["model_name"], "1bit-tiny");
  EXPECT_EQ(h["crashed_models"][0]["exit_code"], 128 + SIGKILL);
  l.chat("1bit-tiny", "hi");  // loads again
  EXPECT_EQ(l.loaded(), std::vector<std::string>{"1bit-tiny"});
}

TEST(LemonadeSecurity, KeysPathsAndBadRequests) {
  Lemonade l({"--api-key", "sekret", "--max-body-mb", "1"});
  HttpResult no = l.get("/api/v1/health");
  EXPECT_EQ(no.status, 401);
  EXPECT_TRUE(json::parse(no.body)["error"].is_string());
  // A browser page can read why: the refusal carries the CORS header too.
  const std::string* cors = find_header(no.headers, "Access-Control-Allow-Origin");
  ASSERT_NE(cors, nullptr);
  EXPECT_EQ(*cors, "*");
  EXPECT_EQ(l.post("/api/v1/chat/completions", {{"model", "1bit-tiny"}}).status, 401);
  EXPECT_EQ(l.get("/live").status, 200);
  EXPECT_EQ(l.get("/").status, 200);
  const Headers key = {{"Authorization", "Bearer sekret"}};
  EXPECT_EQ(l.get("/api/v1/health", key).status, 200);

  auto err = [&](const HttpResult& r) { return json::parse(r.body)["error"]; };
  HttpResult bad = http_fetch("127.0.0.1", l.port(), "POST", "/api/v1/load", "{not json", {key[0]});
  EXPECT_EQ(bad.status, 400);
  EXPECT_TRUE(err(bad).is_string());
  HttpResult big = http_fetch("127.0.0.1", l.port(), "POST", "/api/v1/chat/completions", std::string(2 << 20, ' '), {key[0]});
  EXPECT_EQ(big.status, 413);
  HttpResult unknown = l.post("/api/v1/chat/completions", {{"model", "nope"}, {"messages", json::array()}}, key);
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(err(unknown)["code"], "model_not_found");

  // Pull: local files inside the models dirs only.
  std::filesystem::create_symlink("/etc/passwd", l.dir().file("extra/out.gguf"));
  write_file(l.dir().file("outside.gguf"), "x");
  for (const std::string& cp : {std::string("../outside.gguf"), l.dir().file("outside.gguf"), std::string("out.gguf"),
                                std::string("/etc/passwd")}) {
    HttpResult r = l.post("/api/v1/pull", {{"model_name", "evil"}, {"checkpoint", cp}}, key);
    EXPECT_EQ(r.status, 400) << cp;
    EXPECT_NE(err(r).get<std::string>().find("not a GGUF file inside the models directories"), std::string::npos)
        << cp << ": " << r.body;
  }
  HttpResult remote = l.post("/api/v1/pull", {{"model_name", "q"}, {"checkpoint", "unsloth/Qwen3-0.6B-GGUF:Q4_0"}}, key);
  EXPECT_EQ(remote.status, 400);
  EXPECT_NE(err(remote).get<std::string>().find("this server does not download models"), std::string::npos);
  HttpResult catalog_remote = l.post("/api/v1/pull", {{"model_name", "Qwen3-0.6B-GGUF"}}, key);
  EXPECT_EQ(catalog_remote.status, 400);
  EXPECT_EQ(l.post("/api/v1/load", {{"model_name", "../../etc/passwd"}}, key).status, 404);

  // A local pull registers a user. model; delete forgets it (the file stays).
  HttpResult pulled = l.post("/api/v1/pull", {{"model_name", "mine"}, {"checkpoint", "synth-llama.gguf"}, {"coding", true}}, key);
  ASSERT_EQ(pulled.status, 200) << pulled.body;
  EXPECT_EQ(json::parse(pulled.body)["model_name"], "user.mine");
  json entry = json::parse(l.get("/api/v1/models/user.mine", key).body);
  EXPECT_EQ(entry["labels"], json({"coding"}));
  EXPECT_EQ(l.post("/api/v1/delete", {{"model_name", "user.mine"}}, key).status, 200);
  EXPECT_EQ(l.get("/api/v1/models/user.mine", key).status, 404);
  EXPECT_TRUE(std::filesystem::exists(l.dir().file("extra/synth-llama.gguf")));
  EXPECT_EQ(l.post("/api/v1/delete", {{"model_name", "user.mine"}}, key).status, 422);
  EXPECT_EQ(l.post("/api/v1/delete", {{"model_name", "1bit-tiny"}}, key).status, 422);
}

TEST(LemonadeModels, EmbeddingsFromAModelLabelledSo) {
  Lemonade l({"--max-loaded-models", "1"});
  HttpResult p = l.post("/api/v1/pull", {{"model_name", "embed"}, {"checkpoint", "synth-llama.gguf"}, {"embeddings", true}});
  ASSERT_EQ(p.status, 200) << p.body;
  ASSERT_EQ(l.post("/api/v1/load", {{"model_name", "user.embed"}, {"llamacpp_args", "--pooling mean"}}).status, 200);
  HttpResult r = l.post("/api/v1/embeddings", {{"model", "user.embed"}, {"input", "hello world"}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["data"][0]["embedding"].size(), 64u);  // tiny-llama is 64 wide
  // An llm loaded beside it does not evict it: the limit is per type.
  l.chat("1bit-tiny", "hi", 2);
  EXPECT_EQ(l.loaded(), (std::vector<std::string>{"1bit-tiny", "user.embed"}));
  json h = l.health();
  for (const auto& m : h["all_models_loaded"])
    EXPECT_EQ(m["type"], m["model_name"] == "user.embed" ? "embedding" : "llm");
}

// A GGUF on disk that no registry names is typed by its own metadata (its pooling type), and a
// pull of a recipe other than llama.cpp's is refused as not supported.
TEST(LemonadeCatalog, FilesOnDiskAreTypedByTheirMetadata) {
  Lemonade l;
  write_gguf(l.dir().file("extra/an-embedder.gguf"),
             {{"general.architecture", std::string("bert")}, {"bert.pooling_type", uint32_t(1)}});
  write_gguf(l.dir().file("extra/a-reranker.gguf"),
             {{"general.architecture", std::string("bert")}, {"bert.pooling_type", uint32_t(4)}});
  json models = json::parse(l.get("/api/v1/models").body)["data"];
  auto labels_of = [&](const std::string& id) {
    for (const auto& m : models)
      if (m["id"] == id) return m["labels"];
    return json(nullptr);
  };
  EXPECT_EQ(labels_of("an-embedder"), json::array({"embeddings"}));
  EXPECT_EQ(labels_of("a-reranker"), json::array({"reranking"}));
  EXPECT_EQ(labels_of("synth-llama"), json::array());
  HttpResult p = l.post("/api/v1/pull", {{"model_name", "rr"}, {"checkpoint", "a-reranker.gguf"}});
  ASSERT_EQ(p.status, 200) << p.body;
  EXPECT_EQ(json::parse(l.get("/api/v1/models/user.rr").body)["labels"], json::array({"reranking"}));
  HttpResult other = l.post("/api/v1/pull", {{"model_name", "x"}, {"checkpoint", "synth-llama.gguf"}, {"recipe", "oga-cpu"}});
  EXPECT_EQ(other.status, 404);
  EXPECT_EQ(json::parse(other.body)["error"]["code"], "model_not_supported") << other.body;
}

// A reranker found on disk (a random-weight qwen3 reranker by 1bit synth: rank pooling and a
// classifier head) is typed by its metadata, launched with --reranking and answers /reranking.
TEST(LemonadeModels, RerankingFromAModelThatSaysSo) {
  Lemonade l;
  SynthOptions o;
  o.vocab_dir = vocab_dir();
  write_synth_model(*find_synth_shape("tiny-qwen3-reranker"), o, l.dir().file("extra/reranker.gguf"));
  HttpResult r = l.post("/api/v1/reranking", {{"model", "reranker"},
                                              {"query", "what is a cat?"},
                                              {"documents", {"a cat is a small animal", "the sky is blue", "x"}}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  ASSERT_EQ(j["results"].size(), 3u) << r.body;
  std::vector<int> seen;
  for (const auto& x : j["results"]) {
    seen.push_back(x["index"].get<int>());
    EXPECT_TRUE(std::isfinite(x["relevance_score"].get<double>())) << r.body;
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2}));
  json h = l.health();
  ASSERT_EQ(h["all_models_loaded"].size(), 1u);
  EXPECT_EQ(h["all_models_loaded"][0]["type"], "reranking");
}

TEST(LemonadeConfig, EnvironmentLikeLemonade) {
  Lemonade l({}, {{"LEMONADE_MAX_LOADED_MODELS", "3"}, {"LEMONADE_API_KEY", "envkey"}});
  EXPECT_EQ(l.get("/api/v1/health").status, 401);
  json h = json::parse(l.get("/api/v1/health", {{"Authorization", "Bearer envkey"}}).body);
  EXPECT_EQ(h["max_models"]["llm"], 3);
  RunResult bad = run({onebit_binary(), "lemonade", "--max-loaded-models", "0"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.err, "1bit lemonade: --max-loaded-models: 0 would load nothing; use -1 for no limit\n");
}

TEST(LemonadeConfig, RecipesLikeServe) {
  TempDir files;
  const std::string recipes = files.file("r.json");
  write_file(recipes, R"({"recipes": [{"id": "llama-cpu-probe", "match": {"architecture": ["llama"], "device": ["cpu"]},
                           "env": {"ONEBIT_RECIPE_PROBE": "1"}, "measured": "test"}]})");
  auto probe_of_loaded = [](Lemonade& l) {
    EXPECT_EQ(l.post("/api/v1/load", {{"model_name", "synth-llama"}}).status, 200);
    const json m = l.health()["all_models_loaded"][0];
    return proc_env(m["pid"].get<int>(), "ONEBIT_RECIPE_PROBE");
  };
  {
    Lemonade l({"--recipes", recipes});
    EXPECT_EQ(probe_of_loaded(l), "1");
    EXPECT_NE(l.process().err().find("1bit lemonade: synth-llama: recipe llama-cpu-probe: ONEBIT_RECIPE_PROBE=1"),
              std::string::npos)
        << l.process().err();
  }
  {
    Lemonade l({"--recipes", recipes, "--no-recipes"});
    EXPECT_EQ(probe_of_loaded(l), "");
    EXPECT_EQ(l.process().err().find("recipe "), std::string::npos) << l.process().err();
  }
  // A bad file stops the server before it listens, with serve's message.
  write_file(files.file("bad.json"), R"({"recipes": {}})");
  RunResult bad = run({onebit_binary(), "lemonade", "--port", "0", "--recipes", files.file("bad.json")});
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.err, "1bit lemonade: " + files.file("bad.json") + ": \"recipes\" must be a list\n");
}

// The user's store applies before --recipes FILE (or the built-in set), as with serve.
TEST(LemonadeConfig, TheUserStoreComesFirst) {
  TempDir files;
  std::filesystem::create_directories(files.file("config/1bit"));
  write_file(files.file("config/1bit/recipes.json"), R"({"recipes": [{"id": "store-probe", "match": {"device": ["cpu"]},
                                                         "env": {"ONEBIT_PROBE": "store"}, "measured": "test"}]})");
  write_file(files.file("r.json"), R"({"recipes": [{"id": "file-probe", "env": {"ONEBIT_PROBE": "file", "ONEBIT_FILE_PROBE": "1"},
                                       "measured": "test"}]})");
  const std::map<std::string, std::string> env = {{"XDG_CONFIG_HOME", files.file("config")}};
  {
    Lemonade l({"--llama-server", fake_backend_binary(), "--recipes", files.file("r.json")}, env);
    ASSERT_EQ(l.post("/api/v1/load", {{"model_name", "1bit-tiny"}}).status, 200);
    const int pid = l.health()["all_models_loaded"][0]["pid"].get<int>();
    EXPECT_EQ(proc_env(pid, "ONEBIT_PROBE"), "store");
    EXPECT_EQ(proc_env(pid, "ONEBIT_FILE_PROBE"), "1");
    EXPECT_NE(l.process().err().find("1bit lemonade: 1bit-tiny: recipe store-probe: ONEBIT_PROBE=store\n"
                                     "1bit lemonade: 1bit-tiny: recipe file-probe: ONEBIT_FILE_PROBE=1\n"),
              std::string::npos)
        << l.process().err();
  }
  Lemonade none({"--llama-server", fake_backend_binary(), "--no-recipes"}, env);
  ASSERT_EQ(none.post("/api/v1/load", {{"model_name", "1bit-tiny"}}).status, 200);
  EXPECT_EQ(proc_env(none.health()["all_models_loaded"][0]["pid"].get<int>(), "ONEBIT_PROBE"), "");
  EXPECT_EQ(none.process().err().find("recipe "), std::string::npos) << none.process().err();
}

// A GPU recipe reaches a backend on the engine's GPU, not one loaded on the cpu backend.
TEST(LemonadeConfig, GpuRecipesFollowTheEnginesGpu) {
  TempDir files;
  write_file(files.file("r.json"), R"({"recipes": [{"id": "gpu-probe", "match": {"gpu": ["Fake GPU"]},
                                       "env": {"ONEBIT_GPU_PROBE": "1"}, "measured": "test"}]})");
  Lemonade l({"--llama-server", fake_backend_binary(), "--recipes", files.file("r.json")},
             {{"FAKE_DEVICES", "CUDA0: Fake GPU (1000 MiB, 900 MiB free)"}});
  ASSERT_EQ(l.post("/api/v1/load", {{"model_name", "1bit-tiny"}}).status, 200);
  EXPECT_EQ(proc_env(l.health()["all_models_loaded"][0]["pid"].get<int>(), "ONEBIT_GPU_PROBE"), "1");
  ASSERT_EQ(l.post("/api/v1/load", {{"model_name", "1bit-tiny"}, {"llamacpp_backend", "cpu"}}).status, 200);
  EXPECT_EQ(proc_env(l.health()["all_models_loaded"][0]["pid"].get<int>(), "ONEBIT_GPU_PROBE"), "");
  const std::string no_gpu = "1bit lemonade: the engine names no GPU model; recipes for a GPU model are left out\n";
  EXPECT_EQ(l.process().err().find(no_gpu), std::string::npos) << l.process().err();

  // A CUDA device the engine lists without its model: the recipe cannot apply, and lemonade says so.
  Lemonade unnamed({"--llama-server", fake_backend_binary(), "--recipes", files.file("r.json")}, {{"FAKE_DEVICES", "CUDA0"}});
  ASSERT_EQ(unnamed.post("/api/v1/load", {{"model_name", "1bit-tiny"}}).status, 200);
  EXPECT_EQ(unnamed.health()["all_models_loaded"][0]["device"], "cuda");
  EXPECT_EQ(proc_env(unnamed.health()["all_models_loaded"][0]["pid"].get<int>(), "ONEBIT_GPU_PROBE"), "");
  EXPECT_NE(unnamed.process().err().find(no_gpu), std::string::npos) << unnamed.process().err();
}

}  // namespace
}  // namespace onebit::testing
