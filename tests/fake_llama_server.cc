// A stand-in for llama-server in serve's tests: it records the argv and environment it was
// started with and behaves as the environment says (slow load, death during load, a stream of
// timed chunks), so the tests can check what serve does around the engine. Built on cpp-httplib,
// an HTTP implementation independent of 1bit's own.
//
//   FAKE_RECORD=FILE          write {"pid", "argv", "env"} as JSON at start
//   FAKE_EVENTS=FILE          append one line per event ("cancelled", "request POST /x")
//   FAKE_LOAD_MS=N            /health answers 503 for N ms
//   FAKE_EXIT_DURING_LOAD=C   print some log lines, then exit with code C while loading
//   FAKE_EXIT_AFTER_MS=N      exit with code 7 N ms after start
//   FAKE_CHUNKS=N, FAKE_CHUNK_MS=M   a stream is N chunks M ms apart (default 5, 50)
//   FAKE_DEVICES="A;B"        what --list-devices prints
//   FAKE_NO_TIMINGS=1         completions carry no "timings"
//   FAKE_STREAM_ERROR=MSG     a stream's last event is {"error": {"message": MSG}}, as the engine
//                             sends when a request fails after the stream began
//   FAKE_FAST_FLAG=F          when argv holds flag F, every speed in "timings" is doubled
//   FAKE_FAST_ENV=V           when the environment has the variable V, likewise
//   FAKE_FAST_DECODE_ARGS="W..."  when argv holds the words W... in a row, decode speed doubles
//   FAKE_SLOW_PROMPT_ARGS="W..."  when argv holds them, prompt speed halves
//   FAKE_ALTER_ARGS="W..."    when argv holds them, generated text differs
//   FAKE_CTX=N                /props reports a context of N tokens
//   FAKE_FIRST_TOKEN_MS=N     a stream's first chunk comes N ms after the request
//   LLAMA_API_KEY=K           as llama-server: every route but /health wants "Authorization: Bearer K"
//   FAKE_STRANGER=FILE        once per FILE: another program (its own session, outliving this
//                             one) takes --port and answers every GET with 200; its pid goes to
//                             FILE. Then this fake exits with code 1, as llama-server does when it
//                             cannot bind, or with FAKE_STRANGER_STAY=1 keeps running, not listening.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

extern char** environ;

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

std::mutex g_events_mu;
void event(const std::string& line) {
  const char* path = std::getenv("FAKE_EVENTS");
  if (!path) return;
  std::lock_guard<std::mutex> lock(g_events_mu);
  std::ofstream(path, std::ios::app) << line << "\n";
}

std::string arg_after(int argc, char** argv, const std::string& flag, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == flag) return argv[i + 1];
  return fallback;
}

double g_speed = 1.0;         // FAKE_FAST_FLAG's and FAKE_FAST_ENV's factor
double g_prompt_speed = 1.0;  // FAKE_SLOW_PROMPT_ARGS's
double g_decode_speed = 1.0;  // FAKE_FAST_DECODE_ARGS's

json timings(int n) {
  return {{"prompt_n", 3}, {"prompt_ms", 1.0}, {"prompt_per_second", 3000.0 * g_speed * g_prompt_speed},
          {"predicted_n", n}, {"predicted_ms", 10.0 * n}, {"predicted_per_second", 100.0 * g_speed * g_decode_speed},
          {"draft_n", 0}, {"draft_n_accepted", 0}};
}

// Whether argv holds the words of the variable `name` in a row.
bool argv_holds(int argc, char** argv, const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return false;
  std::istringstream in(value);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  for (int i = 1; i + static_cast<int>(words.size()) <= argc; ++i) {
    bool all = true;
    for (size_t j = 0; j < words.size() && all; ++j) all = words[j] == argv[i + static_cast<int>(j)];
    if (all && !words.empty()) return true;
  }
  return false;
}

size_t word_count(const std::string& s) {
  std::istringstream in(s);
  size_t n = 0;
  std::string w;
  while (in >> w) ++n;
  return n;
}

// As llama-server does: a port whose old connections sit in TIME_WAIT is free to take.
void reuse_address(httplib::Server& srv) {
  srv.set_socket_options([](int sock) {
    int one = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  });
}

