#include "recipes/recipes.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/embedded.h"
#include "base/error.h"
#include "base/shell.h"
#include "bench/machine.h"
#include "engine/device.h"

namespace onebit {
namespace {

using nlohmann::json;


std::string join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

bool contains(const std::vector<std::string>& items, const std::string& s) {
  return std::find(items.begin(), items.end(), s) != items.end();
}

// The names file_type_name() gives to the file types it knows.
const std::vector<std::string>& file_type_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (uint32_t t = 0; t < 64; ++t)
      if (std::string n = file_type_name(t); n.rfind("type ", 0) != 0) out.push_back(n);
    return out;
  }();
  return names;
}

bool is_engine_build_key(const std::string& s) {
  return s.size() == 16 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Parses one recipe; `fail` throws with the origin prefixed.
class RecipeParser {
 public:
  RecipeParser(const std::string& origin, const EngineArgs& engine) : origin_(origin), engine_(engine) {}

  [[noreturn]] void fail(const std::string& what) const { throw Error(origin_ + ": " + what); }

  Recipe parse(const json& j, size_t index) const {
    if (!j.is_object()) fail("recipes[" + std::to_string(index) + "] is not an object");
    Recipe r;
    auto id = j.find("id");
    if (id == j.end()) fail("recipes[" + std::to_string(index) + "] has no \"id\"");
    if (!id->is_string() || id->get<std::string>().empty())
      fail("recipes[" + std::to_string(index) + "]: \"id\" must be a non-empty string");
    r.id = id->get<std::string>();
    const std::string who = "recipe \"" + r.id + "\"";

    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& key = it.key();
      const json& v = it.value();
      if (key == "id") continue;
      if (key == "match") {
        r.match = parse_match(v, who);
      } else if (key == "args") {
        r.args = parse_args(v, who);
      } else if (key == "env") {
        r.env = parse_env(v, who);
      } else if (key == "why" || key == "measured" || key == "source") {
        if (!v.is_string()) fail(who + ": \"" + key + "\" must be a string");
        (key == "why" ? r.why : key == "measured" ? r.measured : r.source) = v.get<std::string>();
      } else {
        fail(who + ": unknown key \"" + key + "\"");
      }
    }
    if (r.measured.empty()) fail(who + " has no \"measured\": every recipe needs the measurement behind it");
    if (r.args.empty() && r.env.empty()) fail(who + " adds nothing (no args and no env)");
    r.entry = j.dump();
    return r;
  }

 private:
  std::vector<std::string> string_list(const json& v, const std::string& what) const {
    if (!v.is_array()) fail(what + " must be a list of strings");
    std::vector<std::string> out;
    for (const auto& e : v) {
      if (!e.is_string()) fail(what + " must be a list of strings");
      out.push_back(e.get<std::string>());
    }
    return out;
  }

  std::vector<std::string> value_list(const json& v, const std::string& what,
                                      const std::vector<std::string>& known) const {
    auto out = string_list(v, what);
    for (const auto& s : out)
      if (!contains(known, s)) fail(what + ": unknown value \"" + s + "\" (known: " + join(known) + ")");
    return out;
  }

  // A list of names, at least one, none empty.
  std::vector<std::string> name_list(const json& v, const std::string& what, const char* names) const {
    auto out = string_list(v, what);
    if (out.empty() || contains(out, "")) fail(what + " must name " + names);
    return out;
  }

  std::pair<uint64_t, uint64_t> byte_range(const json& v, const std::string& what) const {
    if (!v.is_array() || v.size() != 2 || !v[0].is_number_unsigned() || !v[1].is_number_unsigned())
      fail(what + " must be [min, max]: two whole numbers");
    const auto min = v[0].get<uint64_t>(), max = v[1].get<uint64_t>();
    if (min > max) fail(what + ": min " + std::to_string(min) + " is above max " + std::to_string(max));
    return {min, max};
  }

  RecipeMatch parse_match(const json& v, const std::string& who) const {
    if (!v.is_object()) fail(who + ": \"match\" must be an object");
    RecipeMatch m;
    for (auto it = v.begin(); it != v.end(); ++it) {
      const std::string& key = it.key();
      const std::string what = who + ": match." + key;
      if (key == "device") {
        m.device = value_list(it.value(), what, recipe_devices());
      } else if (key == "gpu") {
        m.gpu = name_list(it.value(), what, "GPU models");
      } else if (key == "cpu") {
        m.cpu = name_list(it.value(), what, "CPU models");
      } else if (key == "engine") {
        m.engine = name_list(it.value(), what, "engine builds");
        for (const auto& k : *m.engine)
          if (!is_engine_build_key(k))
            fail(what + ": \"" + k + "\" is not an engine build key (16 hex digits, engine.json's \"key\")");
      } else if (key == "file_type") {
        m.file_type = value_list(it.value(), what, file_type_names());
        if (m.file_type->empty()) fail(what + " must name file types");
      } else if (key == "size_bytes") {
        m.size_bytes = byte_range(it.value(), what);
      } else if (key == "gpus") {
        m.gpus = byte_range(it.value(), what);
      } else if (key == "drafter") {
        m.drafter = value_list(it.value(), what, drafter_kinds());
      } else if (key == "architecture") {
        m.architecture = string_list(it.value(), what);
      } else if (key == "moe" || key == "hadamard_q4_0" || key == "rpc") {
        if (!it.value().is_boolean()) fail(what + " must be true or false");
        (key == "moe" ? m.moe : key == "rpc" ? m.rpc : m.hadamard_q4_0) = it.value().get<bool>();
      } else {
        fail(who + ": unknown match key \"" + key + "\"");
      }
    }
    if (m.gpu && m.device && !contains(*m.device, "cuda") && !contains(*m.device, "vulkan"))
      fail(who + ": match.gpu names GPU models, but match.device leaves out cuda and vulkan");
    return m;
  }

  std::vector<std::string> parse_args(const json& v, const std::string& who) const {
    auto args = string_list(v, who + ": \"args\"");
    if (args.empty()) return args;
    if (!EngineArgs::looks_like_flag(args.front()))
      fail(who + ": args must start with a flag, not \"" + args.front() + "\"");
    for (size_t i = 0; i < args.size();) {
      const EngineOption* opt = engine_.find(args[i]);
      if (opt == nullptr) fail(who + ": args: \"" + args[i] + "\" is not a llama-server option");
      size_t n = opt->values;
      if (i + 1 + n > args.size())
        fail(who + ": args: " + args[i] + " needs " + std::to_string(n) + " value" + (n == 1 ? "" : "s"));
      i += 1 + n;
      if (i < args.size() && !EngineArgs::looks_like_flag(args[i]))
        fail(who + ": args: \"" + args[i] + "\" follows " + args[i - 1 - n] + ", which takes " +
             std::to_string(n) + " value" + (n == 1 ? "" : "s"));
    }
    return args;
  }

  std::vector<std::pair<std::string, std::string>> parse_env(const json& v, const std::string& who) const {
    if (!v.is_object()) fail(who + ": \"env\" must be an object of strings");
    std::vector<std::pair<std::string, std::string>> out;
    for (auto it = v.begin(); it != v.end(); ++it) {
      const std::string& name = it.key();
      bool valid = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                   std::all_of(name.begin(), name.end(), [](char c) {
                     return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                   });
      if (!valid) fail(who + ": env: \"" + name + "\" is not a valid variable name");
      if (!it.value().is_string()) fail(who + ": env." + name + " must be a string");
      out.emplace_back(name, it.value().get<std::string>());
    }
    return out;
  }

  const std::string& origin_;
  const EngineArgs& engine_;
};

