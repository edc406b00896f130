#include "recipes/tune_space.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <nlohmann/json.hpp>

#include "base/embedded.h"
#include "base/error.h"
#include "base/shell.h"
#include "bench/bench.h"
#include "recipes/recipes.h"

namespace onebit {
namespace {

using nlohmann::json;

const char* const kPlaceholders[] = {"$cores", "$layers"};

std::string bracket(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out + "]";
}

bool listed(const std::vector<std::string>& items, const std::string& s) {
  return std::find(items.begin(), items.end(), s) != items.end();
}

// "$cores*3/4" with $cores = 16: 12. nullopt when the word is not a placeholder expression, or
// names a number this context does not have ($layers of a model without a layer count).
std::optional<int64_t> evaluate(const std::string& word, const TuneContext& c, bool* is_expression) {
  *is_expression = false;
  int64_t value = 0;
  size_t at = 0;
  if (word.rfind("$cores", 0) == 0) {
    value = c.physical_cores;
    at = 6;
  } else if (word.rfind("$layers", 0) == 0) {
    if (c.facts == nullptr || !c.facts->block_count) {
      *is_expression = true;
      return std::nullopt;
    }
    value = *c.facts->block_count;
    at = 7;
  } else {
    return std::nullopt;
  }
  *is_expression = true;
  while (at < word.size()) {
    const char op = word[at++];
    size_t end = at;
    while (end < word.size() && std::isdigit(static_cast<unsigned char>(word[end]))) ++end;
    if (end == at || end - at > 9) return std::nullopt;
    const int64_t n = std::stoll(word.substr(at, end - at));
    at = end;
    if (op == '+') value += n;
    else if (op == '-') value -= n;
    else if (op == '*') value *= n;
    else if (op == '/' && n != 0) value /= n;
    else return std::nullopt;
  }
  return value;
}

// Parses one knob; throws with the origin and knob named.
Knob parse_knob(const json& j, size_t index, const std::string& origin, const EngineArgs& engine) {
  auto fail = [&](const std::string& what) -> Error { return Error(origin + ": " + what); };
  if (!j.is_object()) throw fail("knobs[" + std::to_string(index) + "] is not an object");
  Knob k;
  if (!j.contains("id") || !j["id"].is_string() || j["id"].get<std::string>().empty())
    throw fail("knobs[" + std::to_string(index) + "] needs an \"id\" (a non-empty string)");
  k.id = j["id"];
  const std::string who = "knob \"" + k.id + "\"";
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (key == "id") continue;
    if (key == "what") {
      if (!v.is_string()) throw fail(who + ": \"what\" must be a string");
      k.what = v;
    } else if (key == "changes_output") {
      if (!v.is_boolean()) throw fail(who + ": \"changes_output\" must be true or false");
      k.changes_output = v;
    } else if (key == "values") {
      if (!v.is_array() || v.empty()) throw fail(who + ": \"values\" must be a non-empty list of strings");
      for (const auto& e : v) {
        if (!e.is_string()) throw fail(who + ": \"values\" must be a non-empty list of strings");
        k.values.push_back(e);
      }
    } else if (key == "when") {
      if (!v.is_object()) throw fail(who + ": \"when\" must be an object");
      for (auto w = v.begin(); w != v.end(); ++w) {
        const std::string what = who + ": when." + w.key();
        auto strings = [&](const std::vector<std::string>* known) {
          std::vector<std::string> out;
          if (!w.value().is_array() || w.value().empty()) throw fail(what + " must be a non-empty list of strings");
          for (const auto& e : w.value()) {
            if (!e.is_string()) throw fail(what + " must be a non-empty list of strings");
            if (known && !listed(*known, e)) throw fail(what + ": unknown value \"" + e.get<std::string>() + "\" (known: " + bracket(*known) + ")");
            out.push_back(e);
          }
          return out;
        };
        if (w.key() == "device") k.when.device = strings(&recipe_devices());
        else if (w.key() == "drafter") k.when.drafter = strings(&drafter_kinds());
        else if (w.key() == "architecture") k.when.architecture = strings(nullptr);
        else if (w.key() == "moe" || w.key() == "fits_gpu") {
          if (!w.value().is_boolean()) throw fail(what + " must be true or false");
          (w.key() == "moe" ? k.when.moe : k.when.fits_gpu) = w.value().get<bool>();
        } else if (w.key() == "min_gpus" || w.key() == "max_gpus") {
          if (!w.value().is_number_integer() || w.value().get<int64_t>() < 1) throw fail(what + " must be a whole number from 1");
          (w.key() == "min_gpus" ? k.when.min_gpus : k.when.max_gpus) = w.value().get<int64_t>();
        } else {
          throw fail(who + ": unknown when key \"" + w.key() + "\"");
        }
      }
    } else {
      throw fail(who + ": unknown key \"" + key + "\"");
    }
  }
  if (k.values.empty()) throw fail(who + " has no \"values\"");
  // Each value must be valid once its placeholders stand for a number.
  ModelFacts one_layer;
  one_layer.block_count = 1;
  TuneContext probe;
  probe.facts = &one_layer;
  for (const auto& text : k.values) {
    std::vector<std::string> words;
    try {
      words = shell_split(text);
    } catch (const Error& e) {
      throw fail(who + ": value \"" + text + "\": " + e.what());
    }
    std::string concrete;
    for (const auto& w : words) {
      bool expression = false;
      bool placeholder = std::any_of(std::begin(kPlaceholders), std::end(kPlaceholders),
                                     [&](const char* p) { return w.rfind(p, 0) == 0; });
      if (placeholder) {
        if (!evaluate(w, probe, &expression)) throw fail(who + ": value \"" + text + "\": \"" + w + "\" is not $cores or $layers with +, -, * or / and a number after it");
        concrete += "1 ";
      } else if (w.find('$') != std::string::npos) {
        throw fail(who + ": value \"" + text + "\": \"" + w + "\" names no known number ($cores, $layers)");
      } else {
        concrete += shell_quote(w) + " ";
      }
    }
    parse_setting(concrete, origin + ": " + who + ": value \"" + text + "\"", engine);
  }
  return k;
}

}  // namespace

