#include "model/drafter_fit.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "test_support.h"

namespace onebit {
namespace {

using testing::error_of;

ModelFacts llama8b() {
  ModelFacts m;
  m.path = "llama.gguf";
  m.architecture = "llama";
  m.block_count = 32;
  m.embedding_length = 4096;
  m.vocab_size = 128256;
  return m;
}

ModelFacts drafter(const std::string& kind) {
  ModelFacts d;
  d.path = "d.gguf";
  d.architecture = kind == "mtp-head" ? "qwen35" : kind.empty() ? "llama" : kind;
  d.drafter = kind;
  d.embedding_length = 4096;
  d.vocab_size = 128256;
  if (kind == "dflash") {
    d.target_layers = {2, 9, 16, 23, 30};
    d.mask_token = 128002;
  }
  if (kind == "eagle3") {
    d.target_layers = {2, 16, 29};
    d.target_hidden_size = 4096;
  }
  return d;
}

std::string fit(const std::string& option, const ModelFacts& d, const ModelFacts& m = llama8b()) {
  return error_of([&] { check_drafter_fits(option, &d, m); });
}

}  // namespace

TEST(DrafterFit, EachKindFitsItsTarget) {
  EXPECT_EQ(fit("draft", drafter("")), "");
  EXPECT_EQ(fit("dflash", drafter("dflash")), "");
  EXPECT_EQ(fit("eagle3", drafter("eagle3")), "");
  ModelFacts hybrid = llama8b();
  hybrid.architecture = "qwen35";
  hybrid.nextn_layers = 1;
  hybrid.block_count = 33;
  EXPECT_EQ(fit("mtp", drafter("mtp-head"), hybrid), "");
  EXPECT_EQ(error_of([&] { check_drafter_fits("mtp", nullptr, hybrid); }), "");
  EXPECT_EQ(error_of([] { check_drafter_fits("none", nullptr, llama8b()); }), "");
}

// Each misfit the engine would abort on, or ignore, is a one-line error naming the file.
TEST(DrafterFit, MisfitsAreNamed) {
  EXPECT_EQ(fit("draft", drafter("dflash")), "d.gguf: is a dflash drafter; use --dflash");
  EXPECT_EQ(fit("dflash", drafter("eagle3")), "d.gguf: is an eagle3 drafter; use --eagle3");
  EXPECT_EQ(fit("eagle3", drafter("")), "d.gguf: not an eagle3 drafter (architecture llama); a model drafts with --draft");
  EXPECT_EQ(fit("mtp", drafter("dflash")), "d.gguf: is a dflash drafter; use --dflash");

  ModelFacts narrow = drafter("dflash");
  narrow.embedding_length = 2048;
  EXPECT_EQ(fit("dflash", narrow), "d.gguf: is 2048 wide, and llama.gguf is 4096: a drafter must match its model's width");
  ModelFacts deep = drafter("dflash");
  deep.target_layers = {2, 32};
  EXPECT_EQ(fit("dflash", deep), "d.gguf: reads target layer 32, and llama.gguf has 32 (0 to 31)");
  ModelFacts unmasked = drafter("dflash");
  unmasked.mask_token.reset();
  EXPECT_EQ(fit("dflash", unmasked), "d.gguf: has no tokenizer.ggml.mask_token_id, the token a dflash block starts from");
  ModelFacts other_vocab = drafter("dflash");
  other_vocab.vocab_size = 151936;
  EXPECT_EQ(fit("dflash", other_vocab),
            "d.gguf: its vocabulary has 151936 tokens, llama.gguf's 128256: a drafter must share its model's vocabulary");

  ModelFacts two = drafter("eagle3");
  two.target_layers = {2, 16};
  EXPECT_EQ(fit("eagle3", two), "d.gguf: metadata eagle3.target_layers has 2 entries, expected 3");
  ModelFacts wide = drafter("eagle3");
  wide.target_hidden_size = 5120;
  EXPECT_EQ(fit("eagle3", wide),
            "d.gguf: reads a target 5120 wide, and llama.gguf is 4096: a drafter must match its model's width");

  EXPECT_EQ(fit("mtp", drafter("mtp-head")), "d.gguf: is a qwen35 next-token layer, and llama.gguf is llama");
  ModelFacts whole = drafter("");
  whole.nextn_layers = 1;
  EXPECT_EQ(fit("mtp", whole), "d.gguf: is a model with its own MTP layer, not a head alone; serve it with -m d.gguf --mtp");
  ModelFacts unsized = drafter("eagle3");
  unsized.target_hidden_size.reset();
  EXPECT_EQ(fit("eagle3", unsized), "d.gguf: has no eagle3.target_hidden_size, the width of the target it reads");
  EXPECT_EQ(error_of([] { check_drafter_fits("mtp", nullptr, llama8b()); }),
            "llama.gguf: --mtp needs next-token (MTP) layers, and llama.nextn_predict_layers is absent or 0 (a head "
            "published apart: --mtp HEAD.gguf)");
}

}  // namespace onebit