std::string json_error_text(const std::exception& e) {
  std::string s = e.what();
  // "[json.exception.parse_error.101] parse error at ..." -> "parse error at ..."
  if (!s.empty() && s[0] == '[')
    if (auto close = s.find("] "); close != std::string::npos) s.erase(0, close + 2);
  return s;
}

std::string bracket(const std::vector<std::string>& items) { return "[" + join(items) + "]"; }

std::string byte_range_text(const std::pair<uint64_t, uint64_t>& range) {
  return "[" + std::to_string(range.first) + ", " + std::to_string(range.second) + "]";
}

std::string describe_added(const std::vector<std::string>& args, const std::vector<std::pair<std::string, std::string>>& env) {
  std::vector<std::string> parts;
  if (!args.empty()) parts.push_back(shell_join(args));
  for (const auto& [k, v] : env) parts.push_back(shell_quote(k + "=" + v));
  return join(parts, " ");
}

}  // namespace

const std::vector<std::string>& recipe_devices() {
  static const std::vector<std::string> devices = {"cpu", "cuda", "vulkan"};
  return devices;
}

const std::vector<std::string>& drafter_kinds() {
  static const std::vector<std::string> kinds = {"none", "draft", "dflash", "eagle3", "mtp"};
  return kinds;
}

RecipeSet parse_recipes(std::string_view text, const std::string& origin, const EngineArgs& engine) {
  RecipeParser p(origin, engine);
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    p.fail("invalid JSON: " + json_error_text(e));
  }
  if (!root.is_object()) p.fail("the top level must be an object with a \"recipes\" list");
  RecipeSet set;
  set.origin = origin;
  bool have_list = false;
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() == "about") {
      if (!it.value().is_string()) p.fail("\"about\" must be a string");
      set.about = it.value().get<std::string>();
    } else if (it.key() == "recipes") {
      if (!it.value().is_array()) p.fail("\"recipes\" must be a list");
      have_list = true;
    } else {
      p.fail("unknown key \"" + it.key() + "\" at the top level");
    }
  }
  if (!have_list) p.fail("no \"recipes\" list");
  std::set<std::string> ids;
  const json& list = root["recipes"];
  for (size_t i = 0; i < list.size(); ++i) {
    Recipe r = p.parse(list[i], i);
    if (!ids.insert(r.id).second) p.fail("duplicate recipe id \"" + r.id + "\"");
    set.recipes.push_back(std::move(r));
  }
  return set;
}

