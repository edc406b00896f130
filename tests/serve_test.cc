// `1bit serve` as a user runs it, around a fake engine that records its argv and environment:
// dry-run plans and recipe lines, bad input, loading, streaming, cancellation, signals, the API
// key, the body limit and long-model routing. Real processes, real sockets.
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
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

class ServeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = dir_.file("model.gguf");
    write_gguf(model_, {{"general.architecture", std::string("llama")}, {"general.file_type", uint32_t{2}}});
  }

  std::map<std::string, std::string> fake_env(std::map<std::string, std::string> extra = {}) {
    extra["FAKE_RECORD"] = record_path();
    extra["FAKE_EVENTS"] = events_path();
    return extra;
  }
  std::string record_path() const { return dir_.file("record.json"); }
  std::string events_path() const { return dir_.file("events.txt"); }
  json record() const { return json::parse(read_file(record_path()), nullptr, false); }
  bool engine_started() const { return access(record_path().c_str(), F_OK) == 0; }

  std::vector<std::string> serve_args(std::vector<std::string> extra) {
    std::vector<std::string> a = {onebit_binary(), "serve", "--llama-server", fake_backend_binary(), "--port", "0"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  // Starts serve and waits until it prints its port; returns the port.
  int start(std::unique_ptr<Subprocess>& p, std::vector<std::string> extra, std::map<std::string, std::string> env = {},
            bool wait_ready = true) {
    p = std::make_unique<Subprocess>(serve_args(std::move(extra)), fake_env(std::move(env)), dir_.path());
    EXPECT_TRUE(p->wait_for_stderr("listening on http://127.0.0.1:", 10s)) << p->err();
    std::string err = p->err();
    size_t at = err.find("listening on http://127.0.0.1:");
    int port = std::atoi(err.c_str() + at + std::strlen("listening on http://127.0.0.1:"));
    if (wait_ready) EXPECT_TRUE(p->wait_for_stderr("ready on", 10s)) << p->err();
    return port;
  }

  TempDir dir_;
  std::string model_;
};

TEST_F(ServeTest, DryRunPrintsTheExactCommand) {
  RunResult r = run(serve_args({"-m", model_, "--dry-run", "--device", "cpu", "-c", "2048"}), fake_env());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  std::string prefix = fake_backend_binary() + " -m " + model_ + " --host 127.0.0.1 --port ";
  ASSERT_EQ(r.out.substr(0, prefix.size()), prefix);
  EXPECT_NE(r.out.find(" -ngl 0 -dev none --jinja -c 2048\n"), std::string::npos) << r.out;
  EXPECT_FALSE(engine_started());
  // The plan for cuda is printed without checking that a GPU exists.
  RunResult cuda = run(serve_args({"-m", model_, "--dry-run", "--device", "cuda"}), fake_env());
  EXPECT_EQ(cuda.code, 0);
  EXPECT_NE(cuda.out.find(" -ngl 99 --jinja\n"), std::string::npos) << cuda.out;
  // auto plans what a real launch would run: cuda where the engine lists a CUDA device, else cpu.
  RunResult plan = run(serve_args({"-m", model_, "--dry-run"}), fake_env({{"FAKE_DEVICES", "CUDA0: Fake GPU (1000 MiB)"}}));
  EXPECT_NE(plan.out.find(" -ngl 99 --jinja\n"), std::string::npos) << plan.out;
  plan = run(serve_args({"-m", model_, "--dry-run"}), fake_env());
  EXPECT_NE(plan.out.find(" -ngl 0 -dev none --jinja\n"), std::string::npos) << plan.out;
}

// Vulkan: --device vulkan offloads as cuda does; auto takes a Vulkan GPU where the engine lists no
// CUDA device, but not Mesa's Vulkan on the CPU (llvmpipe), which only --device vulkan takes; a
// real launch names what is missing.
TEST_F(ServeTest, VulkanDevices) {
  const std::string radeon = "Vulkan0: AMD Radeon RX 7900 XTX (RADV NAVI31) (24560 MiB, 24000 MiB free)";
  const std::string llvmpipe = "Vulkan0: llvmpipe (LLVM 15.0.6, 256 bits) (7936 MiB, 7936 MiB free)";
  RunResult r = run(serve_args({"-m", model_, "--dry-run", "--device", "vulkan"}), fake_env({{"FAKE_DEVICES", radeon}}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(" -ngl 99 --jinja\n"), std::string::npos) << r.out;
  r = run(serve_args({"-m", model_, "--dry-run"}), fake_env({{"FAKE_DEVICES", radeon}}));
  EXPECT_NE(r.out.find(" -ngl 99 --jinja\n"), std::string::npos) << r.out;
  r = run(serve_args({"-m", model_, "--dry-run"}), fake_env({{"FAKE_DEVICES", llvmpipe}}));
  EXPECT_NE(r.out.find(" -ngl 0 -dev none --jinja\n"), std::string::npos) << r.out;
  r = run(serve_args({"-m", model_, "--dry-run", "--device", "vulkan"}), fake_env({{"FAKE_DEVICES", llvmpipe}}));
  EXPECT_NE(r.out.find(" -ngl 99 --jinja\n"), std::string::npos) << r.out;
  // CUDA first when the engine lists both.
  r = run(serve_args({"-m", model_, "--dry-run"}), fake_env({{"FAKE_DEVICES", radeon + ";CUDA0: Fake GPU (1000 MiB)"}}));
  EXPECT_NE(r.out.find(" -ngl 99 --jinja\n"), std::string::npos) << r.out;
  // A real launch with no Vulkan device is one line naming it, exit 1.
  r = run(serve_args({"-m", model_, "--device", "vulkan", "--port", "0"}), fake_env({{"FAKE_DEVICES", "CUDA0: Fake GPU (1000 MiB)"}}));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--device vulkan: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("lists no Vulkan device"), std::string::npos) << r.err;
  r = run(serve_args({"-m", model_, "--device", "metal"}), fake_env());
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("is not one of auto, cpu, cuda, vulkan"), std::string::npos) << r.err;
}