std::string TuneSetting::label() const {
  std::string s = shell_assignments(env) + shell_join(args);
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string TuneSetting::slug() const {
  std::string s;
  for (char c : label()) {
    if (std::isalnum(static_cast<unsigned char>(c))) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!s.empty() && s.back() != '-') s += '-';
  }
  while (!s.empty() && s.back() == '-') s.pop_back();
  return s;
}

TuneSetting parse_setting(const std::string& text, const std::string& what, const EngineArgs& engine) {
  TuneSetting s;
  s.args = shell_split(text);
  s.env = take_env_assignments(s.args);
  if (s.empty()) throw Error(what + ": empty");
  // A candidate must be a valid recipe: its arguments are llama-server options with their values.
  json probe = {{"id", "candidate"}, {"measured", "-"}};
  if (!s.args.empty()) probe["args"] = s.args;
  if (!s.env.empty()) probe["env"] = env_object(s.env);
  try {
    parse_recipes(json{{"recipes", {probe}}}.dump(), what, engine);
  } catch (const Error& e) {
    std::string m = e.what();
    const std::string noise = "recipe \"candidate\": ";
    if (auto at = m.find(noise); at != std::string::npos) m.erase(at, noise.size());
    throw Error(m);
  }
  return s;
}

TuneSpace parse_tune_space(std::string_view text, const std::string& origin, const EngineArgs& engine) {
  json root = json::parse(text.begin(), text.end(), nullptr, false);
  if (root.is_discarded()) throw Error(origin + ": invalid JSON");
  if (!root.is_object()) throw Error(origin + ": the top level must be an object with a \"knobs\" list");
  TuneSpace space;
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() == "about" && it.value().is_string()) space.about = it.value();
    else if (it.key() != "knobs") throw Error(origin + ": unknown key \"" + it.key() + "\" at the top level");
  }
  if (!root.contains("knobs") || !root["knobs"].is_array()) throw Error(origin + ": no \"knobs\" list");
  std::set<std::string> ids;
  for (size_t i = 0; i < root["knobs"].size(); ++i) {
    Knob k = parse_knob(root["knobs"][i], i, origin, engine);
    if (!ids.insert(k.id).second) throw Error(origin + ": knob \"" + k.id + "\" is there twice");
    space.knobs.push_back(std::move(k));
  }
  return space;
}

