// Hadamard-rotated Q4_0 files through `1bit serve` and the real engine: the shipped 1bit-tiny pair
// rotated by `1bit rotate` serves and answers like its source, and a rotated drafter beside a
// plain target (or the reverse) leaves the greedy answer the target's alone. Perplexity and KLD
// bounds are engine_rotate_test.sh's.
#include <signal.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "http/conn.h"
#include "subprocess.h"
#include "test_support.h"

namespace onebit::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

const std::string kPrompt = "Write a Python function `is_palindrome`: Return True if a string reads the same backwards.";

class ServeRotatedTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    for (const auto& [from, to] : {std::pair{"/models/1bit-tiny-32m-q8_0.gguf", "target-h32.gguf"},
                                   std::pair{"/models/1bit-tiny-draft-6m-q8_0.gguf", "draft-h32.gguf"}}) {
      RunResult r = run({onebit_binary(), "rotate", source_dir() + from, dir_->file(to), "--threads", "2"});
      ASSERT_EQ(r.code, 0) << r.err;
    }
  }
  static void TearDownTestSuite() { delete dir_; }

  // The greedy answer of `1bit serve ARGS...` to kPrompt, and its drafted token count.
  static std::pair<std::string, int> answer(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {onebit_binary(), "serve", "--port", "0"};
    argv.insert(argv.end(), args.begin(), args.end());
    TempDir cwd;
    Subprocess serve(argv, {}, cwd.path());
    const int port = serve_ready_port(serve);
    EXPECT_GT(port, 0) << serve.err();
    if (port <= 0) return {"", 0};
    HttpResult r = http_fetch("127.0.0.1", port, "POST", "/v1/chat/completions",
                              json{{"messages", {{{"role", "user"}, {"content", kPrompt}}}}, {"max_tokens", 40},
                                   {"temperature", 0}}.dump(),
                              {{"Content-Type", "application/json"}}, 120000);
    EXPECT_EQ(r.status, 200) << r.body << r.error;
    json j = json::parse(r.body, nullptr, false);
    serve.signal(SIGTERM);
    EXPECT_EQ(serve.wait(20s), 0);
    if (!j.is_object()) return {"", 0};
    return {j["choices"][0]["message"]["content"].get<std::string>(), j["timings"].value("draft_n", 0)};
  }

  static std::string target() { return source_dir() + "/models/1bit-tiny-32m-q8_0.gguf"; }
  static std::string drafter() { return source_dir() + "/models/1bit-tiny-draft-6m-q8_0.gguf"; }
  static TempDir* dir_;
};

TempDir* ServeRotatedTest::dir_ = nullptr;

TEST_F(ServeRotatedTest, FactsSayTheEngineRunsIt) {
  RunResult r = run({onebit_binary(), "facts", dir_->file("target-h32.gguf"), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  json f = json::parse(r.out);
  EXPECT_EQ(f["hadamard_q4_0"], true);
  EXPECT_EQ(f["hadamard_q4_0_runtime"], true);
  EXPECT_EQ(f["file_type_name"], "Q4_0");
}

TEST_F(ServeRotatedTest, ARotatedModelAnswersLikeItsSource) {
  const std::string source = answer({"-m", target()}).first;
  const std::string rotated = answer({"-m", dir_->file("target-h32.gguf")}).first;
  // Products computed without the activations' rotation are noise, and so would the answer be.
  ASSERT_EQ(source.rfind("def ", 0), 0u) << source;
  const std::string first_line = source.substr(0, source.find('\n'));
  EXPECT_EQ(rotated.substr(0, rotated.find('\n')), first_line) << "source:\n" << source << "\nrotated:\n" << rotated;
}

TEST_F(ServeRotatedTest, RotatedAndPlainFilesDraftForEachOther) {
  const auto plain_alone = answer({"-m", target()});
  const auto plain_with_rotated = answer({"-m", target(), "--draft", dir_->file("draft-h32.gguf")});
  EXPECT_GT(plain_with_rotated.second, 0);
  EXPECT_EQ(plain_with_rotated.first, plain_alone.first);
  const auto rotated_alone = answer({"-m", dir_->file("target-h32.gguf")});
  const auto rotated_with_plain = answer({"-m", dir_->file("target-h32.gguf"), "--draft", drafter()});
  EXPECT_GT(rotated_with_plain.second, 0);
  EXPECT_EQ(rotated_with_plain.first, rotated_alone.first);
}

}  // namespace
}  // namespace onebit::testing