RecipeSet load_recipes_file(const std::string& path, const EngineArgs& engine) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read the recipes file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(path + ": cannot read the recipes file");
  return parse_recipes(text.str(), path, engine);
}

const RecipeSet& builtin_recipes() {
  static const RecipeSet set = parse_recipes(embedded::kRecipesJson, "built-in recipes", EngineArgs::builtin());
  return set;
}

const RecipeMachine& RecipeMachine::here() {
  static const RecipeMachine machine{cpu_model(), engine_build_key()};
  return machine;
}

std::string recipe_mismatch(const Recipe& r, const RecipeTarget& t, bool ignore_device) {
  const RecipeMatch& m = r.match;
  const ModelFacts& f = *t.facts;
  if (!ignore_device && m.device && !contains(*m.device, t.device))
    return "device " + t.device + " not in " + bracket(*m.device);
  if (!ignore_device && m.gpu) {  // a GPU model implies a GPU device: it counts only there
    const std::string gpu = t.device != "cpu" ? t.gpu : "";
    if (!contains(*m.gpu, gpu)) return "gpu " + (gpu.empty() ? std::string("none") : gpu) + " not in " + bracket(*m.gpu);
  }
  if (m.cpu && !contains(*m.cpu, t.machine.cpu))
    return "cpu " + (t.machine.cpu.empty() ? std::string("unknown") : t.machine.cpu) + " not in " + bracket(*m.cpu);
  if (m.engine && !contains(*m.engine, t.machine.engine))
    return "engine " + (t.machine.engine.empty() ? std::string("unknown") : t.machine.engine) + " not in " +
           bracket(*m.engine);
  if (m.architecture && !contains(*m.architecture, f.architecture))
    return "architecture " + f.architecture + " not in " + bracket(*m.architecture);
  if (m.file_type) {
    const std::string type = f.file_type ? file_type_name(*f.file_type) : "not stated";
    if (!contains(*m.file_type, type)) return "file_type " + type + " not in " + bracket(*m.file_type);
  }
  if (m.size_bytes && (f.file_size < m.size_bytes->first || f.file_size > m.size_bytes->second))
    return "size_bytes " + std::to_string(f.file_size) + " not in " + byte_range_text(*m.size_bytes);
  if (m.moe && *m.moe != f.moe) return std::string("needs ") + (*m.moe ? "a MoE model" : "a dense model");
  if (m.hadamard_q4_0 && *m.hadamard_q4_0 != f.hadamard_q4_0)
    return std::string("needs a model ") + (*m.hadamard_q4_0 ? "with" : "without") + " the Hadamard Q4_0 stamp";
  if (m.drafter && !contains(*m.drafter, t.drafter))
    return "drafter " + t.drafter + " not in " + bracket(*m.drafter);
  if (!ignore_device && m.gpus && (static_cast<uint64_t>(t.gpus) < m.gpus->first || static_cast<uint64_t>(t.gpus) > m.gpus->second))
    return "gpus " + std::to_string(t.gpus) + " not in " + std::to_string(m.gpus->first) + ".." + std::to_string(m.gpus->second);
  if (m.rpc && *m.rpc != t.rpc) return std::string("needs a launch ") + (*m.rpc ? "with" : "without") + " RPC workers";
  return "";
}

