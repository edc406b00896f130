#include "model/drafter_fit.h"

#include "base/error.h"

namespace onebit {
namespace {

// The option that takes a file of this drafter kind.
std::string option_for(const std::string& drafter_kind) {
  if (drafter_kind == "dflash") return "--dflash";
  if (drafter_kind == "eagle3") return "--eagle3";
  if (drafter_kind == "mtp-head") return "--mtp FILE";
  return "--draft";
}

// "a dflash drafter", "an eagle3 drafter", "an MTP head".
std::string kind_phrase(const std::string& drafter_kind) {
  if (drafter_kind == "eagle3") return "an eagle3 drafter";
  if (drafter_kind == "mtp-head") return "an MTP head";
  return "a " + drafter_kind + " drafter";
}

void same_width(const ModelFacts& d, std::optional<uint32_t> width, const ModelFacts& model, const std::string& what) {
  if (width && model.embedding_length && *width != *model.embedding_length)
    throw Error(d.path + ": " + what + " " + std::to_string(*width) + " wide, and " + model.path + " is " +
                std::to_string(*model.embedding_length) + ": a drafter must match its model's width");
}

void same_vocabulary(const ModelFacts& d, const ModelFacts& model) {
  if (d.vocab_size && model.vocab_size && *d.vocab_size != *model.vocab_size)
    throw Error(d.path + ": its vocabulary has " + std::to_string(*d.vocab_size) + " tokens, " + model.path + "'s " +
                std::to_string(*model.vocab_size) + ": a drafter must share its model's vocabulary");
}

void target_layers_exist(const ModelFacts& d, const ModelFacts& model, size_t exactly) {
  if (d.target_layers.empty() || (exactly > 0 && d.target_layers.size() != exactly))
    throw Error(d.path + ": metadata " + d.architecture + ".target_layers has " + std::to_string(d.target_layers.size()) +
                " entries, expected " + (exactly > 0 ? std::to_string(exactly) : std::string("at least 1")));
  const uint32_t layers = trunk_layers(model);
  if (layers == 0) return;  // a model that does not state its layers: the engine decides
  for (int64_t l : d.target_layers)
    if (l >= layers)
      throw Error(d.path + ": reads target layer " + std::to_string(l) + ", and " + model.path + " has " +
                  std::to_string(layers) + " (0 to " + std::to_string(layers - 1) + ")");
}

}  // namespace

void check_drafter_fits(const std::string& kind, const ModelFacts* drafter, const ModelFacts& model) {
  if (kind == "mtp" && drafter == nullptr) {
    if (model.nextn_layers == 0)
      throw Error(model.path + ": --mtp needs next-token (MTP) layers, and " + model.architecture +
                  ".nextn_predict_layers is absent or 0 (a head published apart: --mtp HEAD.gguf)");
    return;
  }
  if (drafter == nullptr) return;
  const ModelFacts& d = *drafter;
  const std::string want = kind == "draft" ? "" : kind == "mtp" ? "mtp-head" : kind;
  if (d.drafter != want) {
    if (d.drafter.empty() && kind == "mtp" && d.nextn_layers > 0)
      throw Error(d.path + ": is a model with its own MTP layer, not a head alone; serve it with -m " + d.path + " --mtp");
    if (d.drafter.empty())
      throw Error(d.path + ": not " + kind_phrase(want) + " (architecture " + d.architecture +
                  "); a model drafts with --draft");
    throw Error(d.path + ": is " + kind_phrase(d.drafter) + "; use " + option_for(d.drafter));
  }
  if (kind == "draft") return;  // the engine checks a draft model's vocabulary itself
  same_vocabulary(d, model);
  if (kind == "dflash") {
    same_width(d, d.embedding_length, model, "is");
    target_layers_exist(d, model, 0);
    if (!d.mask_token)
      throw Error(d.path + ": has no tokenizer.ggml.mask_token_id, the token a dflash block starts from");
  } else if (kind == "eagle3") {
    if (!d.target_hidden_size) throw Error(d.path + ": has no eagle3.target_hidden_size, the width of the target it reads");
    same_width(d, d.target_hidden_size, model, "reads a target");
    target_layers_exist(d, model, 3);
  } else if (kind == "mtp") {
    if (d.architecture != model.architecture)
      throw Error(d.path + ": is a " + d.architecture + " next-token layer, and " + model.path + " is " + model.architecture);
    same_width(d, d.embedding_length, model, "is");
  }
}

}  // namespace onebit
