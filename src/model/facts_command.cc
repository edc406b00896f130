#include "model/facts_command.h"

#include <iomanip>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/cli.h"
#include "base/error.h"
#include "engine/device.h"
#include "model/gguf_facts.h"
#include "recipes/recipe_store.h"

namespace onebit {
namespace {

struct FactsOptions {
  bool json = false;
  std::string recipes_file;
};

std::vector<CliOption> facts_table(FactsOptions& o) {
  return {
      {{"--json"}, "", "print JSON instead of text", [&o](const std::string&) { o.json = true; }},
      {{"--recipes"}, "FILE", "judge the recipes in FILE instead of the built-in ones (after the\n"
                              "user store's, as serve does)",
       [&o](const std::string& v) { o.recipes_file = v; }},
  };
}

std::string human_size(uint64_t bytes) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / (1024.0 * 1024.0) << " MiB";
  return s.str();
}

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return s;
}

// What the file drafts as, and what it needs of its target.
std::string drafter_text(const ModelFacts& f) {
  auto stated = [](const std::optional<uint32_t>& v) { return v ? std::to_string(*v) : std::string("not stated"); };
  if (f.drafter == "dflash")
    return "dflash (--dflash; block size " + stated(f.block_size) + ", reads target layers " + join(f.target_layers) +
           ", mask token " + stated(f.mask_token) + ")";
  if (f.drafter == "eagle3")
    return "eagle3 (--eagle3; reads target layers " + join(f.target_layers) + " of a target " +
           stated(f.target_hidden_size) + " wide)";
  if (f.drafter == "mtp-head")
    return "mtp-head (--mtp FILE; " + std::to_string(f.nextn_layers) + " next-token layer(s) for a " + f.architecture +
           " model " + stated(f.embedding_length) + " wide)";
  return "plain (--draft: a model drafting for one of its vocabulary)";
}

}  // namespace

std::string facts_usage() {
  FactsOptions o;
  return "usage: 1bit facts MODEL [--json] [--recipes FILE]\n\n"
         "Prints what 1bit reads from the GGUF's metadata and which recipes would apply to it\n"
         "when served on this machine without a drafter, with the reason for each that would not:\n"
         "the user store's recipes, then the built-in ones (1bit recipes --help). The device and\n"
         "GPU a recipe needs are named, not checked.\n\n"
         "options:\n" +
         format_options(facts_table(o));
}

int run_facts(const std::vector<std::string>& args) {
  try {
    FactsOptions o;
    CliParse p = parse_cli(facts_table(o), args);
    if (p.help) {
      std::cout << facts_usage();
      return 0;
    }
    if (p.positional.size() != 1) throw Error("expected one MODEL file (see 1bit facts --help)");
    ModelFacts f = read_model_facts(p.positional[0]);
    const RecipeChoice choice(o.recipes_file, /*none=*/false, EngineArgs::builtin());
    const std::vector<RecipeVerdict> verdicts = judge_recipes(choice, f);

    if (o.json) {
      nlohmann::json j = {
          {"path", f.path},
          {"architecture", f.architecture},
          {"name", f.name},
          {"moe", f.moe},
          {"expert_count", f.expert_count},
          {"file_type", f.file_type ? nlohmann::json(*f.file_type) : nlohmann::json(nullptr)},
          {"file_type_name", f.file_type ? file_type_name(*f.file_type) : ""},
          {"hadamard_q4_0", f.hadamard_q4_0},
          {"hadamard_q4_0_runtime", engine_rotates_q4_0()},
          {"context_length", f.context_length ? nlohmann::json(*f.context_length) : nlohmann::json(nullptr)},
          {"nextn_layers", f.nextn_layers},
          {"pooling_type", f.pooling_type ? nlohmann::json(*f.pooling_type) : nlohmann::json(nullptr)},
          {"kind", model_kind(f)},
          {"drafter_kind", f.drafter.empty() ? "plain" : f.drafter},
          {"block_size", f.block_size ? nlohmann::json(*f.block_size) : nlohmann::json(nullptr)},
          {"target_layers", f.target_layers},
          {"target_hidden_size", f.target_hidden_size ? nlohmann::json(*f.target_hidden_size) : nlohmann::json(nullptr)},
          {"mask_token", f.mask_token ? nlohmann::json(*f.mask_token) : nlohmann::json(nullptr)},
          {"block_count", f.block_count ? nlohmann::json(*f.block_count) : nlohmann::json(nullptr)},
          {"embedding_length", f.embedding_length ? nlohmann::json(*f.embedding_length) : nlohmann::json(nullptr)},
          {"vocab_size", f.vocab_size ? nlohmann::json(*f.vocab_size) : nlohmann::json(nullptr)},
          {"tensor_count", f.tensor_count},
          {"file_size", f.file_size},
      };
      nlohmann::json layers = nlohmann::json::array();
      for (const RecipeLayer& l : choice.layers()) layers.push_back({{"layer", l.name}, {"origin", l.set.origin}});
      j["recipe_layers"] = layers;
      nlohmann::json rs = nlohmann::json::array();
      for (const auto& v : verdicts) {
        nlohmann::json r = {{"id", v.recipe->id}, {"layer", v.layer->name}, {"applies", v.mismatch.empty()}};
        if (v.mismatch.empty()) {
          r["devices"] = v.recipe->match.device ? nlohmann::json(*v.recipe->match.device) : nlohmann::json("any");
          if (v.recipe->match.gpu) r["gpus"] = *v.recipe->match.gpu;
        } else {
          r["reason"] = v.mismatch;
        }
        rs.push_back(r);
      }
      j["recipes"] = rs;
      // GGUF strings are raw bytes: invalid UTF-8 is printed as U+FFFD, not refused.
      std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      return 0;
    }

    auto row = [](const std::string& k, const std::string& v) { std::cout << std::left << std::setw(16) << k << v << "\n"; };
    row("path", f.path);
    row("architecture", f.architecture);
    if (!f.name.empty()) row("name", f.name);
    row("file type", f.file_type ? file_type_name(*f.file_type) + " (" + std::to_string(*f.file_type) + ")" : "not stated");
    row("moe", f.moe ? "yes (" + std::to_string(f.expert_count) + " experts)" : "no");
    if (f.hadamard_q4_0)
      row("hadamard_q4_0", engine_rotates_q4_0() ? "yes (32; 1bit's engine rotates the activations to match)"
                                                 : "yes (32; this engine build cannot run it)");
    else
      row("hadamard_q4_0", "no");
    row("context length", f.context_length ? std::to_string(*f.context_length) : "not stated");
    row("mtp layers", std::to_string(f.nextn_layers));
    row("serves", model_kind(f) + (f.pooling_type ? " (pooling type " + std::to_string(*f.pooling_type) + ")" : ""));
    row("drafter kind", drafter_text(f));
    row("tensors", std::to_string(f.tensor_count));
    row("size", std::to_string(f.file_size) + " bytes (" + human_size(f.file_size) + ")");
    std::cout << "\nrecipes, judged for serving on this machine without a drafter:\n";
    for (const RecipeLayer& l : choice.layers()) {
      std::cout << "  " << l.title() << "\n";
      if (l.set.recipes.empty()) std::cout << "    none defined\n";
      for (const auto& v : verdicts)
        if (v.layer == &l) std::cout << "    " << v.recipe->id << ": " << v.text() << "\n";
    }
    return 0;
  } catch (const Error& e) {
    std::cerr << "1bit facts: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace onebit