const TuneSpace& builtin_tune_space() {
  static const TuneSpace space = parse_tune_space(embedded::kTuneSpaceJson, "built-in tune space", EngineArgs::builtin());
  return space;
}

std::string knob_mismatch(const Knob& k, const TuneContext& c) {
  const ModelFacts* f = c.facts;
  if (k.when.device && !listed(*k.when.device, c.device)) return "device " + c.device + " not in " + bracket(*k.when.device);
  if (k.when.drafter && !listed(*k.when.drafter, c.drafter)) return "drafter " + c.drafter + " not in " + bracket(*k.when.drafter);
  if (k.when.architecture && (f == nullptr || !listed(*k.when.architecture, f->architecture)))
    return "architecture " + (f ? f->architecture : std::string("?")) + " not in " + bracket(*k.when.architecture);
  if (k.when.moe && (f == nullptr || f->moe != *k.when.moe)) return *k.when.moe ? "not a MoE model" : "a MoE model";
  if (k.when.min_gpus && c.gpus < *k.when.min_gpus)
    return std::to_string(c.gpus) + " GPU" + (c.gpus == 1 ? "" : "s") + ", fewer than " + std::to_string(*k.when.min_gpus);
  if (k.when.max_gpus && c.gpus > *k.when.max_gpus)
    return std::to_string(c.gpus) + " GPUs, more than " + std::to_string(*k.when.max_gpus);
  if (k.when.fits_gpu) {
    const bool fits = c.gpu_memory_bytes == 0 || f == nullptr || f->file_size * 10 <= c.gpu_memory_bytes * 9;
    if (fits != *k.when.fits_gpu) return fits ? "the model fits the GPU's memory" : "the model does not fit the GPU's memory";
  }
  return "";
}

std::vector<TuneSetting> knob_settings(const Knob& k, const TuneContext& c) {
  std::vector<TuneSetting> out;
  for (const auto& text : k.values) {
    std::vector<std::string> words = shell_split(text);
    bool usable = true;
    for (auto& w : words) {
      bool expression = false;
      std::optional<int64_t> v = evaluate(w, c, &expression);
      if (!expression) continue;
      if (!v || *v < 1) usable = false;
      else w = std::to_string(*v);
    }
    if (!usable) continue;
    TuneSetting s;
    s.args = words;
    s.env = take_env_assignments(s.args);
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  }
  return out;
}

TuneSetting overlay(const TuneSetting& base, const TuneSetting& value, const EngineArgs& engine) {
  TuneSetting out;
  // The options `value` sets, by what they are (any spelling).
  std::vector<const EngineOption*> replaced;
  for (size_t i = 0; i < value.args.size();) {
    const EngineOption* opt = engine.find(value.args[i]);
    replaced.push_back(opt);
    i += 1 + (opt ? opt->values : 0);
  }
  for (size_t i = 0; i < base.args.size();) {
    const EngineOption* opt = engine.find(base.args[i]);
    const size_t n = 1 + (opt ? opt->values : 0);
    const bool drop = opt != nullptr && std::find(replaced.begin(), replaced.end(), opt) != replaced.end();
    for (size_t j = i; j < i + n && j < base.args.size(); ++j)
      if (!drop) out.args.push_back(base.args[j]);
    i += n;
  }
  out.args.insert(out.args.end(), value.args.begin(), value.args.end());
  for (const auto& kv : base.env)
    if (std::none_of(value.env.begin(), value.env.end(), [&](const auto& v) { return v.first == kv.first; }))
      out.env.push_back(kv);
  out.env.insert(out.env.end(), value.env.begin(), value.env.end());
  return out;
}

}  // namespace onebit