// A llama-server command line works on serve's: the engine's options go to the engine in order,
// serve's own stay serve's, and an option neither knows is an error naming it.
TEST_F(ServeTest, EngineOptionsOnServesCommandLine) {
  RunResult r = run(serve_args({"-m", model_, "--device", "cpu", "-ub", "256", "-ctk", "q8_0", "--temp", "0.7", "-c", "2048",
                                "--dry-run", "--", "-t", "2"}),
                    fake_env());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(" --jinja -c 2048 -ub 256 -ctk q8_0 --temp 0.7 -t 2\n"), std::string::npos) << r.out;
  RunResult bad = run(serve_args({"-m", model_, "--tempp", "0.7"}), fake_env());
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.err, "1bit serve: unknown option --tempp\n");
}

// Recipe cases through the binary: stderr lines and the printed command.
TEST_F(ServeTest, RecipesRoute) {
  write_file(dir_.file("recipes.json"), R"({"recipes": [
    {"id": "moe-plain", "match": {"moe": true, "hadamard_q4_0": false}, "args": ["-ub", "1024"],
     "env": {"ONEBIT_TEST_ENV": "on"}, "measured": "test"},
    {"id": "with-draft", "match": {"drafter": ["draft"]}, "args": ["--spec-draft-n-max", "6"], "measured": "test"}]})");
  std::string moe = dir_.file("moe.gguf"), dense = model_, draft = dir_.file("draft.gguf");
  write_gguf(moe, {{"general.architecture", std::string("qwen3moe")}, {"qwen3moe.expert_count", uint32_t{8}}});
  write_gguf(draft, {{"general.architecture", std::string("llama")}});
  auto dry = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = {"--dry-run", "--device", "cpu", "--recipes", dir_.file("recipes.json")};
    a.insert(a.end(), extra.begin(), extra.end());
    return run(serve_args(a), fake_env());
  };

  RunResult r = dry({"-m", moe});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "1bit serve: recipe moe-plain: -ub 1024 ONEBIT_TEST_ENV=on\n");
  EXPECT_EQ(r.out.rfind("ONEBIT_TEST_ENV=on " + fake_backend_binary(), 0), 0u) << r.out;
  EXPECT_NE(r.out.find(" --jinja -ub 1024\n"), std::string::npos) << r.out;

  r = dry({"-m", dense});
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out.find("-ub"), std::string::npos);

  r = dry({"-m", moe, "--no-recipes"});
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out.find("-ub"), std::string::npos);

  r = dry({"-m", dense, "--draft", draft});
  EXPECT_EQ(r.err, "1bit serve: recipe with-draft: --spec-draft-n-max 6\n");
  size_t first = r.out.find("--spec-draft-n-max");
  EXPECT_NE(first, std::string::npos);
  EXPECT_EQ(r.out.find("--spec-draft-n-max", first + 1), std::string::npos) << r.out;

  // The user's value wins, also under an alias and through the engine's env variable.
  r = dry({"-m", moe, "--", "--ubatch-size", "64"});
  EXPECT_EQ(r.err, "1bit serve: recipe moe-plain: ONEBIT_TEST_ENV=on\n");
  EXPECT_NE(r.out.find("--ubatch-size 64\n"), std::string::npos) << r.out;
  RunResult env = run(serve_args({"--dry-run", "--recipes", dir_.file("recipes.json"), "-m", moe}),
                      fake_env({{"LLAMA_ARG_UBATCH", "32"}, {"ONEBIT_TEST_ENV", "off"}}));
  EXPECT_EQ(env.err, "");
  EXPECT_EQ(env.out.find("-ub"), std::string::npos) << env.out;

  // A real launch applies what dry-run printed: argv and environment as recorded by the engine.
  std::unique_ptr<Subprocess> p;
  start(p, {"-m", moe, "--recipes", dir_.file("recipes.json")});
  json rec = record();
  std::vector<std::string> argv = rec["argv"];
  EXPECT_EQ(argv[argv.size() - 2], "-ub");
  EXPECT_EQ(argv.back(), "1024");
  EXPECT_EQ(rec["env"]["ONEBIT_TEST_ENV"], "on");
  EXPECT_NE(p->err().find("1bit serve: recipe moe-plain: -ub 1024 ONEBIT_TEST_ENV=on\n"), std::string::npos);
}