// Starts the stranger of FAKE_STRANGER on `port` and returns once it listens.
void start_stranger(const std::string& pid_file, int port) {
  int ready[2];
  if (pipe(ready) != 0) std::exit(90);
  const pid_t pid = fork();
  if (pid < 0) std::exit(91);
  if (pid == 0) {
    setsid();
    if (fork() != 0) _exit(0);  // the stranger is a grandchild, nobody's child in the test
    // Nothing of the engine's output pipes stays open here: its reader waits for their end.
    for (int fd = 0; fd < 1024; ++fd)
      if (fd != ready[1]) close(fd);
    open("/dev/null", O_RDWR);
    dup2(0, 1);
    dup2(0, 2);
    httplib::Server srv;
    reuse_address(srv);
    srv.Get(".*", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"status":"ok","stranger":true})", "application/json");
    });
    if (!srv.bind_to_port("127.0.0.1", port)) _exit(92);
    std::ofstream(pid_file) << getpid() << "\n";
    if (write(ready[1], "x", 1) != 1) _exit(93);
    close(ready[1]);
    srv.listen_after_bind();
    _exit(0);
  }
  close(ready[1]);
  waitpid(pid, nullptr, 0);
  char c;
  if (read(ready[0], &c, 1) != 1) std::exit(94);
  close(ready[0]);
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--list-devices") {
      std::cout << "Available devices:\n";
      std::string devices = std::getenv("FAKE_DEVICES") ? std::getenv("FAKE_DEVICES") : "";
      if (devices.empty()) std::cout << "  (none)\n";
      std::istringstream in(devices);
      for (std::string d; std::getline(in, d, ';');) std::cout << "  " << d << "\n";
      return 0;
    }
  }
  if (const char* path = std::getenv("FAKE_RECORD")) {
    json env = json::object();
    for (char** e = environ; *e; ++e) {
      std::string kv = *e;
      size_t eq = kv.find('=');
      if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    std::ofstream(std::string(path) + ".tmp") << json{{"pid", getpid()}, {"argv", std::vector<std::string>(argv, argv + argc)}, {"env", env}}.dump();
    std::rename((std::string(path) + ".tmp").c_str(), path);
  }
  std::cerr << "fake: starting, pid " << getpid() << std::endl;
  if (const char* file = std::getenv("FAKE_STRANGER")) {
    struct stat st;
    if (stat(file, &st) != 0) {
      start_stranger(file, std::atoi(arg_after(argc, argv, "--port", "8080").c_str()));
      if (std::getenv("FAKE_STRANGER_STAY")) {
        std::cerr << "fake: the port is another's; waiting" << std::endl;
        while (true) pause();
      }
      std::cerr << "fake: couldn't bind HTTP server socket" << std::endl;
      return 1;
    }
  }
  if (int code = env_int("FAKE_EXIT_DURING_LOAD", 0)) {
    std::cerr << "fake: loading tensors" << std::endl;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::cerr << "fake: failed to allocate 12345 MiB" << std::endl;
    return code;
  }
  if (int ms = env_int("FAKE_EXIT_AFTER_MS", 0)) {
    std::thread([ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      std::cerr << "fake: crashing on purpose" << std::endl;
      _exit(7);
    }).detach();
  }

  if (const char* flag = std::getenv("FAKE_FAST_FLAG"))
    for (int i = 1; i < argc; ++i)
      if (std::string(argv[i]) == flag) g_speed = 2.0;
  if (const char* var = std::getenv("FAKE_FAST_ENV"))
    if (std::getenv(var) != nullptr) g_speed = 2.0;
  if (argv_holds(argc, argv, "FAKE_FAST_DECODE_ARGS")) g_decode_speed = 2.0;
  if (argv_holds(argc, argv, "FAKE_SLOW_PROMPT_ARGS")) g_prompt_speed = 0.5;
  const std::string text_stem = argv_holds(argc, argv, "FAKE_ALTER_ARGS") ? "u" : "t";
  const int context = env_int("FAKE_CTX", 0);
  const int first_token_ms = env_int("FAKE_FIRST_TOKEN_MS", 0);
  const bool with_timings = std::getenv("FAKE_NO_TIMINGS") == nullptr;
  const std::string stream_error = std::getenv("FAKE_STREAM_ERROR") ? std::getenv("FAKE_STREAM_ERROR") : "";
  const std::string model = arg_after(argc, argv, "-m", "?");
  const int port = std::atoi(arg_after(argc, argv, "--port", "8080").c_str());
  const auto started = Clock::now();
  const auto load = std::chrono::milliseconds(env_int("FAKE_LOAD_MS", 0));
  const int chunks = env_int("FAKE_CHUNKS", 5);
  const int chunk_ms = env_int("FAKE_CHUNK_MS", 50);

  httplib::Server srv;
  reuse_address(srv);
  srv.new_task_queue = [] { return new httplib::ThreadPool(64); };
  const char* key = std::getenv("LLAMA_API_KEY");
  srv.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
    event("request " + req.method + " " + req.path);
    if (key != nullptr && *key != '\0' && req.path != "/health" &&
        req.get_header_value("Authorization") != std::string("Bearer ") + key) {
      event("unauthorized " + req.path);
      res.status = 401;
      res.set_content(R"({"error":{"code":401,"message":"Invalid API Key","type":"authentication_error"}})",
                      "application/json");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  srv.Get("/health", [&](const httplib::Request&, httplib::Response& res) {
    if (Clock::now() - started < load) {
      res.status = 503;
      res.set_content(R"({"error":{"code":503,"message":"Loading model","type":"unavailable_error"}})", "application/json");
      return;
    }
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  srv.Get("/v1/models", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(json{{"object", "list"}, {"data", {{{"id", model}, {"object", "model"}}}}}.dump(), "application/json");
  });
  auto completion = [&](const httplib::Request& req, httplib::Response& res) {
    json body = json::parse(req.body, nullptr, false);
    json seen = {{"authorization", req.get_header_value("Authorization")}, {"host", req.get_header_value("Host")},
                 {"body_bytes", req.body.size()}};
    if (body.is_object() && body.value("stream", false)) {
      const bool native = req.path == "/completion";  // llama-server's own API: "content" at the top
      res.set_chunked_content_provider("text/event-stream", [&, with_timings, native](size_t, httplib::DataSink& sink) {
        std::this_thread::sleep_for(std::chrono::milliseconds(first_token_ms));
        for (int i = 0; i < chunks; ++i) {
          const std::string piece = text_stem + std::to_string(i);
          json c = native ? json{{"content", piece}, {"index", i}}
                          : json{{"model", model}, {"index", i}, {"choices", {{{"delta", {{"content", piece}}}}}}};
          if (i == chunks - 1 && with_timings) c["timings"] = timings(chunks);
          if (i == chunks - 1 && !stream_error.empty()) c = {{"error", {{"code", 500}, {"message", stream_error}}}};
          std::string line = "data: " + c.dump() + "\n\n";
          if (!sink.write(line.data(), line.size())) {
            event("cancelled at chunk " + std::to_string(i));
            return false;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(chunk_ms));
        }
        std::string done = "data: [DONE]\n\n";
        if (!sink.write(done.data(), done.size())) {
          event("cancelled at done");
          return false;
        }
        sink.done();
        return true;
      });
      return;
    }
    json out = {{"model", model}, {"choices", {{{"index", 0}, {"message", {{"role", "assistant"}, {"content", "fake"}}}}}},
                {"seen", seen}};
    if (with_timings) out["timings"] = timings(4);
    res.set_content(out.dump(), "application/json");
  };
  srv.Post("/v1/chat/completions", completion);
  srv.Post("/v1/completions", completion);
  srv.Post("/completion", completion);
  srv.Post("/apply-template", [](const httplib::Request& req, httplib::Response& res) {
    json body = json::parse(req.body, nullptr, false);
    std::string prompt;
    if (body.is_object() && body.contains("messages"))
      for (const auto& m : body["messages"]) prompt += m.value("content", "") + " ";
    res.set_content(json{{"prompt", prompt}}.dump(), "application/json");
  });
  srv.Post("/tokenize", [](const httplib::Request& req, httplib::Response& res) {
    json body = json::parse(req.body, nullptr, false);
    std::string content = body.is_object() && body["content"].is_string() ? body["content"].get<std::string>() : "";
    res.set_content(json{{"tokens", std::vector<int>(word_count(content), 1)}}.dump(), "application/json");
  });
  srv.Get("/props", [&](const httplib::Request&, httplib::Response& res) {
    if (context == 0) {
      res.status = 404;
      return;
    }
    res.set_content(json{{"default_generation_settings", {{"n_ctx", context}}}}.dump(), "application/json");
  });
  srv.Post("/echo", [](const httplib::Request& req, httplib::Response& res) { res.set_content(req.body, "application/octet-stream"); });

  signal(SIGPIPE, SIG_IGN);
  if (!srv.bind_to_port("127.0.0.1", port)) {
    std::cerr << "fake: cannot bind port " << port << std::endl;
    return 1;
  }
  std::cerr << "fake: listening on " << port << std::endl;
  srv.listen_after_bind();
  return 0;
}
