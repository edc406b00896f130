#include "engine/launch_plan.h"

#include <cstring>

#include "base/error.h"
#include "base/paths.h"
#include "base/shell.h"
#include "rpc/rpc_endpoints.h"

extern char** environ;

namespace onebit {
namespace {

// Engine options that serve itself owns, with the serve option to use instead.
struct Owned {
  const char* flag;
  const char* instead;
};
constexpr Owned kOwned[] = {
    {"--model", "1bit serve -m"},
    {"--host", "1bit serve --host"},
    {"--port", "1bit serve --port"},
    {"--api-key", "1bit serve --api-key"},
    {"--api-key-file", "1bit serve --api-key"},
    {"--api-prefix", "a reverse proxy in front of 1bit"},
    {"--rpc", "1bit serve --rpc (or lemonade's rpc option), which checks each worker first"},
    {"--ssl-key-file", "a TLS proxy in front of 1bit"},
    {"--ssl-cert-file", "a TLS proxy in front of 1bit"},
};

class ArgBuilder {
 public:
  ArgBuilder(const EngineArgs& engine, const std::vector<std::string>& user,
             const std::map<std::string, std::string>& env)
      : engine_(engine), user_(user), env_(env) {}

  const EngineOption& option(const char* spelling) const {
    const EngineOption* o = engine_.find(spelling);
    if (o == nullptr) throw Error(std::string("this engine has no option ") + spelling);
    return *o;
  }

  bool user_sets(const EngineOption& o) const { return engine_.present_on(user_, o); }
  bool env_sets(const EngineOption& o) const {
    return (!o.env.empty() && env_.count(o.env)) || (!o.negated_env().empty() && env_.count(o.negated_env()));
  }

  // A base default: left out when the user set it, after "--" or through its LLAMA_ARG_* variable.
  void add_default(std::vector<std::string>& args, std::initializer_list<const char*> words) const {
    const EngineOption& o = option(*words.begin());
    if (user_sets(o) || env_sets(o)) return;
    args.insert(args.end(), words.begin(), words.end());
  }

  // A serve option: the user may not also give it after "--".
  void add_own(std::vector<std::string>& args, const std::string& serve_name,
               std::vector<std::string> words) const {
    const EngineOption& o = option(words.front().c_str());
    if (user_sets(o))
      throw Error(words.front() + " is set twice: by " + serve_name + " and after \"--\"; keep one");
    args.insert(args.end(), words.begin(), words.end());
  }

 private:
  const EngineArgs& engine_;
  const std::vector<std::string>& user_;
  const std::map<std::string, std::string>& env_;
};

}  // namespace

std::map<std::string, std::string> current_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr) env[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
  }
  return env;
}