// A recipe with a gpu condition applies only on the GPU model the engine lists first.
TEST_F(ServeTest, GpuRecipesFollowTheEnginesGpu) {
  write_file(dir_.file("recipes.json"), R"({"recipes": [
    {"id": "on-fake", "match": {"device": ["cuda"], "gpu": ["Fake GPU"]}, "env": {"ONEBIT_ON_FAKE": "1"}, "measured": "t"},
    {"id": "on-other", "match": {"gpu": ["Other GPU"]}, "env": {"ONEBIT_ON_OTHER": "1"}, "measured": "t"}]})");
  const std::map<std::string, std::string> fake_gpu = {{"FAKE_DEVICES", "CUDA0: Fake GPU (1000 MiB, 900 MiB free)"}};
  const std::vector<std::string> args = {"-m", model_, "--recipes", dir_.file("recipes.json")};
  std::vector<std::string> dry = {"--dry-run", "--device", "cuda"};
  dry.insert(dry.end(), args.begin(), args.end());
  RunResult r = run(serve_args(dry), fake_env(fake_gpu));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "1bit serve: recipe on-fake: ONEBIT_ON_FAKE=1\n");
  // An engine that names no GPU, or none that runs: neither applies, and serve says why.
  const std::string no_gpu = "1bit serve: the engine names no GPU model; recipes for a GPU model are left out\n";
  r = run(serve_args(dry), fake_env());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, no_gpu);
  EXPECT_EQ(r.out.find("ONEBIT_ON_"), std::string::npos) << r.out;
  std::vector<std::string> missing = dry;
  missing.insert(missing.end(), {"--llama-server", dir_.file("no-such-engine")});
  r = run(serve_args(missing), fake_env(fake_gpu));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, no_gpu);
  // On the CPU a GPU recipe does not apply, even where the engine lists that GPU.
  write_file(dir_.file("gpu-only.json"), R"({"recipes": [
    {"id": "gpu-only", "match": {"gpu": ["Fake GPU"]}, "env": {"ONEBIT_ON_FAKE": "1"}, "measured": "t"}]})");
  r = run(serve_args({"--dry-run", "--device", "cpu", "-m", model_, "--recipes", dir_.file("gpu-only.json")}),
          fake_env(fake_gpu));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out.find("ONEBIT_ON_"), std::string::npos) << r.out;

  std::unique_ptr<Subprocess> p;
  start(p, args, fake_gpu);
  json rec = record();
  EXPECT_EQ(rec["env"]["ONEBIT_ON_FAKE"], "1");
  EXPECT_FALSE(rec["env"].contains("ONEBIT_ON_OTHER"));
  EXPECT_NE(p->err().find(" on cuda (Fake GPU), listening"), std::string::npos) << p->err();
}

