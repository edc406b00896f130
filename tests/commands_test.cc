// The small commands as a user runs them: facts (text and JSON, recipe verdicts, errors), synth
// (a model that facts can read back), rotate (the shipped model, and bad inputs), help and version.
#include <algorithm>
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "subprocess.h"
#include "test_support.h"

namespace onebit::testing {
namespace {

using nlohmann::json;

TEST(FactsCommand, PrintsFactsAndRecipeVerdicts) {
  TempDir dir;
  write_gguf(dir.file("moe.gguf"), {{"general.architecture", std::string("qwen3moe")},
                                    {"general.file_type", uint32_t{2}},
                                    {"qwen3moe.expert_count", uint32_t{64}},
                                    {"qwen3moe.context_length", uint32_t{32768}}});
  write_file(dir.file("r.json"), R"({"recipes": [
    {"id": "moe-cuda", "match": {"moe": true, "device": ["cuda"]}, "args": ["-ub", "1024"], "measured": "m"},
    {"id": "dense-only", "match": {"moe": false}, "args": ["-b", "256"], "measured": "m"},
    {"id": "moe-h200", "match": {"moe": true, "gpu": ["NVIDIA H200"]}, "args": ["-ub", "2048"], "measured": "m"}]})");
  RunResult text = run({onebit_binary(), "facts", dir.file("moe.gguf"), "--recipes", dir.file("r.json")});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("architecture    qwen3moe\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("file type       Q4_0 (2)\n"), std::string::npos);
  EXPECT_NE(text.out.find("moe             yes (64 experts)\n"), std::string::npos);
  EXPECT_NE(text.out.find("context length  32768\n"), std::string::npos);
  EXPECT_NE(text.out.find("    moe-cuda: applies on device cuda\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("    dense-only: does not apply: needs a dense model\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("    moe-h200: applies on device cuda (gpu NVIDIA H200)\n"), std::string::npos) << text.out;

  RunResult j = run({onebit_binary(), "facts", dir.file("moe.gguf"), "--json", "--recipes", dir.file("r.json")});
  ASSERT_EQ(j.code, 0) << j.err;
  json f = json::parse(j.out);
  EXPECT_EQ(f["architecture"], "qwen3moe");
  EXPECT_EQ(f["moe"], true);
  EXPECT_EQ(f["expert_count"], 64);
  EXPECT_EQ(f["file_type_name"], "Q4_0");
  EXPECT_EQ(f["hadamard_q4_0"], false);
  EXPECT_EQ(f["hadamard_q4_0_runtime"], true);  // every build of 1bit's engine carries it
  EXPECT_EQ(f["recipe_layers"], json::parse(R"([{"layer": "file", "origin": ")" + dir.file("r.json") + "\"}]"));
  EXPECT_EQ(f["recipes"][0]["layer"], "file");
  EXPECT_EQ(f["recipes"][0]["applies"], true);
  EXPECT_EQ(f["recipes"][0]["devices"], json({"cuda"}));
  EXPECT_EQ(f["recipes"][1]["applies"], false);
  EXPECT_EQ(f["recipes"][1]["reason"], "needs a dense model");
  EXPECT_EQ(f["recipes"][2]["gpus"], json({"NVIDIA H200"}));

  RunResult builtin = run({onebit_binary(), "facts", dir.file("moe.gguf")});
  EXPECT_NE(builtin.out.find("\nrecipes, judged for serving on this machine without a drafter:\n  built-in recipes\n"),
            std::string::npos)
      << builtin.out;
}

TEST(FactsCommand, BadInput) {
  TempDir dir;
  write_file(dir.file("x.gguf"), "nope");
  RunResult r = run({onebit_binary(), "facts", dir.file("x.gguf")});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "1bit facts: " + dir.file("x.gguf") + ": not a GGUF file (no GGUF magic at the start)\n");
  EXPECT_EQ(r.out, "");
  RunResult none = run({onebit_binary(), "facts"});
  EXPECT_EQ(none.code, 1);
  EXPECT_EQ(none.err, "1bit facts: expected one MODEL file (see 1bit facts --help)\n");
}

