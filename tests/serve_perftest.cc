// What the proxy costs: `1bit serve` against the engine it started, in the same run, on the same
// engine instance (its private port is read from the child's command line). Prints numbers; it
// asserts nothing, since timings belong in docs/results.md, not in a pass/fail test.
//
//   serve_perftest [--requests N] [--seconds S] [--rounds R] [--clients C] [--model FILE]
//
// 1. added latency: N small requests (GET /health, POST /tokenize) on a kept-alive connection,
//    alternating direct and proxied; medians and p99.
// 2. streaming time to first byte: N/10 streamed chat completions, alternating; medians.
// 3. throughput: C concurrent kept-alive clients for S seconds each way, R rounds alternating
//    direct/proxied; short completions (max_tokens 4) and /health.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/cli.h"
#include "http/conn.h"
#include "http/net.h"
#include "model/synth.h"
#include "subprocess.h"
#include "test_support.h"

namespace onebit::testing {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// Where a client sends its requests: a port, and the key that port wants. The engine answers
// only serve, with the key serve gave it; the benchmark reads that key from the engine's
// environment and sends the same header to serve (which puts its own in its place), so both
// sides get the same bytes.
struct Endpoint {
  int port;
  std::string authorization;
};

// A kept-alive client connection.
class Client {
 public:
  explicit Client(const Endpoint& to) : to_(to), conn_(connect_tcp("127.0.0.1", to.port, 2000)) {}

  // Sends a request; returns ms until the response head arrived (`ttfb`) and until it ended.
  bool request(const std::string& method, const std::string& path, const std::string& body, double* ttfb, double* total,
               bool first_event = false) {
    std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
                      "Authorization: " + to_.authorization + "\r\n";
    if (!body.empty()) req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    req += "\r\n" + body;
    // The engine closes a kept-alive connection after a streamed answer without saying so: a
    // connection found closed before any answer is opened again and the request sent again.
    Clock::time_point t0;
    std::string head, resp;
    for (int attempt = 0;; ++attempt) {
      t0 = Clock::now();
      ReadStatus st = write_all(conn_.fd(), req) ? conn_.read_head(head, 60000) : ReadStatus::kClosed;
      if (st == ReadStatus::kOk) break;
      if (st != ReadStatus::kClosed || attempt > 0) return false;
      conn_ = HttpConn(connect_tcp("127.0.0.1", to_.port, 2000));
    }
    ResponseHead h = parse_response_head(head);
    BodyFraming f = response_framing(h, method);
    if (first_event) {
      // Time to the first SSE event: the first body bytes that carry data.
      while (conn_.buffer().find("data: ") == std::string::npos)
        if (!conn_.fill(60000)) return false;
    }
    if (ttfb) *ttfb = ms_since(t0);
    if (conn_.read_body(f, 1 << 30, resp, 60000) != ReadStatus::kOk) return false;
    if (total) *total = ms_since(t0);
    // A server may end a kept-alive connection after some requests (the engine's HTTP library
    // does every 100): reconnect as a well-behaved client would, not count it as a failure.
    if (header_has_token(h.headers, "Connection", "close") || f.kind == BodyKind::kUntilClose)
      conn_ = HttpConn(connect_tcp("127.0.0.1", to_.port, 2000));
    return h.status == 200;
  }