std::string recipe_devices(const Recipe& r) {
  if (r.match.gpu) return "device cuda (gpu " + join(*r.match.gpu) + ")";
  return r.match.device ? "device " + join(*r.match.device) : "any device";
}

std::string recipe_conditions(const Recipe& r) {
  const RecipeMatch& m = r.match;
  std::vector<std::string> parts;
  if (m.device || m.gpu) parts.push_back(recipe_devices(r));
  auto list = [&](const char* key, const std::optional<std::vector<std::string>>& v) {
    if (v) parts.push_back(std::string(key) + " " + join(*v));
  };
  list("cpu", m.cpu);
  list("engine", m.engine);
  list("architecture", m.architecture);
  list("file_type", m.file_type);
  if (m.size_bytes) parts.push_back("size_bytes " + byte_range_text(*m.size_bytes));
  if (m.moe) parts.push_back(std::string("moe ") + (*m.moe ? "true" : "false"));
  if (m.hadamard_q4_0) parts.push_back(std::string("hadamard_q4_0 ") + (*m.hadamard_q4_0 ? "true" : "false"));
  list("drafter", m.drafter);
  if (m.gpus) parts.push_back("gpus " + std::to_string(m.gpus->first) + ".." + std::to_string(m.gpus->second));
  if (m.rpc) parts.push_back(std::string("rpc ") + (*m.rpc ? "true" : "false"));
  return parts.empty() ? "anywhere" : join(parts, "; ");
}

std::string recipe_adds(const Recipe& r) { return describe_added(r.args, r.env); }

std::string unnamed_gpu_note(const std::string& who, const RecipeSet* set, const DeviceChoice& where) {
  if (set == nullptr || where.device == "cpu" || !where.gpu.empty() ||
      std::none_of(set->recipes.begin(), set->recipes.end(), [](const Recipe& r) { return r.match.gpu.has_value(); }))
    return "";
  return who + ": the engine names no GPU model; recipes for a GPU model are left out";
}

bool ChildEnv::has(const std::string& name) const {
  if (inherited.count(name)) return true;
  return std::any_of(added.begin(), added.end(), [&](const auto& kv) { return kv.first == name; });
}

std::string AppliedRecipe::describe() const { return describe_added(args, env); }

std::vector<AppliedRecipe> apply_recipes(const RecipeSet& set, const RecipeTarget& target,
                                         const EngineArgs& engine, std::vector<std::string>& argv,
                                         ChildEnv& env) {
  std::vector<AppliedRecipe> applied;
  for (const Recipe& r : set.recipes) {
    if (!recipe_mismatch(r, target).empty()) continue;
    AppliedRecipe a;
    a.id = r.id;
    for (size_t i = 0; i < r.args.size();) {
      const EngineOption* opt = engine.find(r.args[i]);
      size_t n = opt->values;
      bool present = engine.present_on(argv, *opt) ||
                     (!opt->env.empty() && (env.has(opt->env) || env.has(opt->negated_env())));
      if (!present) {
        argv.insert(argv.end(), r.args.begin() + i, r.args.begin() + i + 1 + n);
        a.args.insert(a.args.end(), r.args.begin() + i, r.args.begin() + i + 1 + n);
      }
      i += 1 + n;
    }
    for (const auto& [k, v] : r.env) {
      if (env.has(k)) continue;
      env.add(k, v);
      a.env.emplace_back(k, v);
    }
    if (!a.args.empty() || !a.env.empty()) applied.push_back(std::move(a));
  }
  return applied;
}

}  // namespace onebit