TEST_F(ServeTest, BadInputGetsOneLineAndStartsNothing) {
  write_file(dir_.file("text.gguf"), "not a model at all");
  write_file(dir_.file("short.gguf"), "GGUF\x03");
  write_file(dir_.file("bad.json"), R"({"recipes": [{"id": "x", "args": ["-ub", "1"]}]})");
  write_gguf(dir_.file("plain.gguf"), {{"general.architecture", std::string("llama")}});
  write_gguf(dir_.file("h32.gguf"), {{"general.architecture", std::string("llama")}, {"onebit.hadamard_q4_0", uint32_t{32}}});
  write_gguf(dir_.file("e3.gguf"), {{"general.architecture", std::string("eagle3")},
                                    {"eagle3.target_layers", std::vector<int32_t>{1, 2}},
                                    {"eagle3.target_hidden_size", uint32_t{64}}});
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  std::vector<Case> cases = {
      {{"-m", dir_.file("missing.gguf")}, dir_.file("missing.gguf") + ": No such file or directory"},
      {{"-m", dir_.file("text.gguf")}, dir_.file("text.gguf") + ": not a GGUF file (no GGUF magic at the start)"},
      {{"-m", dir_.file("short.gguf")}, dir_.file("short.gguf") + ": truncated GGUF header"},
      {{"-m", model_, "--draft", dir_.file("nodraft.gguf")}, dir_.file("nodraft.gguf") + ": No such file or directory"},
      {{"-m", model_, "--dflash", dir_.file("plain.gguf")},
       dir_.file("plain.gguf") + ": not a dflash drafter (architecture llama); a model drafts with --draft"},
      {{"-m", model_, "--draft", dir_.file("e3.gguf")}, dir_.file("e3.gguf") + ": is an eagle3 drafter; use --eagle3"},
      {{"-m", model_, "--eagle3", dir_.file("e3.gguf")},
       dir_.file("e3.gguf") + ": metadata eagle3.target_layers has 2 entries, expected 3"},
      {{"-m", model_, "--mtp", dir_.file("plain.gguf")},
       dir_.file("plain.gguf") + ": not an MTP head (architecture llama); a model drafts with --draft"},
      {{"-m", model_, "--mtp"}, model_ + ": --mtp needs next-token (MTP) layers, and llama.nextn_predict_layers is absent or 0 "
                                          "(a head published apart: --mtp HEAD.gguf)"},
      {{"-m", model_, "--recipes", dir_.file("bad.json")},
       dir_.file("bad.json") + ": recipe \"x\" has no \"measured\": every recipe needs the measurement behind it"},
      {{"-m", model_, "--recipes", dir_.file("none.json")}, dir_.file("none.json") + ": cannot read the recipes file"},
      {{"-m", model_, "--", "--port", "1"}, "--port after \"--\": serve sets it for the engine; use 1bit serve --port"},
      {{"-m", model_, "--bogus"}, "unknown option --bogus"},
      // Another engine than 1bit's own would not rotate the activations.
      {{"-m", dir_.file("h32.gguf")},
       dir_.file("h32.gguf") + ": is Hadamard-rotated Q4_0 (onebit.hadamard_q4_0 = 32), which only 1bit's own engine runs (it "
                               "rotates the activations to match); " + fake_backend_binary() + " would compute every product wrong"},
      {{"-m", model_, "--draft", dir_.file("h32.gguf")},
       dir_.file("h32.gguf") + ": is Hadamard-rotated Q4_0 (onebit.hadamard_q4_0 = 32), which only 1bit's own engine runs (it "
                               "rotates the activations to match); " + fake_backend_binary() + " would compute every product wrong"},
  };
  for (const Case& c : cases) {
    for (bool dry : {false, true}) {
      std::vector<std::string> args = c.args;
      if (dry) args.push_back("--dry-run");
      RunResult r = run(serve_args(args), fake_env());
      EXPECT_EQ(r.code, 1) << c.expected;
      EXPECT_EQ(r.err, "1bit serve: " + c.expected + "\n");
      EXPECT_EQ(r.out, "");
    }
  }
  EXPECT_FALSE(engine_started());
  // An explicit device the engine cannot serve.
  RunResult cuda = run(serve_args({"-m", model_, "--device", "cuda"}), fake_env());
  EXPECT_EQ(cuda.code, 1);
  EXPECT_NE(cuda.err.find("1bit serve: --device cuda: " + fake_backend_binary() + " lists no CUDA device"), std::string::npos)
      << cuda.err;
  EXPECT_FALSE(engine_started());
  // auto picks cuda when the engine lists a CUDA device.
  std::unique_ptr<Subprocess> p;
  start(p, {"-m", model_}, {{"FAKE_DEVICES", "CUDA0: Fake GPU (1000 MiB)"}});
  std::vector<std::string> argv = record()["argv"];
  EXPECT_NE(std::find(argv.begin(), argv.end(), "99"), argv.end());
}

TEST_F(ServeTest, Answers503WhileLoading) {
  std::unique_ptr<Subprocess> p;
  int port = start(p, {"-m", model_}, {{"FAKE_LOAD_MS", "1500"}}, /*wait_ready=*/false);
  HttpResult h = http_fetch("127.0.0.1", port, "GET", "/health");
  EXPECT_EQ(h.status, 503);
  EXPECT_EQ(h.body, R"({"error":{"code":503,"message":"Loading model","type":"unavailable_error"}})");
  HttpResult c = http_fetch("127.0.0.1", port, "POST", "/v1/chat/completions", R"({"messages":[]})");
  EXPECT_EQ(c.status, 503);
  ASSERT_TRUE(p->wait_for_stderr("ready on", 10s)) << p->err();
  EXPECT_EQ(http_fetch("127.0.0.1", port, "GET", "/health").status, 200);
  HttpResult m = http_fetch("127.0.0.1", port, "GET", "/v1/models");
  EXPECT_EQ(m.status, 200);
  EXPECT_EQ(json::parse(m.body)["data"][0]["id"], model_);
}

// Reads a streamed response and notes when each SSE event arrived.
struct StreamRead {
  std::string head;
  std::vector<std::pair<std::string, double>> events;  // (data, ms since the request)
};

StreamRead read_stream(int port, const std::string& body, size_t stop_after = SIZE_MAX) {
  StreamRead out;
  Fd fd = connect_tcp("127.0.0.1", port, 2000);
  std::string req = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n" + body;
  auto t0 = std::chrono::steady_clock::now();
  write_all(fd.get(), req);
  std::string buf;
  char tmp[4096];
  while (out.events.size() < stop_after) {
    ssize_t n = recv(fd.get(), tmp, sizeof(tmp), 0);
    if (n <= 0) break;
    buf.append(tmp, static_cast<size_t>(n));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    size_t at;
    while ((at = buf.find("data: ")) != std::string::npos) {
      size_t end = buf.find("\n\n", at);
      if (end == std::string::npos) break;
      if (out.head.empty()) out.head = buf.substr(0, at);
      out.events.emplace_back(buf.substr(at + 6, end - at - 6), ms);
      buf.erase(0, end + 2);
    }
    if (!out.events.empty() && out.events.back().first == "[DONE]") break;
  }
  return out;
}

