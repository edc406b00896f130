// RPC workers end to end on loopback: two `1bit rpc-worker` processes (each the engine's
// ggml-rpc-server as its child) and `1bit serve --rpc` on the shipped model, with the real engine.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <regex>
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

std::string tiny_model() { return source_dir() + "/models/1bit-tiny-32m-q8_0.gguf"; }

// A worker on a free loopback port (or `port`), once it says where it listens.
struct Worker {
  explicit Worker(const TempDir& dir, int port = 0)
      : process({onebit_binary(), "rpc-worker", "--port", std::to_string(port), "--threads", "1"}, {}, dir.path()) {
    if (!process.wait_for_stderr("listening on 127.0.0.1:", 60s)) return;
    std::smatch m;
    const std::string err = process.err();
    if (std::regex_search(err, m, std::regex("listening on 127\\.0\\.0\\.1:([0-9]+)"))) this->port = std::stoi(m[1]);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
  // The engine's RPC server it runs.
  pid_t server_pid() const {
    auto kids = child_pids(process.pid());
    return kids.size() == 1 ? kids[0] : -1;
  }
  Subprocess process;
  int port = -1;
};

std::string greedy_answer(int port, int tokens = 24) {
  json body = {{"messages", {{{"role", "user"}, {"content", "Tell me about Python lists."}}}},
               {"max_tokens", tokens}, {"temperature", 0}};
  HttpResult r = http_fetch("127.0.0.1", port, "POST", "/v1/chat/completions", body.dump(),
                            {{"Content-Type", "application/json"}}, 120000);
  if (r.status != 200) return "HTTP " + std::to_string(r.status) + ": " + r.body + r.error;
  return json::parse(r.body)["choices"][0]["message"]["content"];
}

TEST(RpcWorker, ServesTheSameGreedyAnswersAsALocalEngine) {
  TempDir dir;
  Worker a(dir), b(dir);
  ASSERT_GT(a.port, 0) << a.process.err();
  ASSERT_GT(b.port, 0) << b.process.err();
  EXPECT_NE(a.process.err().find("offering CPU"), std::string::npos) << a.process.err();
  EXPECT_NE(a.process.err().find("no authentication"), std::string::npos);

  std::string local;
  {
    Subprocess serve({onebit_binary(), "serve", "-m", tiny_model(), "--port", "0", "-c", "512"}, {}, dir.path());
    const int port = serve_ready_port(serve);
    ASSERT_GT(port, 0) << serve.err();
    local = greedy_answer(port);
  }
  Subprocess serve({onebit_binary(), "serve", "-m", tiny_model(), "--port", "0", "-c", "512", "--rpc",
                    a.address() + "," + b.address()},
                   {}, dir.path());
  const int port = serve_ready_port(serve);
  ASSERT_GT(port, 0) << serve.err();
  EXPECT_NE(serve.err().find("rpc device RPC0: " + a.address()), std::string::npos) << serve.err();
  EXPECT_NE(serve.err().find("rpc device RPC1: " + b.address()), std::string::npos) << serve.err();
  // The engine really runs on the workers: every layer is offloaded to the two RPC devices.
  auto engine = child_pids(serve.pid());
  ASSERT_EQ(engine.size(), 1u);
  const auto argv = proc_strings(engine[0], "cmdline");
  const auto dev = std::find(argv.begin(), argv.end(), "-dev");
  ASSERT_NE(dev, argv.end());
  EXPECT_EQ(*(dev + 1), "RPC0,RPC1");
  EXPECT_EQ(greedy_answer(port), local);

  // SIGTERM of serve takes its engine; SIGTERM of a worker takes its server.
  const pid_t engine_pid = engine[0], server_pid = a.server_pid();
  ASSERT_GT(server_pid, 0);
  serve.signal(SIGTERM);
  EXPECT_EQ(serve.wait(30s), 0) << serve.err();
  EXPECT_TRUE(wait_process_gone(engine_pid, 10s));
  a.process.signal(SIGTERM);
  EXPECT_EQ(a.process.wait(30s), 0) << a.process.err();
  EXPECT_TRUE(wait_process_gone(server_pid, 10s));
  EXPECT_NE(a.process.err().find("1bit rpc-worker: stopping"), std::string::npos);
}

// kill -9 of a worker mid-stream: the client's stream ends (no hang), /health says which worker is
// gone, and serve answers again once a worker is back on that port.
TEST(RpcWorker, AWorkerKilledMidStreamIsAnErrorThenServeRecovers) {
  TempDir dir;
  auto a = std::make_unique<Worker>(dir);
  Worker b(dir);
  ASSERT_GT(a->port, 0) << a->process.err();
  ASSERT_GT(b.port, 0) << b.process.err();
  const int a_port = a->port;
  Subprocess serve({onebit_binary(), "serve", "-m", tiny_model(), "--port", "0", "-c", "2048", "--rpc",
                    a->address() + "," + b.address()},
                   {}, dir.path());
  const int port = serve_ready_port(serve);
  ASSERT_GT(port, 0) << serve.err();
  const pid_t a_server = a->server_pid();
  ASSERT_GT(a_server, 0);

  HttpResult streamed;
  std::thread client([&] {
    json body = {{"prompt", "Once upon a time"}, {"max_tokens", 1500}, {"temperature", 0}, {"stream", true},
                 {"ignore_eos", true}};
    streamed = http_fetch("127.0.0.1", port, "POST", "/v1/completions", body.dump(),
                          {{"Content-Type", "application/json"}}, 60000);
  });
  std::this_thread::sleep_for(1500ms);
  kill(a->process.pid(), SIGKILL);
  const auto start = std::chrono::steady_clock::now();
  client.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s) << "the client waited on a dead worker";
  // Either the stream was cut (no final [DONE]) or it failed outright: never a whole answer.
  EXPECT_EQ(streamed.body.find("[DONE]"), std::string::npos) << streamed.body.substr(0, 300);
  EXPECT_TRUE(wait_process_gone(a_server, 10s)) << "the worker's server outlived kill -9 of the worker";

