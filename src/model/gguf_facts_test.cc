#include "model/gguf_facts.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include "base/error.h"
#include "test_support.h"

namespace onebit {
namespace {

using testing::KvValue;
using testing::TempDir;

std::string error_of(const std::string& path) {
  try {
    read_model_facts(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(GgufFacts, ReadsADenseModel) {
  TempDir dir;
  testing::write_gguf(dir.file("m.gguf"), {{"general.architecture", std::string("llama")},
                                           {"general.name", std::string("Test")},
                                           {"general.file_type", uint32_t{2}},
                                           {"llama.context_length", uint32_t{8192}}});
  ModelFacts f = read_model_facts(dir.file("m.gguf"));
  EXPECT_EQ(f.architecture, "llama");
  EXPECT_EQ(f.name, "Test");
  EXPECT_FALSE(f.moe);
  EXPECT_EQ(f.file_type, 2u);
  EXPECT_EQ(file_type_name(*f.file_type), "Q4_0");
  EXPECT_EQ(f.context_length, 8192u);
  EXPECT_FALSE(f.hadamard_q4_0);
  EXPECT_EQ(f.drafter, "");
  EXPECT_EQ(f.tensor_count, 1);
}

TEST(GgufFacts, ReadsMoeStampAndMtp) {
  TempDir dir;
  testing::write_gguf(dir.file("m.gguf"), {{"general.architecture", std::string("qwen3moe")},
                                           {"qwen3moe.expert_count", uint32_t{128}},
                                           {"qwen3moe.nextn_predict_layers", uint32_t{1}},
                                           {"qwen3moe.block_count", uint32_t{48}},
                                           {"onebit.hadamard_q4_0", uint32_t{32}}},
                      {"token_embd.weight", "blk.0.attn_norm.weight"});
  ModelFacts f = read_model_facts(dir.file("m.gguf"));
  EXPECT_EQ(f.block_count, 48u);
  EXPECT_TRUE(f.moe);
  EXPECT_EQ(f.expert_count, 128);
  EXPECT_TRUE(f.hadamard_q4_0);
  EXPECT_EQ(f.nextn_layers, 1u);
  EXPECT_EQ(trunk_layers(f), 47u);
  EXPECT_EQ(f.drafter, "");  // its MTP layer sits on a model
  EXPECT_FALSE(f.file_type.has_value());
}

TEST(GgufFacts, ReadsEachDrafterKind) {
  TempDir dir;
  testing::write_gguf(dir.file("d.gguf"), {{"general.architecture", std::string("dflash")},
                                           {"dflash.block_size", uint32_t{16}},
                                           {"dflash.embedding_length", uint32_t{4096}},
                                           {"dflash.target_layers", std::vector<int32_t>{2, 9, 16}},
                                           {"tokenizer.ggml.mask_token_id", uint32_t{128002}}});
  ModelFacts f = read_model_facts(dir.file("d.gguf"));
  EXPECT_EQ(f.drafter, "dflash");
  EXPECT_EQ(f.block_size, 16u);
  EXPECT_EQ(f.embedding_length, 4096u);
  EXPECT_EQ(f.target_layers, (std::vector<int64_t>{2, 9, 16}));
  EXPECT_EQ(f.mask_token, 128002u);
  testing::write_gguf(dir.file("e.gguf"), {{"general.architecture", std::string("eagle3")},
                                           {"eagle3.target_layers", std::vector<int32_t>{2, 16, 29}},
                                           {"eagle3.target_hidden_size", uint32_t{4096}}});
  f = read_model_facts(dir.file("e.gguf"));
  EXPECT_EQ(f.drafter, "eagle3");
  EXPECT_EQ(f.target_hidden_size, 4096u);
  EXPECT_FALSE(f.block_size.has_value());
  // Next-token layers without the model under them: a head published apart.
  testing::write_gguf(dir.file("h.gguf"), {{"general.architecture", std::string("qwen35")},
                                           {"qwen35.block_count", uint32_t{33}},
                                           {"qwen35.nextn_predict_layers", uint32_t{1}}},
                      {"token_embd.weight", "output_norm.weight", "blk.32.nextn.eh_proj.weight"});
  f = read_model_facts(dir.file("h.gguf"));
  EXPECT_EQ(f.drafter, "mtp-head");
  EXPECT_EQ(trunk_layers(f), 32u);
  // A negative layer id, or more MTP layers than layers, is a broken file.
  testing::write_gguf(dir.file("bad.gguf"), {{"general.architecture", std::string("dflash")},
                                             {"dflash.target_layers", std::vector<int32_t>{2, -1}}});
  EXPECT_EQ(error_of(dir.file("bad.gguf")), dir.file("bad.gguf") + ": metadata dflash.target_layers holds -1, out of range");
  testing::write_gguf(dir.file("bad2.gguf"), {{"general.architecture", std::string("qwen35")},
                                              {"qwen35.block_count", uint32_t{4}},
                                              {"qwen35.nextn_predict_layers", uint32_t{5}}});
  EXPECT_EQ(error_of(dir.file("bad2.gguf")),
            dir.file("bad2.gguf") + ": metadata qwen35.nextn_predict_layers (5) exceeds qwen35.block_count (4)");
}

TEST(GgufFacts, AcceptsAnyIntegerWidth) {
  TempDir dir;
  testing::write_gguf(dir.file("m.gguf"), {{"general.architecture", std::string("llama")},
                                           {"llama.expert_count", int32_t{8}},
                                           {"llama.context_length", uint64_t{4096}}});
  ModelFacts f = read_model_facts(dir.file("m.gguf"));
  EXPECT_EQ(f.expert_count, 8);
  EXPECT_EQ(f.context_length, 4096u);
}

TEST(GgufFacts, NamesWhatIsWrong) {
  TempDir dir;
  EXPECT_EQ(error_of(dir.file("missing.gguf")), dir.file("missing.gguf") + ": No such file or directory");
  EXPECT_EQ(error_of(dir.path()), dir.path() + ": is a directory, not a GGUF file");

  testing::write_file(dir.file("text.gguf"), "hello, this is not a model\n");
  EXPECT_EQ(error_of(dir.file("text.gguf")), dir.file("text.gguf") + ": not a GGUF file (no GGUF magic at the start)");

  testing::write_file(dir.file("empty.gguf"), "");
  EXPECT_EQ(error_of(dir.file("empty.gguf")), dir.file("empty.gguf") + ": not a GGUF file (no GGUF magic at the start)");

  testing::write_file(dir.file("short.gguf"), std::string("GGUF\x03\0\0\0", 8));
  EXPECT_EQ(error_of(dir.file("short.gguf")), dir.file("short.gguf") + ": truncated GGUF header");

  // A real header cut in the middle of its metadata.
  testing::write_gguf(dir.file("whole.gguf"), {{"general.architecture", std::string("llama")}});
  std::string whole = testing::read_file(dir.file("whole.gguf"));
  testing::write_file(dir.file("cut.gguf"), whole.substr(0, 40));
  EXPECT_NE(error_of(dir.file("cut.gguf")).find(": not a valid GGUF file: "), std::string::npos) << error_of(dir.file("cut.gguf"));

  // An absurd key count.
  std::string absurd = whole;
  absurd.replace(16, 8, std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8));
  testing::write_file(dir.file("absurd.gguf"), absurd);
  EXPECT_NE(error_of(dir.file("absurd.gguf")).find("number of key value pairs"), std::string::npos)
      << error_of(dir.file("absurd.gguf"));

  // An unsupported version.
  std::string v9 = whole;
  v9[4] = 9;
  testing::write_file(dir.file("v9.gguf"), v9);
  EXPECT_NE(error_of(dir.file("v9.gguf")).find("version"), std::string::npos) << error_of(dir.file("v9.gguf"));
}

TEST(GgufFacts, RejectsBadMetadata) {
  TempDir dir;
  testing::write_gguf(dir.file("noarch.gguf"), {{"general.name", std::string("x")}});
  EXPECT_EQ(error_of(dir.file("noarch.gguf")), dir.file("noarch.gguf") + ": GGUF has no general.architecture");

  testing::write_gguf(dir.file("archint.gguf"), {{"general.architecture", uint32_t{1}}});
  EXPECT_EQ(error_of(dir.file("archint.gguf")),
            dir.file("archint.gguf") + ": metadata general.architecture is u32, expected a string");

  testing::write_gguf(dir.file("expstr.gguf"), {{"general.architecture", std::string("llama")},
                                                {"llama.expert_count", std::string("many")}});
  EXPECT_EQ(error_of(dir.file("expstr.gguf")),
            dir.file("expstr.gguf") + ": metadata llama.expert_count is str, expected an integer");

  testing::write_gguf(dir.file("neg.gguf"), {{"general.architecture", std::string("llama")},
                                             {"llama.expert_count", int32_t{-3}}});
  EXPECT_EQ(error_of(dir.file("neg.gguf")), dir.file("neg.gguf") + ": metadata llama.expert_count is negative (-3)");

  testing::write_gguf(dir.file("h16.gguf"), {{"general.architecture", std::string("llama")},
                                             {"onebit.hadamard_q4_0", uint32_t{16}}});
  EXPECT_EQ(error_of(dir.file("h16.gguf")),
            dir.file("h16.gguf") + ": metadata onebit.hadamard_q4_0 is 16, only 32 is supported");
}

TEST(GgufFacts, UnreadableFile) {
  if (geteuid() == 0) GTEST_SKIP() << "root reads any file";
  TempDir dir;
  testing::write_gguf(dir.file("m.gguf"), {{"general.architecture", std::string("llama")}});
  chmod(dir.file("m.gguf").c_str(), 0);
  EXPECT_EQ(error_of(dir.file("m.gguf")), dir.file("m.gguf") + ": Permission denied");
}

TEST(GgufFacts, FromBufferMatchesFile) {
  TempDir dir;
  testing::write_gguf(dir.file("m.gguf"), {{"general.architecture", std::string("qwen3")}});
  std::string bytes = testing::read_file(dir.file("m.gguf"));
  ModelFacts f = model_facts_from_buffer(bytes.data(), bytes.size(), "buf");
  EXPECT_EQ(f.architecture, "qwen3");
  EXPECT_EQ(f.path, "buf");
}

}  // namespace onebit