TEST_F(ServeTest, StreamsChunkByChunk) {
  std::unique_ptr<Subprocess> p;
  int port = start(p, {"-m", model_}, {{"FAKE_CHUNKS", "6"}, {"FAKE_CHUNK_MS", "150"}});
  StreamRead s = read_stream(port, R"({"stream": true, "messages": [{"role": "user", "content": "hi"}]})");
  ASSERT_EQ(s.events.size(), 7u) << s.head;
  EXPECT_NE(s.head.find("Transfer-Encoding: chunked"), std::string::npos);
  EXPECT_EQ(s.events.back().first, "[DONE]");
  EXPECT_TRUE(json::parse(s.events[5].first).contains("timings"));
  // Each event reached the client about when the engine wrote it, not all at the end.
  for (size_t i = 1; i < 6; ++i) EXPECT_GT(s.events[i].second - s.events[i - 1].second, 75.0) << i;
  EXPECT_LT(s.events[0].second, 100.0);
}

TEST_F(ServeTest, ClientThatLeavesCancelsTheEngineRequest) {
  std::unique_ptr<Subprocess> p;
  int port = start(p, {"-m", model_}, {{"FAKE_CHUNKS", "40"}, {"FAKE_CHUNK_MS", "50"}});
  StreamRead s = read_stream(port, R"({"stream": true, "messages": []})", 2);
  ASSERT_EQ(s.events.size(), 2u);
  // read_stream closed its socket on return; the engine must see its own connection drop.
  bool cancelled = false;
  for (int i = 0; i < 100 && !cancelled; ++i) {
    std::this_thread::sleep_for(20ms);
    cancelled = read_file(events_path()).find("cancelled at chunk") != std::string::npos;
  }
  EXPECT_TRUE(cancelled) << read_file(events_path());
  // The server stays healthy for the next client.
  EXPECT_EQ(http_fetch("127.0.0.1", port, "GET", "/health").status, 200);
}

TEST_F(ServeTest, EngineDeathWhileLoadingShowsItsLastLines) {
  auto t0 = std::chrono::steady_clock::now();
  RunResult r = run(serve_args({"-m", model_}), fake_env({{"FAKE_EXIT_DURING_LOAD", "3"}}), 20s);
  EXPECT_EQ(r.code, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_NE(r.err.find("1bit serve: the engine (" + model_ + ") exited with code 3 while loading; its last lines:"),
            std::string::npos) << r.err;
  EXPECT_NE(r.err.find("  | fake: failed to allocate 12345 MiB"), std::string::npos) << r.err;
}

// Another program takes the engine's port before the engine binds it and answers /health with
// 200: serve must not take that for its engine.
TEST_F(ServeTest, AnotherProgramOnTheEnginePortIsNeverProxied) {
  KillPidInFile stranger(dir_.file("stranger.pid"));
  RunResult r = run(serve_args({"-m", model_, "--load-timeout", "2"}),
                    fake_env({{"FAKE_STRANGER", dir_.file("stranger.pid")}, {"FAKE_STRANGER_STAY", "1"}}), 20s);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("did not load within 2 s (--load-timeout)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("ready on"), std::string::npos) << r.err;
}

// Another program takes the engine's port before the engine binds it, so the engine exits: serve
// starts it again on a fresh port, and requests reach it there, never the other program.
TEST_F(ServeTest, AnEnginePortTakenFirstIsLeftForAnother) {
  KillPidInFile stranger(dir_.file("stranger.pid"));
  std::unique_ptr<Subprocess> p;
  const int port = start(p, {"-m", model_}, {{"FAKE_STRANGER", dir_.file("stranger.pid")}});
  const std::string err = p->err();
  const size_t at = err.find("1bit serve: port ");
  ASSERT_NE(at, std::string::npos) << err;
  EXPECT_NE(err.find("was taken by another program; the engine (" + model_ + ") starts again on port"),
            std::string::npos) << err;
  const int taken = std::atoi(err.c_str() + at + 17);
  const json argv = record()["argv"];
  const auto port_at = std::find(argv.begin(), argv.end(), "--port");
  ASSERT_NE(port_at, argv.end());
  EXPECT_NE(std::stoi((port_at + 1)->get<std::string>()), taken);
  HttpResult r = http_fetch("127.0.0.1", port, "GET", "/v1/models");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body.find("stranger"), std::string::npos) << r.body;
}

TEST_F(ServeTest, EngineDeathWhileServingStopsServe) {
  std::unique_ptr<Subprocess> p;
  start(p, {"-m", model_}, {{"FAKE_EXIT_AFTER_MS", "700"}});
  auto code = p->wait(10s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 1);
  EXPECT_NE(p->err().find("exited with code 7 while serving"), std::string::npos) << p->err();
}

TEST_F(ServeTest, LoadTimeout) {
  RunResult r = run(serve_args({"-m", model_, "--load-timeout", "1"}), fake_env({{"FAKE_LOAD_MS", "60000"}}), 20s);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("did not load within 1 s (--load-timeout)"), std::string::npos) << r.err;
  pid_t engine = record()["pid"];
  EXPECT_TRUE(wait_process_gone(engine, 2s));
}