 private:
  Endpoint to_;
  HttpConn conn_;
};

struct Pair {
  std::vector<double> direct, proxied;
};

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

void print_latency(const std::string& what, const Pair& p) {
  auto row = [&](const char* stat, double d, double s) {
    std::printf("  %-24s %-7s direct %8.3f ms   serve %8.3f ms   added %+7.3f ms\n", what.c_str(), stat, d, s, s - d);
  };
  row("median", percentile(p.direct, 0.5), percentile(p.proxied, 0.5));
  row("mean", mean(p.direct), mean(p.proxied));
  row("p99", percentile(p.direct, 0.99), percentile(p.proxied, 0.99));
}

double throughput(const Endpoint& to, int clients, double seconds, const std::string& method, const std::string& path,
                  const std::string& body, int64_t* errors) {
  std::atomic<int64_t> done{0}, failed{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  auto t0 = Clock::now();
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&] {
      Client c(to);
      while (!stop) {
        if (c.request(method, path, body, nullptr, nullptr)) ++done;
        else {
          ++failed;
          c = Client(to);
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  *errors += failed;
  return static_cast<double>(done) / (ms_since(t0) / 1000.0);
}

// The engine serve started: its port (from its command line) and its key (from its environment).
Endpoint engine_of(pid_t serve) {
  auto kids = child_pids(serve);
  if (kids.size() != 1) return {-1, ""};
  const std::vector<std::string> argv = proc_strings(kids[0], "cmdline");
  const auto at = std::find(argv.begin(), argv.end(), "--port");
  if (at == argv.end() || at + 1 == argv.end()) return {-1, ""};
  return {std::atoi((at + 1)->c_str()), "Bearer " + proc_env(kids[0], "LLAMA_API_KEY")};
}

int perftest(int argc, char** argv) {
  int requests = 2000, clients = 32, rounds = 3;
  double seconds = 5;
  std::string model;
  std::vector<CliOption> table = {
      {{"--requests"}, "N", "small requests per side", [&](const std::string& v) { requests = static_cast<int>(parse_int_option("--requests", v, 10, 1000000)); }},
      {{"--seconds"}, "S", "seconds per throughput run", [&](const std::string& v) { seconds = parse_double_option("--seconds", v, 0.5, 3600); }},
      {{"--rounds"}, "R", "throughput runs per side", [&](const std::string& v) { rounds = static_cast<int>(parse_int_option("--rounds", v, 1, 100)); }},
      {{"--clients"}, "C", "concurrent clients", [&](const std::string& v) { clients = static_cast<int>(parse_int_option("--clients", v, 1, 1024)); }},
      {{"--model"}, "FILE", "model to serve (default: a synth tiny-llama)", [&](const std::string& v) { model = v; }},
  };
  parse_cli(table, std::vector<std::string>(argv + 1, argv + argc));
  TempDir dir;
  if (model.empty()) {
    model = dir.file("tiny.gguf");
    SynthOptions o;
    o.vocab_dir = vocab_dir();
    write_synth_model(*find_synth_shape("tiny-llama"), o, model);
  }
  // Parallel slots for the concurrent runs; the same engine serves both sides.
  Subprocess serve({onebit_binary(), "serve", "-m", model, "--port", "0", "-np", "8", "-c", "8192"}, {}, dir.path());
  const int serve_port = serve_ready_port(serve);
  if (serve_port <= 0) {
    std::cerr << serve.err();
    return 1;
  }
  const Endpoint direct = engine_of(serve.pid());
  const Endpoint proxied{serve_port, direct.authorization};
  if (direct.port <= 0) {
    std::cerr << "cannot find the engine's port\n";
    return 1;
  }
  std::printf("serve_perftest: model %s, serve :%d, engine :%d, %u cores\n", model.c_str(), proxied.port, direct.port,
              std::thread::hardware_concurrency());

  const std::string tokenize = R"({"content": "The quick brown fox jumps over the lazy dog."})";
  const std::string chat_stream =
      R"({"messages": [{"role": "user", "content": "hello"}], "max_tokens": 16, "temperature": 0, "stream": true})";
  const std::string completion = R"({"prompt": "def f(x):", "max_tokens": 4, "temperature": 0})";

  Client cd(direct), cp(proxied);
  Pair health, tok, ttfb;
  // A request that fails is counted, not timed: the run then exits non-zero (a benchmark of 401s
  // measures nothing).
  int64_t failures = 0;
  auto timed = [&](Client& c, std::vector<double>& into, const char* method, const char* path, const std::string& body,
                   bool first_event) {
    double t = 0;
    const bool ok = first_event ? c.request(method, path, body, &t, nullptr, true) : c.request(method, path, body, nullptr, &t);
    if (ok) into.push_back(t);
    else ++failures;
  };
  std::vector<double> warm_up;
  for (int i = 0; i < requests / 10; ++i) {
    timed(cd, warm_up, "GET", "/health", "", false);
    timed(cp, warm_up, "GET", "/health", "", false);
  }
  for (int i = 0; i < requests; ++i) {
    timed(cd, health.direct, "GET", "/health", "", false);
    timed(cp, health.proxied, "GET", "/health", "", false);
    timed(cd, tok.direct, "POST", "/tokenize", tokenize, false);
    timed(cp, tok.proxied, "POST", "/tokenize", tokenize, false);
  }
  for (int i = 0; i < std::max(20, requests / 10); ++i) {
    timed(cd, ttfb.direct, "POST", "/v1/chat/completions", chat_stream, true);
    timed(cp, ttfb.proxied, "POST", "/v1/chat/completions", chat_stream, true);
  }
  if (failures > 0) {
    std::fprintf(stderr, "serve_perftest: %lld requests failed\n", static_cast<long long>(failures));
    return 1;
  }

  std::printf("\nlatency, kept-alive connection, %d requests each, alternating:\n", requests);
  print_latency("GET /health", health);
  print_latency("POST /tokenize", tok);
  std::printf("\nstreaming time to first event, %zu streamed chats each, alternating:\n", ttfb.direct.size());
  print_latency("first SSE event", ttfb);

  std::printf("\nthroughput, %d concurrent kept-alive clients, %.1f s per run, runs alternate:\n", clients, seconds);
  for (const auto& [label, method, path, body] :
       std::vector<std::tuple<const char*, const char*, const char*, std::string>>{
           {"completion max_tokens 4", "POST", "/v1/completions", completion}, {"GET /health", "GET", "/health", ""}}) {
    double d = 0, s = 0;
    int64_t direct_errors = 0, serve_errors = 0;
    std::string per_round;
    for (int round = 0; round < rounds; ++round) {
      double rd = throughput(direct, clients, seconds, method, path, body, &direct_errors);
      double rs = throughput(proxied, clients, seconds, method, path, body, &serve_errors);
      d += rd, s += rs;
      char buf[32];
      std::snprintf(buf, sizeof(buf), " %.1f%%", 100.0 * rs / rd);
      per_round += buf;
    }
    std::printf("  %-26s direct %9.1f req/s   serve %9.1f req/s   ratio %6.1f%% (rounds:%s)   failed %lld / %lld\n",
                label, d / rounds, s / rounds, 100.0 * s / d, per_round.c_str(),
                static_cast<long long>(direct_errors), static_cast<long long>(serve_errors));
    failures += direct_errors + serve_errors;
  }
  serve.signal(SIGTERM);
  serve.wait(std::chrono::seconds(20));
  if (failures > 0) std::fprintf(stderr, "serve_perftest: %lld requests failed\n", static_cast<long long>(failures));
  return failures > 0 ? 1 : 0;
}

}  // namespace
}  // namespace onebit::testing

int main(int argc, char** argv) {
  try {
    return onebit::testing::perftest(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "serve_perftest: " << e.what() << "\n";
    return 1;
  }
}