  HttpResult health;
  for (int i = 0; i < 100; ++i) {
    health = http_fetch("127.0.0.1", port, "GET", "/health");
    if (health.status == 503) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(health.status, 503) << health.body;
  EXPECT_NE(health.body.find("rpc worker 127.0.0.1:" + std::to_string(a_port) + " is gone"), std::string::npos)
      << health.body;

  a.reset();
  Worker again(dir, a_port);
  ASSERT_EQ(again.port, a_port) << again.process.err();
  ASSERT_TRUE(serve.wait_for_stderr("ready again", 120s)) << serve.err();
  EXPECT_EQ(greedy_answer(port, 8).rfind("HTTP", 0), std::string::npos);

  // kill -9 of serve still takes its engine down.
  auto engine = child_pids(serve.pid());
  ASSERT_EQ(engine.size(), 1u);
  serve.signal(SIGKILL);
  serve.wait(10s);
  EXPECT_TRUE(wait_process_gone(engine[0], 10s));
}

TEST(RpcWorker, AnUnreachableWorkerIsNamed) {
  TempDir dir;
  const int closed = pick_free_port("127.0.0.1");
  RunResult r = run({onebit_binary(), "serve", "-m", tiny_model(), "--port", "0", "--rpc",
                     "127.0.0.1:" + std::to_string(closed)});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot connect to rpc worker 127.0.0.1:" + std::to_string(closed) + " (Connection refused)"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(processes_mentioning(tiny_model() + " --host").empty());
  // A dry run says so and still shows the plan: every layer on the worker.
  RunResult dry = run({onebit_binary(), "serve", "-m", tiny_model(), "--rpc", "127.0.0.1:" + std::to_string(closed),
                       "--dry-run"});
  EXPECT_EQ(dry.code, 0) << dry.err;
  EXPECT_NE(dry.err.find("cannot connect to rpc worker"), std::string::npos);
  EXPECT_NE(dry.out.find("--rpc 127.0.0.1:" + std::to_string(closed) + " -ngl 99 -dev RPC0"), std::string::npos) << dry.out;
}

TEST(RpcWorker, ListensOnLoopbackUnlessAllowedRemote) {
  TempDir dir;
  RunResult r = run({onebit_binary(), "rpc-worker", "--host", "0.0.0.0", "--port", "0"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--host 0.0.0.0 is not a loopback address"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--allow-remote"), std::string::npos);

  Subprocess remote({onebit_binary(), "rpc-worker", "--host", "0.0.0.0", "--port", "0", "--allow-remote", "-t", "1"},
                    {}, dir.path());
  ASSERT_TRUE(remote.wait_for_stderr("listening on 0.0.0.0:", 60s)) << remote.err();
  EXPECT_NE(remote.err().find("(--allow-remote)"), std::string::npos) << remote.err();
  remote.signal(SIGTERM);
  EXPECT_EQ(remote.wait(30s), 0);

  // A taken port is named before anything starts.
  Fd taken = listen_tcp("127.0.0.1", 0);
  const int port = bound_port(taken.get());
  RunResult busy = run({onebit_binary(), "rpc-worker", "--port", std::to_string(port)});
  EXPECT_EQ(busy.code, 1);
  EXPECT_NE(busy.err.find("1bit rpc-worker: "), std::string::npos);
  EXPECT_NE(busy.err.find(std::to_string(port)), std::string::npos) << busy.err;
  EXPECT_TRUE(processes_mentioning("-p " + std::to_string(port)).empty());

  RunResult bad = run({onebit_binary(), "rpc-worker", "--device", "tpu"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("--device: \"tpu\" is not one of auto, cpu, cuda, vulkan"), std::string::npos) << bad.err;
}

// Lemonade's server-wide --rpc: a model loads onto the worker and answers; a second model may not
// take the same worker while the first holds it.
TEST(RpcWorker, LemonadeLoadsOntoWorkers) {
  TempDir dir;
  Worker w(dir);
  ASSERT_GT(w.port, 0) << w.process.err();
  const int port = pick_free_port("127.0.0.1");
  Subprocess lemonade({onebit_binary(), "lemonade", "--port", std::to_string(port), "--models-dir",
                       source_dir() + "/models", "--state-dir", dir.file("state"), "--rpc", w.address(),
                       "--max-loaded-models", "-1"},
                      {}, dir.path());
  HttpResult up;
  for (int i = 0; i < 300 && up.status != 200; ++i) {
    up = http_fetch("127.0.0.1", port, "GET", "/api/v1/health");
    if (up.status != 200) std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(up.status, 200) << lemonade.err();
  HttpResult load = http_fetch("127.0.0.1", port, "POST", "/api/v1/load", json{{"model_name", "1bit-tiny"}}.dump(),
                               {{"Content-Type", "application/json"}}, 120000);
  ASSERT_EQ(load.status, 200) << load.body << lemonade.err();
  auto engines = child_pids(lemonade.pid());
  ASSERT_EQ(engines.size(), 1u);
  const auto argv = proc_strings(engines[0], "cmdline");
  const auto rpc = std::find(argv.begin(), argv.end(), "--rpc");
  ASSERT_NE(rpc, argv.end());
  EXPECT_EQ(*(rpc + 1), w.address());
  HttpResult other = http_fetch("127.0.0.1", port, "POST", "/api/v1/load",
                                json{{"model_name", "1bit-tiny-draft"}}.dump(), {{"Content-Type", "application/json"}},
                                120000);
  EXPECT_EQ(other.status, 409) << other.body;
  EXPECT_NE(other.body.find("rpc worker " + w.address() + " serves 1bit-tiny"), std::string::npos) << other.body;
  lemonade.signal(SIGTERM);
  EXPECT_EQ(lemonade.wait(30s), 0);
}

}  // namespace
}  // namespace onebit::testing