TEST_F(ServeTest, SignalsStopTheEngineAndExitZero) {
  for (int sig : {SIGTERM, SIGINT}) {
    std::unique_ptr<Subprocess> p;
    start(p, {"-m", model_});
    pid_t engine = record()["pid"];
    ASSERT_TRUE(process_alive(engine));
    p->signal(sig);
    auto code = p->wait(15s);
    ASSERT_TRUE(code.has_value());
    EXPECT_EQ(*code, 0) << p->err();
    EXPECT_TRUE(wait_process_gone(engine, 1s));
    std::remove(record_path().c_str());
  }
}

TEST_F(ServeTest, KillNineLeavesNoEngineBehind) {
  std::unique_ptr<Subprocess> p;
  start(p, {"-m", model_});
  pid_t engine = record()["pid"];
  ASSERT_TRUE(process_alive(engine));
  p->signal(SIGKILL);
  p->wait(5s);
  EXPECT_TRUE(wait_process_gone(engine, 3s));
}

TEST_F(ServeTest, KillNineWhileLoadingLeavesNoEngineBehind) {
  std::unique_ptr<Subprocess> p;
  start(p, {"-m", model_}, {{"FAKE_LOAD_MS", "60000"}}, /*wait_ready=*/false);
  for (int i = 0; i < 200 && !engine_started(); ++i) std::this_thread::sleep_for(10ms);
  pid_t engine = record()["pid"];
  p->signal(SIGKILL);
  p->wait(5s);
  EXPECT_TRUE(wait_process_gone(engine, 3s));
}

