// End to end with the real engine: `1bit serve` runs the pinned llama-server on a random-weight
// model written by 1bit synth, and the engine's endpoints answer through the proxy.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "http/conn.h"
#include "model/synth.h"
#include "subprocess.h"
#include "test_support.h"

namespace onebit::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

class ServeEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    SynthOptions o;
    o.vocab_dir = vocab_dir();
    write_synth_model(*find_synth_shape("tiny-llama"), o, dir_->file("tiny.gguf"));
    serve_ = new Subprocess({onebit_binary(), "serve", "-m", dir_->file("tiny.gguf"), "--port", "0", "-c", "1024",
                             "--", "--metrics", "--slots"},
                            {}, dir_->path());
    port_ = serve_ready_port(*serve_);
    ASSERT_GT(port_, 0) << serve_->err();
    auto kids = child_pids(serve_->pid());
    ASSERT_EQ(kids.size(), 1u);
    engine_pid_ = kids[0];
  }
  static void TearDownTestSuite() {
    delete serve_;
    delete dir_;
  }

  static HttpResult post(const std::string& path, const json& body) {
    return http_fetch("127.0.0.1", port_, "POST", path, body.dump(), {{"Content-Type", "application/json"}}, 60000);
  }

  static TempDir* dir_;
  static Subprocess* serve_;
  static int port_;
  static pid_t engine_pid_;
};

TempDir* ServeEngineTest::dir_ = nullptr;
Subprocess* ServeEngineTest::serve_ = nullptr;
int ServeEngineTest::port_ = 0;
pid_t ServeEngineTest::engine_pid_ = 0;

TEST_F(ServeEngineTest, ChatCompletion) {
  HttpResult r = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Say hello."}}}},
                                               {"max_tokens", 12}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body << r.error;
  json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_FALSE(j["choices"][0]["message"]["content"].get<std::string>().empty());
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  EXPECT_GT(j["timings"]["predicted_per_second"].get<double>(), 0);
  EXPECT_GT(j["timings"]["prompt_per_second"].get<double>(), 0);
}

TEST_F(ServeEngineTest, StreamedCompletion) {
  HttpResult r = post("/v1/completions", {{"prompt", "def add(a, b):"}, {"max_tokens", 8}, {"temperature", 0}, {"stream", true}});
  ASSERT_EQ(r.status, 200) << r.body << r.error;
  const std::string* type = find_header(r.headers, "Content-Type");
  ASSERT_NE(type, nullptr);
  EXPECT_EQ(type->rfind("text/event-stream", 0), 0u);
  size_t events = 0, pos = 0;
  json last;
  while ((pos = r.body.find("data: ", pos)) != std::string::npos) {
    size_t end = r.body.find("\n\n", pos);
    std::string data = r.body.substr(pos + 6, end - pos - 6);
    if (data != "[DONE]") last = json::parse(data);
    ++events;
    pos = end;
  }
  EXPECT_GE(events, 9u);  // eight tokens, a final chunk, [DONE]
  EXPECT_NE(r.body.find("data: [DONE]"), std::string::npos);
  EXPECT_TRUE(last.contains("timings")) << last.dump();
  EXPECT_EQ(last["timings"]["predicted_n"], 8);
}

