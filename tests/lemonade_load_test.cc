// A bounded load on `1bit lemonade`: 32 concurrent streaming clients over two models for 15 s.
// No request may fail or end early, and afterwards nothing may be left: the server's descriptors
// back to where they were, and once it stops, no engine process and no engine port.
#include <dirent.h>
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "http/conn.h"
#include "http/net.h"
#include "model/synth.h"
#include "subprocess.h"
#include "test_support.h"

namespace onebit::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

size_t open_fds(pid_t pid) {
  size_t n = 0;
  if (DIR* d = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n;
}

TEST(LemonadeLoad, ThirtyTwoStreamingClientsOverTwoModels) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("extra"));
  SynthOptions o;
  o.vocab_dir = vocab_dir();
  write_synth_model(*find_synth_shape("tiny-llama"), o, dir.file("extra/synth-llama.gguf"));
  Subprocess server({onebit_binary(), "lemonade", "--port", "0", "--models-dir", source_dir() + "/models",
                     "--extra-models-dir", dir.file("extra"), "--state-dir", dir.file("state"),
                     "--max-loaded-models", "2", "--llamacpp-args", "-np 8"},
                    {}, dir.path());
  ASSERT_TRUE(server.wait_for_stderr("listening on http://127.0.0.1:", 10s)) << server.err();
  std::string err = server.err();
  const int port = std::atoi(err.c_str() + err.find("listening on http://127.0.0.1:") + 30);
  const std::string models[2] = {"1bit-tiny", "synth-llama"};
  for (const auto& m : models)
    ASSERT_EQ(http_fetch("127.0.0.1", port, "POST", "/api/v1/load", json{{"model_name", m}}.dump(), {}, 60000).status, 200);
  json health = json::parse(http_fetch("127.0.0.1", port, "GET", "/api/v1/health").body);
  ASSERT_EQ(health["all_models_loaded"].size(), 2u);
  std::vector<int> engine_ports;
  std::vector<pid_t> engines;
  for (const auto& m : health["all_models_loaded"]) {
    std::string url = m["backend_url"];
    engine_ports.push_back(std::atoi(url.c_str() + url.rfind(':') + 1));
    engines.push_back(m["pid"]);
  }
  const size_t fds_before = open_fds(server.pid());

  std::atomic<int> done{0}, failed{0}, truncated{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int c = 0; c < 32; ++c) {
    clients.emplace_back([&, c] {
      while (!stop) {
        const json body = {{"model", models[c % 2]}, {"max_tokens", 24}, {"stream", true}, {"temperature", 0},
                           {"messages", {{{"role", "user"}, {"content", "client " + std::to_string(c)}}}}};
        HttpResult r = http_fetch("127.0.0.1", port, "POST", "/api/v1/chat/completions", body.dump(),
                                  {{"Content-Type", "application/json"}}, 60000);
        if (r.status != 200) {
          ++failed;
          continue;
        }
        // A whole stream: events up to a finish_reason, then [DONE].
        if (r.body.find("\"finish_reason\":\"") == std::string::npos || r.body.find("data: [DONE]") == std::string::npos) {
          ++truncated;
          continue;
        }
        ++done;
      }
    });
  }
  std::this_thread::sleep_for(15s);
  stop = true;
  for (auto& t : clients) t.join();
  std::cout << "[ load     ] " << done << " whole streams in 15 s from 32 clients, " << failed << " failed, "
            << truncated << " truncated\n";
  EXPECT_GT(done.load(), 32);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(truncated.load(), 0);

  // Client connections close, and their engine connections with them.
  size_t fds_after = 0;
  for (int i = 0; i < 50; ++i) {
    fds_after = open_fds(server.pid());
    if (fds_after <= fds_before) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_LE(fds_after, fds_before);
  server.signal(SIGTERM);
  ASSERT_EQ(server.wait(30s), 0) << server.err();
  for (pid_t e : engines) EXPECT_TRUE(wait_process_gone(e, 5s)) << e;
  for (int p : engine_ports) EXPECT_NO_THROW(listen_tcp("127.0.0.1", p, 1)) << "port " << p << " still taken";
}

}  // namespace
}  // namespace onebit::testing