TEST(SynthCommand, WritesAModelFactsCanRead) {
  TempDir dir;
  RunResult r = run({onebit_binary(), "synth", "--like", "tiny-qwen3", "--type", "q8_0", "-o", dir.file("q.gguf")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("100%"), std::string::npos);
  RunResult f = run({onebit_binary(), "facts", dir.file("q.gguf"), "--json"});
  ASSERT_EQ(f.code, 0) << f.err;
  json j = json::parse(f.out);
  EXPECT_EQ(j["architecture"], "qwen3");
  EXPECT_EQ(j["file_type_name"], "Q8_0");
  EXPECT_EQ(j["context_length"], 4096);
  // Same seed, same bytes; another seed, other bytes.
  run({onebit_binary(), "synth", "--like", "tiny-qwen3", "--type", "q8_0", "-o", dir.file("q2.gguf")});
  run({onebit_binary(), "synth", "--like", "tiny-qwen3", "--type", "q8_0", "--seed", "7", "-o", dir.file("q3.gguf")});
  EXPECT_EQ(read_file(dir.file("q.gguf")), read_file(dir.file("q2.gguf")));
  EXPECT_NE(read_file(dir.file("q.gguf")), read_file(dir.file("q3.gguf")));
}

TEST(SynthCommand, BadInput) {
  TempDir dir;
  RunResult shape = run({onebit_binary(), "synth", "--like", "gpt-5", "-o", dir.file("x.gguf")});
  EXPECT_EQ(shape.code, 1);
  EXPECT_EQ(shape.err, "1bit synth: --like: unknown shape \"gpt-5\" (see 1bit synth --help)\n");
  RunResult type = run({onebit_binary(), "synth", "--like", "tiny-llama", "--type", "q2_k", "-o", dir.file("x.gguf")});
  EXPECT_EQ(type.code, 1);
  EXPECT_EQ(type.err, "1bit synth: unknown weight type \"q2_k\" (known: f32, f16, q8_0, q4_0)\n");
  RunResult out = run({onebit_binary(), "synth", "--like", "tiny-llama", "-o", dir.file("no/such/dir/x.gguf")});
  EXPECT_EQ(out.code, 1);
  EXPECT_EQ(out.err, "1bit synth: " + dir.file("no/such/dir/x.gguf") + ": cannot write: No such file or directory\n");
}

TEST(RotateCommand, RotatesTheShippedModel) {
  TempDir dir;
  RunResult r = run({onebit_binary(), "rotate", source_dir() + "/models/1bit-tiny-32m-q8_0.gguf", dir.file("h32.gguf")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind(dir.file("h32.gguf") + ": 56 tensors rotated and quantized to Q4_0, 34 kept as they were, ", 0), 0u) << r.out;
  EXPECT_NE(r.err.find("tensor 90 of 90"), std::string::npos) << r.err;
  json f = json::parse(run({onebit_binary(), "facts", dir.file("h32.gguf"), "--json"}).out);
  EXPECT_EQ(f["hadamard_q4_0"], true);
}

// Each bad input: exit 1, one line naming the problem, and no output file, whole or partial.
TEST(RotateCommand, BadInput) {
  TempDir dir;
  const std::string tiny = source_dir() + "/models/1bit-tiny-32m-q8_0.gguf";
  const std::string q4 = source_dir() + "/models/1bit-small-145m-q4_0.gguf";
  ASSERT_EQ(run({onebit_binary(), "rotate", tiny, dir.file("h32.gguf")}).code, 0);
  const std::string tiny_bytes = read_file(tiny);
  write_file(dir.file("cut.gguf"), tiny_bytes.substr(0, tiny_bytes.size() / 2));
  write_file(dir.file("imatrix.dat"), "not an importance matrix");
  struct Case {
    std::vector<std::string> args;
    std::string err;
  };
  const std::string out = dir.file("out.gguf");
  const std::vector<Case> cases = {
      {{q4, out}, q4 + ": tensor blk.0.attn_q.weight is q4_0; rotating weights already rounded to few bits adds their "
                       "error: rotate from an F32, F16, BF16 or Q8_0 file"},
      {{dir.file("h32.gguf"), out}, dir.file("h32.gguf") + ": is already rotated (onebit.hadamard_q4_0 = 32)"},
      {{dir.file("cut.gguf"), out}, dir.file("cut.gguf") + ": truncated: tensor "},
      {{tiny, dir.file("no/such/dir/x.gguf")}, dir.file("no/such/dir/x.gguf.part") + ": cannot write: No such file or directory"},
      {{tiny, out, "--imatrix", dir.file("imatrix.dat")},
       dir.file("imatrix.dat") + ": not a GGUF importance matrix (llama-imatrix writes one with -o FILE.gguf)"},
      {{tiny}, "expected IN.gguf and OUT.gguf (see 1bit rotate --help)"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {onebit_binary(), "rotate"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    RunResult r = run(argv);
    EXPECT_EQ(r.code, 1) << c.err;
    EXPECT_EQ(r.err.rfind("1bit rotate: " + c.err, 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.out, "");
    for (const char* left : {"out.gguf", "out.gguf.part"}) EXPECT_FALSE(std::filesystem::exists(dir.file(left))) << c.err;
  }
}

TEST(Dispatcher, HelpAndVersion) {
  RunResult help = run({onebit_binary(), "--help"});
  EXPECT_EQ(help.code, 0);
  for (const char* s : {"serve", "facts", "synth", "rotate", "bench", "tune", "recipes", "lemonade", "1bit help COMMAND", "ONEBIT_API_KEY"})
    EXPECT_NE(help.out.find(s), std::string::npos) << s;
  // The list only: each command's options are in its own help.
  EXPECT_EQ(help.out.find("--long-from"), std::string::npos);
  for (const std::vector<std::string>& serve_help_args :
       {std::vector<std::string>{onebit_binary(), "help", "serve"}, {onebit_binary(), "serve", "--help"}}) {
    RunResult serve_help = run(serve_help_args);
    EXPECT_EQ(serve_help.code, 0);
    EXPECT_EQ(serve_help.out.rfind("usage: 1bit serve", 0), 0u);
    for (const char* s : {"--long-from", "--recipes FILE"}) EXPECT_NE(serve_help.out.find(s), std::string::npos) << s;
  }
  RunResult version = run({onebit_binary(), "version"});
  EXPECT_NE(version.out.find("engine llama.cpp 80fb11ac73e66d89eae2c6a91d8a77428fa733ed"), std::string::npos);
  RunResult bad = run({onebit_binary(), "serv"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(bad.err, "1bit: unknown command \"serv\" (see 1bit --help)\n");
}

}  // namespace
}  // namespace onebit::testing
