#include "base/cli.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "serve/serve_options.h"

namespace onebit {

TEST(ServeOptions, Defaults) {
  ServeOptions o = parse_serve_options({});
  EXPECT_EQ(o.host, "127.0.0.1");
  EXPECT_EQ(o.port, 8080);
  EXPECT_EQ(o.device, "auto");
  EXPECT_EQ(o.load_timeout_s, 600);
  EXPECT_EQ(o.long_from, 2048);
  EXPECT_EQ(o.drafter_kind(), "none");
  EXPECT_FALSE(o.batch_invariant);
}

TEST(ServeOptions, ParsesEveryOption) {
  ServeOptions o = parse_serve_options({"-m", "a.gguf", "--host", "0.0.0.0", "--port=9000", "--device", "cpu", "-c",
                                        "4096", "-fa", "-np", "4", "--draft", "d.gguf", "--draft-max", "8",
                                        "--draft-p-min", "0.5", "--batch-invariant", "--no-recipes", "--dry-run", "--load-timeout", "30",
                                        "--api-key", "k", "--long-model", "l.gguf", "--long-from", "100", "--",
                                        "-ub", "1024"});
  EXPECT_EQ(o.model, "a.gguf");
  EXPECT_EQ(o.host, "0.0.0.0");
  EXPECT_EQ(o.port, 9000);
  EXPECT_EQ(o.device, "cpu");
  EXPECT_EQ(o.ctx_size, 4096);
  EXPECT_EQ(o.flash_attn, "on");
  EXPECT_EQ(o.parallel, 4);
  EXPECT_EQ(o.drafter_kind(), "draft");
  EXPECT_EQ(o.draft_max, 8);
  EXPECT_EQ(o.draft_p_min, "0.5");
  EXPECT_TRUE(o.batch_invariant);
  EXPECT_TRUE(o.no_recipes);
  EXPECT_TRUE(o.dry_run);
  EXPECT_EQ(o.load_timeout_s, 30);
  EXPECT_EQ(o.api_key, "k");
  EXPECT_EQ(o.long_from, 100);
  EXPECT_EQ(o.engine_args, (std::vector<std::string>{"-ub", "1024"}));
}

TEST(ServeOptions, FlashAttnTakesAnOptionalValue) {
  EXPECT_EQ(parse_serve_options({"-fa", "off"}).flash_attn, "off");
  EXPECT_EQ(parse_serve_options({"--flash-attn", "auto"}).flash_attn, "auto");
  ServeOptions o = parse_serve_options({"-fa", "-m", "x.gguf"});
  EXPECT_EQ(o.flash_attn, "on");
  EXPECT_EQ(o.model, "x.gguf");
}

TEST(ServeOptions, MtpTakesAnOptionalHeadFile) {
  ServeOptions own = parse_serve_options({"--mtp", "-m", "x.gguf"});
  EXPECT_TRUE(own.mtp);
  EXPECT_EQ(own.mtp_head, "");
  EXPECT_EQ(own.model, "x.gguf");
  EXPECT_EQ(own.drafter_kind(), "mtp");
  EXPECT_EQ(parse_serve_options({"--mtp", "heads/h.gguf"}).mtp_head, "heads/h.gguf");
  EXPECT_EQ(parse_serve_options({"--mtp=head.bin"}).mtp_head, "head.bin");
  EXPECT_EQ(parse_serve_options({"--eagle3", "e.gguf"}).drafter_kind(), "eagle3");
}

// llama-server's own options work on serve's command line, with their values, before what
// comes after "--"; serve's options keep their meaning where a name is both.
TEST(ServeOptions, EngineOptionsPassThrough) {
  ServeOptions o = parse_serve_options({"-m", "x.gguf", "-ub", "1024", "--temp=0.7", "--no-mmap", "-ctk", "q8_0", "-c",
                                        "2048", "--", "-t", "2"});
  EXPECT_EQ(o.engine_args, (std::vector<std::string>{"-ub", "1024", "--temp=0.7", "--no-mmap", "-ctk", "q8_0", "-t", "2"}));
  EXPECT_EQ(o.ctx_size, 2048);
  EXPECT_EQ(o.model, "x.gguf");
}

TEST(ServeOptions, EnvironmentGivesDefaults) {
  setenv("ONEBIT_API_KEY", "from-env", 1);
  setenv("ONEBIT_LLAMA_SERVER", "/opt/llama-server", 1);
  ServeOptions o = parse_serve_options({});
  EXPECT_EQ(o.api_key, "from-env");
  EXPECT_EQ(o.llama_server, "/opt/llama-server");
  EXPECT_EQ(parse_serve_options({"--api-key", "flag"}).api_key, "flag");
  unsetenv("ONEBIT_API_KEY");
  unsetenv("ONEBIT_LLAMA_SERVER");
}

void expect_error(const std::vector<std::string>& args, const std::string& needle) {
  try {
    parse_serve_options(args);
    FAIL() << "no error for " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ServeOptions, RejectsBadInput) {
  expect_error({"--bogus"}, "unknown option --bogus");
  expect_error({"-ub"}, "-ub needs a value");
  expect_error({"-ub", "--", "-t", "2"}, "-ub needs a value");
  expect_error({"-m"}, "-m needs a value");
  expect_error({"--port", "70000"}, "--port: 70000 is out of range");
  expect_error({"--port", "http"}, "--port: \"http\" is not a whole number");
  expect_error({"--device", "gpu"}, "--device: \"gpu\" is not one of auto, cpu, cuda, vulkan");
  expect_error({"--draft", "a", "--mtp"}, "exclude each other");
  expect_error({"--dflash", "a", "--draft", "b"}, "exclude each other");
  expect_error({"--eagle3", "a", "--mtp"}, "exclude each other");
  // Without .gguf the word after --mtp is not its head file (--mtp=FILE is).
  expect_error({"--mtp", "head.bin"}, "unexpected argument \"head.bin\"");
  expect_error({"--draft-max", "4"}, "need a drafter");
  expect_error({"--draft", "d", "--draft-p-min", "1.5"}, "--draft-p-min: 1.5 is out of range");
  expect_error({"--long-from", "10"}, "--long-from needs --long-model");
  expect_error({"model.gguf"}, "unexpected argument \"model.gguf\"");
  expect_error({"--dry-run=yes"}, "--dry-run takes no value");
}

TEST(Cli, FormatsEveryOption) {
  std::string usage = serve_usage();
  for (const char* name : {"-m, --model", "--host", "--port", "--device", "-c, --ctx-size", "-fa, --flash-attn",
                           "-np, --parallel", "--draft FILE", "--dflash", "--mtp", "--draft-max", "--draft-p-min",
                           "--recipes", "--no-recipes", "--dry-run", "--llama-server", "--load-timeout", "--api-key",
                           "--long-model", "--long-from"})
    EXPECT_NE(usage.find(name), std::string::npos) << name;
}

}  // namespace onebit