TEST_F(ServeTest, ApiKey) {
  std::unique_ptr<Subprocess> p;
  int port = start(p, {"-m", model_, "--api-key", "sekret"});
  const std::string body = R"({"messages": []})";
  HttpResult none = http_fetch("127.0.0.1", port, "POST", "/v1/chat/completions", body);
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.body, R"({"error":{"code":401,"message":"Invalid API Key","type":"authentication_error"}})");
  EXPECT_EQ(http_fetch("127.0.0.1", port, "POST", "/v1/chat/completions", body, {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(http_fetch("127.0.0.1", port, "GET", "/v1/models").status, 401);
  HttpResult ok = http_fetch("127.0.0.1", port, "POST", "/v1/chat/completions", body, {{"Authorization", "Bearer sekret"}});
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(http_fetch("127.0.0.1", port, "GET", "/v1/models", "", {{"X-Api-Key", "sekret"}}).status, 200);
  EXPECT_EQ(http_fetch("127.0.0.1", port, "GET", "/health").status, 200);  // health stays open for monitors
  // The key also comes from the environment.
  std::unique_ptr<Subprocess> q;
  int port2 = start(q, {"-m", model_}, {{"ONEBIT_API_KEY", "envkey"}});
  EXPECT_EQ(http_fetch("127.0.0.1", port2, "GET", "/v1/models").status, 401);
  EXPECT_EQ(http_fetch("127.0.0.1", port2, "GET", "/v1/models", "", {{"Authorization", "Bearer envkey"}}).status, 200);
}

// On loopback, a page elsewhere cannot use serve: not under a name of its own that resolves here
// (DNS rebinding), not by a cross-site request or preflight; the server's own pages and programs
// (no Origin) can, and so can an origin the user allows. The API key stays as it is.
TEST_F(ServeTest, LoopbackRefusesOtherHostsAndOrigins) {
  std::unique_ptr<Subprocess> p;
  int port = start(p, {"-m", model_, "--allow-origin", "http://localhost:3000"});
  const std::string body = R"({"messages": []})", own = "http://127.0.0.1:" + std::to_string(port);
  EXPECT_EQ(http_fetch("127.0.0.1", port, "POST", "/v1/chat/completions", body).status, 200);
  HttpResult rebind = http_fetch("127.0.0.1", port, "GET", "/v1/models", "", {{"Host", "rebind.example:" + std::to_string(port)}});
  EXPECT_EQ(rebind.status, 403);
  EXPECT_NE(rebind.body.find("is not a loopback name"), std::string::npos) << rebind.body;
  EXPECT_EQ(http_fetch("127.0.0.1", port, "POST", "/v1/chat/completions", body, {{"Origin", "https://evil.example"}}).status, 403);
  EXPECT_EQ(http_fetch("127.0.0.1", port, "OPTIONS", "/v1/chat/completions", "",
                       {{"Origin", "https://evil.example"}, {"Access-Control-Request-Method", "POST"}})
                .status,
            403);
  EXPECT_EQ(http_fetch("127.0.0.1", port, "POST", "/v1/chat/completions", body, {{"Origin", own}}).status, 200);
  EXPECT_EQ(http_fetch("127.0.0.1", port, "POST", "/v1/chat/completions", body, {{"Origin", "http://localhost:3000"}}).status, 200);
  EXPECT_EQ(http_fetch("127.0.0.1", port, "POST", "/v1/chat/completions", body, {{"Origin", "http://localhost:3001"}}).status, 403);
  // Listening on every address is a choice to be reached from elsewhere: no guard there.
  Subprocess all(serve_args({"-m", model_, "--host", "0.0.0.0"}), fake_env(), dir_.path());
  ASSERT_TRUE(all.wait_for_stderr("ready on http://0.0.0.0:", 10s)) << all.err();
  const std::string err = all.err();
  const int open = std::atoi(err.c_str() + err.find("ready on http://0.0.0.0:") + std::strlen("ready on http://0.0.0.0:"));
  EXPECT_EQ(http_fetch("127.0.0.1", open, "GET", "/v1/models", "", {{"Host", "box.example"}}).status, 200);
}

TEST_F(ServeTest, BodyLimit) {
  std::unique_ptr<Subprocess> p;
  int port = start(p, {"-m", model_, "--max-body-mb", "1"});
  HttpResult small = http_fetch("127.0.0.1", port, "POST", "/echo", std::string(1000, 'x'));
  EXPECT_EQ(small.status, 200);
  EXPECT_EQ(small.body.size(), 1000u);
  HttpResult big = http_fetch("127.0.0.1", port, "POST", "/echo", std::string((1 << 20) + 1, 'x'));
  EXPECT_EQ(big.status, 413);
  EXPECT_NE(big.body.find("request body larger than 1048576 bytes"), std::string::npos);
  // Chunked bodies are counted as they arrive.
  Fd fd = connect_tcp("127.0.0.1", port, 2000);
  std::string chunk(64 * 1024, 'y');
  std::string req = "POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  write_all(fd.get(), req);
  for (int i = 0; i < 17; ++i) write_all(fd.get(), "10000\r\n" + chunk + "\r\n");
  HttpConn conn(std::move(fd));
  std::string head;
  ASSERT_EQ(conn.read_head(head, 5000), ReadStatus::kOk);
  EXPECT_EQ(parse_response_head(head).status, 413);
}

TEST_F(ServeTest, ForwardsHeadersAndKeepsConnectionsAlive) {
  std::unique_ptr<Subprocess> p;
  int port = start(p, {"-m", model_});
  Fd fd = connect_tcp("127.0.0.1", port, 2000);
  HttpConn conn(std::move(fd));
  for (int i = 0; i < 3; ++i) {
    std::string body = R"({"messages": [], "n": )" + std::to_string(i) + "}";
    write_all(conn.fd(), "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer abc\r\n"
                         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
    std::string head, resp;
    ASSERT_EQ(conn.read_head(head, 5000), ReadStatus::kOk);
    ResponseHead h = parse_response_head(head);
    ASSERT_EQ(h.status, 200);
    ASSERT_EQ(conn.read_body(response_framing(h, "POST"), 1 << 20, resp, 5000), ReadStatus::kOk);
    json seen = json::parse(resp)["seen"];
    // The client's credentials stop at serve; the engine sees its own key.
    EXPECT_EQ(seen["authorization"], "Bearer " + record()["env"]["LLAMA_API_KEY"].get<std::string>());
    EXPECT_EQ(seen["body_bytes"], body.size());
    EXPECT_EQ(seen["host"].get<std::string>().rfind("127.0.0.1:", 0), 0u);
  }
}

TEST_F(ServeTest, MalformedRequestsGetA400) {
  std::unique_ptr<Subprocess> p;
  int port = start(p, {"-m", model_});
  Fd fd = connect_tcp("127.0.0.1", port, 2000);
  write_all(fd.get(), "GARBAGE\r\n\r\n");
  HttpConn conn(std::move(fd));
  std::string head;
  ASSERT_EQ(conn.read_head(head, 5000), ReadStatus::kOk);
  EXPECT_EQ(parse_response_head(head).status, 400);
  EXPECT_EQ(http_fetch("127.0.0.1", port, "GET", "/health").status, 200);
}

TEST_F(ServeTest, LongModelRouting) {
  std::string long_model = dir_.file("long.gguf");
  write_gguf(long_model, {{"general.architecture", std::string("llama")}});
  std::unique_ptr<Subprocess> p;
  int port = start(p, {"-m", model_, "--long-model", long_model, "--long-from", "10"});
  auto chat = [&](const json& messages) {
    return http_fetch("127.0.0.1", port, "POST", "/v1/chat/completions", json{{"messages", messages}}.dump());
  };
  auto route_of = [](const HttpResult& r) {
    const std::string* h = find_header(r.headers, "X-1bit-Route");
    return h ? *h : std::string("(none)");
  };
  json short_conv = {{{"role", "user"}, {"content", "hello there"}}};
  HttpResult a = chat(short_conv);
  ASSERT_EQ(a.status, 200) << a.body << a.error;
  EXPECT_EQ(route_of(a), "main 2");
  EXPECT_EQ(json::parse(a.body)["model"], model_);

  json long_conv = {{{"role", "system"}, {"content", "you are a careful assistant who reads"}},
                    {{"role", "user"}, {"content", "one two three four five six seven"}}};
  HttpResult b = chat(long_conv);
  EXPECT_EQ(route_of(b), "long 14");
  EXPECT_EQ(json::parse(b.body)["model"], long_model);

  // Follow-ups keep their conversation's route, whatever their own length.
  json short_more = short_conv;
  short_more.push_back({{"role", "assistant"}, {"content", "hi"}});
  short_more.push_back({{"role", "user"}, {"content", "a b c d e f g h i j k l m n o p"}});
  EXPECT_EQ(route_of(chat(short_more)), "main 2");
  json long_more = long_conv;
  long_more.push_back({{"role", "assistant"}, {"content", "ok"}});
  long_more.push_back({{"role", "user"}, {"content", "x"}});
  EXPECT_EQ(route_of(chat(long_more)), "long 14");

  // Text completions are counted per request; other endpoints are not routed.
  HttpResult c = http_fetch("127.0.0.1", port, "POST", "/v1/completions", json{{"prompt", "a b c d e f g h i j k"}}.dump());
  EXPECT_EQ(route_of(c), "long 11");
  EXPECT_EQ(route_of(http_fetch("127.0.0.1", port, "GET", "/v1/models")), "(none)");
}

TEST_F(ServeTest, TheEngineNeverSeesVariablesForWhatServeOwns) {
  std::unique_ptr<Subprocess> p;
  int port = start(p, {"-m", model_}, {{"LLAMA_API_KEY", "stray"}, {"LLAMA_ARG_THREADS", "3"}});
  json env = record()["env"];
  // The stray key is gone; the engine's key is serve's own: fresh, 32 hex digits, not in argv.
  const std::string key = env["LLAMA_API_KEY"];
  EXPECT_EQ(key.size(), 32u);
  EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), std::string::npos);
  for (const auto& arg : record()["argv"]) EXPECT_EQ(arg.get<std::string>().find(key), std::string::npos);
  EXPECT_EQ(env["LLAMA_ARG_THREADS"], "3");
  EXPECT_EQ(http_fetch("127.0.0.1", port, "GET", "/v1/models").status, 200);
}

TEST_F(ServeTest, AnOversizedUploadSeesIts413) {
  std::unique_ptr<Subprocess> p;
  int port = start(p, {"-m", model_, "--max-body-mb", "1"});
  // Far more than the socket buffers hold: the answer must not be lost to a connection reset.
  HttpResult big = http_fetch("127.0.0.1", port, "POST", "/echo", std::string(32 << 20, 'x'));
  EXPECT_EQ(big.status, 413) << big.error;
}

TEST_F(ServeTest, HostileBodiesDoNotTakeTheRouterDown) {
  std::string long_model = dir_.file("long.gguf");
  write_gguf(long_model, {{"general.architecture", std::string("llama")}});
  std::unique_ptr<Subprocess> p;
  int port = start(p, {"-m", model_, "--long-model", long_model, "--long-from", "10"});
  for (const std::string& body : {std::string(R"({"messages": [{"role": 7, "content": "x"}]})"),
                                  std::string(R"({"messages": [{"role": null}, {"role": "user", "content": 5}]})"),
                                  std::string(R"({"messages": 3})"), std::string(R"({"prompt": {"a": [1, {}]}})"),
                                  std::string(200000, '[') + std::string(200000, ']'),
                                  std::string("{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\xfe\"}]}")}) {
    HttpResult r = http_fetch("127.0.0.1", port, "POST", "/v1/chat/completions", body);
    EXPECT_NE(r.status, 0) << r.error;
  }
  EXPECT_FALSE(p->wait(std::chrono::milliseconds(0)).has_value()) << p->err();
  EXPECT_EQ(http_fetch("127.0.0.1", port, "GET", "/health").status, 200);
}

TEST_F(ServeTest, TheUiIsOpenButTheApiIsNot) {
  std::unique_ptr<Subprocess> p;
  int port = start(p, {"-m", model_, "--api-key", "k"});
  // The fake engine has no UI: 404 comes from it, which shows the request got through.
  EXPECT_EQ(http_fetch("127.0.0.1", port, "GET", "/").status, 404);
  EXPECT_EQ(http_fetch("127.0.0.1", port, "GET", "/bundle.js").status, 404);
  EXPECT_EQ(http_fetch("127.0.0.1", port, "POST", "/bundle.js").status, 401);
  EXPECT_EQ(http_fetch("127.0.0.1", port, "GET", "/props").status, 401);
  EXPECT_EQ(http_fetch("127.0.0.1", port, "GET", "/v1/models").status, 401);
}

TEST_F(ServeTest, PortInUseIsAClearError) {
  Fd busy = listen_tcp("127.0.0.1", 0);
  int port = bound_port(busy.get());
  RunResult r = run({onebit_binary(), "serve", "--llama-server", fake_backend_binary(), "-m", model_, "--port",
                     std::to_string(port)}, fake_env());
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "1bit serve: cannot listen on 127.0.0.1:" + std::to_string(port) + ": Address already in use\n");
  EXPECT_FALSE(engine_started());
}

}  // namespace
}  // namespace onebit::testing
