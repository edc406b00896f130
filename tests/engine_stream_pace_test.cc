// Engine patch 0016: with ONEBIT_STREAM_PACE_MS, llama-server wakes a stream's HTTP thread for a
// token only when its last wake is that long ago; the tokens between wait in the queue and go out
// together. A stream's first token and its end go out at once, and the text is the same.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "http/conn.h"
#include "http/net.h"
#include "subprocess.h"
#include "test_support.h"

namespace onebit::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string tiny_model() { return source_dir() + "/models/1bit-tiny-32m-q8_0.gguf"; }

// What a streamed answer looked like on the wire: the arrival time of each token event (those
// that carry text) and of the last event, and the text.
struct Stream {
  std::vector<Clock::time_point> tokens;
  Clock::time_point end;
  std::string text;
  // Arrivals of token events more than 0.5 ms after the one before: the bursts they came in.
  int bursts() const {
    int n = tokens.empty() ? 0 : 1;
    for (size_t i = 1; i < tokens.size(); ++i) n += tokens[i] - tokens[i - 1] > 500us;
    return n;
  }
};

Stream stream_completion(int port, int n_predict) {
  std::string error;
  Fd fd = connect_tcp("127.0.0.1", port, 5000, &error);
  EXPECT_TRUE(fd.valid()) << error;
  const std::string body = json{{"prompt", "Once upon a time"}, {"n_predict", n_predict}, {"ignore_eos", true},
                                {"temperature", 0}, {"stream", true}, {"cache_prompt", false}}.dump();
  EXPECT_TRUE(write_all(fd.get(), "POST /completion HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                  "Content-Type: application/json\r\nContent-Length: " +
                                      std::to_string(body.size()) + "\r\n\r\n" + body));
  HttpConn conn(std::move(fd));
  Stream s;
  size_t scanned = 0;
  bool done = false;
  while (!done && conn.fill(60000)) {
    const Clock::time_point now = Clock::now();
    std::string& buf = conn.buffer();
    // Events are whole lines "data: {...}"; chunk framing lines between them are skipped.
    size_t eol;
    while ((eol = buf.find('\n', scanned)) != std::string::npos) {
      const std::string line = buf.substr(scanned, eol - scanned);
      scanned = eol + 1;
      if (line.rfind("data: ", 0) != 0) continue;
      const json e = json::parse(line.substr(6), nullptr, false);
      if (e.is_discarded()) continue;
      if (e.value("stop", false)) {
        s.end = now;
        done = true;
      } else if (!e.value("content", std::string()).empty()) {
        s.tokens.push_back(now);
        s.text += e["content"].get<std::string>();
      }
    }
  }
  EXPECT_TRUE(done) << "the stream ended without its last event";
  return s;
}

Stream run(const std::string& pace_ms, int n_predict) {
  TempDir dir;
  const int port = pick_free_port("127.0.0.1");
  Subprocess server({llama_server_binary(), "-m", tiny_model(), "-c", "1024", "-t", "2", "-np", "1", "--port",
                     std::to_string(port)},
                    {{"ONEBIT_STREAM_PACE_MS", pace_ms}}, dir.path());
  EXPECT_TRUE(wait_engine_healthy(port, 60s)) << "llama-server never became healthy: " << server.err();
  stream_completion(port, 16);  // warms the server up
  return stream_completion(port, n_predict);
}

TEST(EngineStreamPace, TokensWaitForTheReadersNextWake) {
  constexpr int kTokens = 256;
  const Stream each = run("0", kTokens);
  // A pace longer than the whole answer: after the first token, the rest wait for the end.
  const Stream paced = run("5000", kTokens);
  std::printf("token events arrived in %d bursts one by one, %d paced; paced, the first %.1f ms before the end\n",
              each.bursts(), paced.bursts(),
              paced.tokens.empty() ? 0.0 : std::chrono::duration<double, std::milli>(paced.end - paced.tokens[0]).count());
  ASSERT_FALSE(each.tokens.empty());
  ASSERT_FALSE(paced.tokens.empty());
  EXPECT_EQ(paced.text, each.text);
  EXPECT_GE(each.bursts(), 32) << "without a pace, tokens should arrive as they are made";
  // The reader also wakes at the engine's HTTP polling interval (1 s), so a slow machine sees a
  // burst more for each second of the answer.
  const double seconds = std::chrono::duration<double>(paced.end - paced.tokens[0]).count();
  EXPECT_LE(paced.bursts(), 2 + static_cast<int>(seconds));
  // The first token went out at once, not with the rest at the end: generating the other 255
  // takes far longer than 20 ms on any machine that runs this.
  EXPECT_GT(paced.end - paced.tokens[0], 20ms);
  EXPECT_LT(paced.end - paced.tokens[0], 5000ms);
}

}  // namespace
}  // namespace onebit::testing