TEST_F(ServeEngineTest, EngineEndpointsPassThrough) {
  HttpResult tok = post("/tokenize", {{"content", "hello world"}});
  ASSERT_EQ(tok.status, 200);
  json tokens = json::parse(tok.body)["tokens"];
  EXPECT_GE(tokens.size(), 2u);
  HttpResult detok = post("/detokenize", {{"tokens", tokens}});
  ASSERT_EQ(detok.status, 200);
  EXPECT_NE(json::parse(detok.body)["content"].get<std::string>().find("hello world"), std::string::npos);
  HttpResult tmpl = post("/apply-template", {{"messages", {{{"role", "user"}, {"content", "x"}}}}});
  ASSERT_EQ(tmpl.status, 200);
  EXPECT_NE(json::parse(tmpl.body)["prompt"].get<std::string>().find("<|im_start|>user"), std::string::npos);
  for (const char* path : {"/props", "/slots", "/v1/models", "/models", "/health", "/v1/health"}) {
    HttpResult r = http_fetch("127.0.0.1", port_, "GET", path);
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    EXPECT_TRUE(json::parse(r.body, nullptr, false).is_structured() || r.body.empty()) << path;
  }
  HttpResult metrics = http_fetch("127.0.0.1", port_, "GET", "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("llamacpp:"), std::string::npos);
}

// A model may emit bytes that are not UTF-8 (random weights do, often): the answer still ends
// with its timings, streamed or not, instead of the engine's "does not match the expected
// Content-only format" error (patches/llama.cpp/0004). The byte token <0xFF> is forced here.
TEST_F(ServeEngineTest, OutputThatIsNotUtf8StillEndsWithTimings) {
  // In the llama SPM vocabulary the byte tokens <0x00>..<0xFF> are ids 3..258; the engine shows a
  // lone 0xFF as U+FFFD.
  const int byte_ff = 258;
  HttpResult piece = post("/detokenize", {{"tokens", {byte_ff}}});
  ASSERT_EQ(piece.status, 200) << piece.body;
  ASSERT_EQ(json::parse(piece.body)["content"], "\xEF\xBF\xBD") << piece.body;
  const json body = {{"prompt", "Once upon a time"}, {"n_predict", 6}, {"temperature", 0},
                     {"logit_bias", {{byte_ff, 100}}}};
  HttpResult plain = post("/completion", body);
  ASSERT_EQ(plain.status, 200) << plain.body;
  const json answer = json::parse(plain.body);
  EXPECT_EQ(answer["timings"]["predicted_n"], 6) << plain.body;

  json streamed = body;
  streamed["stream"] = true;
  HttpResult r = post("/completion", streamed);
  ASSERT_EQ(r.status, 200) << r.body;
  const size_t last = r.body.rfind("data: ");
  ASSERT_NE(last, std::string::npos) << r.body;
  const json end = json::parse(r.body.substr(last + 6), nullptr, false);
  EXPECT_FALSE(end.contains("error")) << r.body;
  EXPECT_EQ(end["timings"]["predicted_n"], 6) << r.body;
}

// The engine's own port turns away everyone but serve: it demands a key that only serve knows,
// handed over in the environment, never on the command line.
TEST_F(ServeEngineTest, TheEngineAnswersOnlyServe) {
  const std::vector<std::string> argv = proc_strings(engine_pid_, "cmdline");
  const auto port_at = std::find(argv.begin(), argv.end(), "--port");
  ASSERT_NE(port_at, argv.end());
  const int engine_port = std::atoi((port_at + 1)->c_str());
  const std::string key = proc_env(engine_pid_, "LLAMA_API_KEY");
  ASSERT_EQ(key.size(), 32u);
  for (const std::string& arg : argv) EXPECT_EQ(arg.find(key), std::string::npos) << arg;

  EXPECT_EQ(http_fetch("127.0.0.1", engine_port, "GET", "/v1/models").status, 401);
  EXPECT_EQ(http_fetch("127.0.0.1", engine_port, "GET", "/v1/models", "", {{"Authorization", "Bearer nope"}}).status, 401);
  EXPECT_EQ(http_fetch("127.0.0.1", engine_port, "GET", "/v1/models", "", {{"Authorization", "Bearer " + key}}).status, 200);
  EXPECT_EQ(http_fetch("127.0.0.1", engine_port, "GET", "/health").status, 200);
  // Through serve, a client's own Authorization header does not get in the way.
  EXPECT_EQ(http_fetch("127.0.0.1", port_, "GET", "/v1/models", "", {{"Authorization", "Bearer whatever"}}).status, 200);
}

// The engine's web UI (built from its sources when npm is at hand) comes through at /. The engine
// build records whether it wanted the UI and whether it has it: a UI build that failed must not
// pass unnoticed.
TEST_F(ServeEngineTest, WebUi) {
  std::ifstream info(engine_prefix() + "/engine.json");
  const json engine = json::parse(info, nullptr, false);
  ASSERT_TRUE(engine.is_object() && engine.contains("web_ui") && engine.contains("web_ui_wanted"))
      << engine_prefix() << "/engine.json";
  EXPECT_EQ(engine["web_ui"], engine["web_ui_wanted"]) << "the web UI did not build (see the engine cache's ui/build.log)";
  HttpResult root = http_fetch("127.0.0.1", port_, "GET", "/", "", {{"Accept-Encoding", "gzip"}});
  if (!engine["web_ui"].get<bool>()) {
    EXPECT_EQ(root.status, 404);
    return;
  }
  ASSERT_EQ(root.status, 200);
  EXPECT_EQ(find_header(root.headers, "Content-Type")->rfind("text/html", 0), 0u);
  EXPECT_EQ(*find_header(root.headers, "Content-Encoding"), "gzip");
  EXPECT_EQ(root.body.substr(0, 2), "\x1f\x8b");  // a gzip stream, passed through untouched
  HttpResult icon = http_fetch("127.0.0.1", port_, "GET", "/favicon.svg", "", {{"Accept-Encoding", "gzip"}});
  EXPECT_EQ(icon.status, 200);
}

// Runs last (gtest keeps declaration order): a clean stop leaves nothing behind.
TEST_F(ServeEngineTest, StopsCleanly) {
  ASSERT_TRUE(process_alive(engine_pid_));
  serve_->signal(SIGTERM);
  auto code = serve_->wait(20s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0) << serve_->err();
  EXPECT_TRUE(wait_process_gone(engine_pid_, 2s));
  EXPECT_NE(serve_->err().find("1bit serve: stopping"), std::string::npos);
}

// Embeddings pass through too, from an engine started for them (its own serve: the engine
// serves embeddings only when told to).
TEST(ServeEngineEmbeddings, PassThrough) {
  TempDir dir;
  SynthOptions o;
  o.vocab_dir = vocab_dir();
  write_synth_model(*find_synth_shape("tiny-llama"), o, dir.file("tiny.gguf"));
  Subprocess serve({onebit_binary(), "serve", "-m", dir.file("tiny.gguf"), "--port", "0", "-c", "512", "--",
                    "--embeddings", "--pooling", "mean"},
                   {}, dir.path());
  const int port = serve_ready_port(serve);
  ASSERT_GT(port, 0) << serve.err();
  HttpResult r = http_fetch("127.0.0.1", port, "POST", "/v1/embeddings",
                            json{{"input", "hello world"}, {"model", "tiny"}}.dump(),
                            {{"Content-Type", "application/json"}}, 60000);
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["data"][0]["embedding"].size(), 64u);  // tiny-llama is 64 wide
}

}  // namespace
}  // namespace onebit::testing