LaunchPlan plan_launch(const LaunchInputs& in, const EngineArgs& engine) {
  const ServeOptions& o = *in.options;
  const std::vector<std::string>& user = o.engine_args;
  // A rotated file's weights only mean something to an engine that rotates the activations too:
  // 1bit's own, not another llama-server.
  const bool rotating_engine = in.program == default_llama_server() && engine_rotates_q4_0();
  for (const ModelFacts* f : {in.model, in.drafter})
    if (f != nullptr && f->hadamard_q4_0 && !rotating_engine)
      throw Error(f->path + ": is Hadamard-rotated Q4_0 (onebit.hadamard_q4_0 = 32), which only 1bit's own engine runs "
                  "(it rotates the activations to match); " + in.program + " would compute every product wrong");
  LaunchPlan plan;
  plan.program = in.program;
  // What serve owns stays serve's: not after "--", and not through the engine's environment
  // variables either (a stray LLAMA_API_KEY would lock serve out of its own engine).
  std::map<std::string, std::string> env = in.environment;
  for (const Owned& owned : kOwned) {
    const EngineOption* opt = engine.find(owned.flag);
    if (opt == nullptr) continue;
    if (engine.present_on(user, *opt))
      throw Error(std::string(owned.flag) + " after \"--\": serve sets it for the engine; use " + owned.instead);
    if (!opt->env.empty() && env.erase(opt->env) > 0) plan.env_removed.push_back(opt->env);
  }
  ArgBuilder b(engine, user, env);
  const bool gpu = in.where.device != "cpu";

  auto& a = plan.args;
  a = {"-m", in.model_path, "--host", "127.0.0.1", "--port", std::to_string(in.port)};
  // Before -dev: the engine knows a worker's devices only once --rpc has added them.
  if (!o.rpc.empty()) b.add_own(a, "--rpc", {"--rpc", rpc_list(o.rpc)});
  const bool offload = gpu || !o.rpc.empty();
  b.add_default(a, {"-ngl", offload ? "99" : "0"});
  // On the CPU, no layers on a GPU is not enough: a CUDA build of the engine would still hand
  // large batches to the GPU. No local devices at all is what "cpu" means; workers stay.
  if (!gpu) {
    // Workers not listed yet (a dry run that could not reach them) offer one device each.
    std::vector<std::string> rpc_devices = in.rpc_devices;
    if (rpc_devices.empty())
      for (size_t i = 0; i < o.rpc.size(); ++i) rpc_devices.push_back("RPC" + std::to_string(i));
    std::string devices;
    for (const auto& d : rpc_devices) devices += (devices.empty() ? "" : ",") + d;
    b.add_default(a, {"-dev", devices.empty() ? "none" : devices.c_str()});
  }
  // Several local GPUs: the engine's default layout, written out so that the plan shows it.
  if (in.where.devices.size() > 1) b.add_default(a, {"-sm", "layer"});
  b.add_default(a, {"--jinja"});

  if (!o.alias.empty()) b.add_own(a, "--alias", {"--alias", o.alias});
  if (o.ctx_size) b.add_own(a, "-c", {"-c", std::to_string(*o.ctx_size)});
  if (!o.flash_attn.empty()) b.add_own(a, "-fa", {"-fa", o.flash_attn});
  if (o.parallel) b.add_own(a, "-np", {"-np", std::to_string(*o.parallel)});

  // The drafter's own flags are fixed by the option; its layer count is a default the user may
  // set after "--".
  const std::string kind = o.drafter_kind();
  if (kind != "none") {
    const std::string option = "--" + kind;
    b.add_own(a, option, {"--spec-type", kind == "draft" ? "draft-simple" : "draft-" + kind});
    const std::string& file = o.drafter_file();
    // A drafter in a file of its own is a second model, placed like the first.
    if (!file.empty()) {
      b.add_own(a, option, {"-md", file});
      b.add_default(a, {"-ngld", gpu ? "99" : "0"});
      if (!gpu) b.add_default(a, {"-devd", "none"});
    }
  }
  if (o.draft_max) b.add_own(a, "--draft-max", {"--spec-draft-n-max", std::to_string(*o.draft_max)});
  if (!o.draft_p_min.empty()) b.add_own(a, "--draft-p-min", {"--spec-draft-p-min", o.draft_p_min});

  a.insert(a.end(), user.begin(), user.end());

  if (in.recipes != nullptr) {
    ChildEnv child_env;
    child_env.inherited = env;
    RecipeTarget target{in.where.device, in.where.gpu, kind, in.model, in.machine, !o.rpc.empty(), static_cast<int>(in.where.devices.size())};
    plan.applied = apply_recipes(*in.recipes, target, engine, a, child_env);
    plan.env_added = child_env.added;
  }
  // Read by the engine's CUDA backend (patch 0021); after the recipes, which never set it.
  if (o.batch_invariant) plan.env_added.emplace_back("ONEBIT_BATCH_INVARIANT", "1");
  // A dflash drafter drafts at most a block less its first token: the file's own limit, unless
  // the user or a recipe (a measured length for a pair) chose one.
  if (kind == "dflash") {
    const EngineOption& draft_n_max = b.option("--spec-draft-n-max");
    if (!engine.present_on(a, draft_n_max) && !b.env_sets(draft_n_max)) {
      const int64_t n = in.drafter != nullptr && in.drafter->block_size ? *in.drafter->block_size - 1 : 16;
      a.insert(a.end(), {"--spec-draft-n-max", std::to_string(n)});
    }
  }
  return plan;
}

std::string LaunchPlan::command_line() const {
  std::string line;
  if (!env_removed.empty()) {
    line = "env ";
    for (const auto& k : env_removed) line += "-u " + shell_quote(k) + " ";
  }
  line += shell_assignments(env_added);
  std::vector<std::string> words{program};
  words.insert(words.end(), args.begin(), args.end());
  return line + shell_join(words);
}

std::vector<std::string> LaunchPlan::recipe_lines(const std::string& who) const {
  std::vector<std::string> lines;
  for (const auto& r : applied) lines.push_back(who + ": recipe " + r.id + ": " + r.describe());
  return lines;
}

}  // namespace onebit
