// The tune space: the settings `1bit tune` searches, as data (config/tune_space.json, compiled
// in). A knob is one setting (threads, ubatch, an engine switch, ...) with the values a candidate
// may give it and where it applies; the file's order is the search's order.
//
// A value is what a candidate adds to the launch: llama-server arguments, led by VAR=VALUE words
// for its environment ("ONEBIT_GDN_PREFILL=3", "-ub 1024"). $cores (the machine's physical cores)
// and $layers (the model's layers) may stand for a number, followed by integer arithmetic
// ($cores-1, $cores*3/4, evaluated left to right); values that come out below 1 are left out.
// `when` keys (all optional): device, architecture, drafter (lists), moe, fits_gpu (booleans;
// fits_gpu: the model file takes at most 90% of the GPU's memory) and min_gpus, max_gpus
// (counts of the device's local GPUs). A knob that changes_output is
// kept only when its greedy answers equal the baseline's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/engine_args.h"
#include "model/gguf_facts.h"

namespace onebit {

// What a candidate adds: engine arguments and environment.
struct TuneSetting {
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;

  bool empty() const { return args.empty() && env.empty(); }
  // "VAR=VALUE ... args", shell-quoted.
  std::string label() const;
  // The label's letters and digits in lower case, every other run as one '-' ("-ub 1024":
  // "ub-1024"), for recipe ids and configuration names.
  std::string slug() const;
  bool operator==(const TuneSetting& o) const { return args == o.args && env == o.env; }
};

struct KnobWhen {
  std::optional<std::vector<std::string>> device, architecture, drafter;
  std::optional<bool> moe, fits_gpu;
  std::optional<int64_t> min_gpus, max_gpus;  // how many local GPUs of the device, inclusive
};

struct Knob {
  std::string id;
  std::string what;
  KnobWhen when;
  std::vector<std::string> values;  // as written, placeholders included
  bool changes_output = false;
};

struct TuneSpace {
  std::string about;
  std::vector<Knob> knobs;
};

// Parses and validates (every value's arguments must be llama-server options with their values).
// Throws Error("<origin>: <what is wrong>").
TuneSpace parse_tune_space(std::string_view json_text, const std::string& origin, const EngineArgs& engine);
const TuneSpace& builtin_tune_space();

// What a knob is matched against, and what its placeholders stand for.
struct TuneContext {
  std::string device;   // cpu, cuda
  std::string drafter;  // none, draft, dflash, eagle3, mtp
  const ModelFacts* facts = nullptr;
  unsigned physical_cores = 1;
  uint64_t gpu_memory_bytes = 0;  // 0: unknown (the model is taken to fit)
  int gpus = 0;                   // local GPUs of the device (0 on cpu)
};

// Empty when the knob applies, else why not ("device cuda not in [cpu]").
std::string knob_mismatch(const Knob& knob, const TuneContext& context);

// The knob's values for this context, placeholders evaluated, in order, without repeats.
std::vector<TuneSetting> knob_settings(const Knob& knob, const TuneContext& context);

// Parses "VAR=VALUE ... args" into a setting (no placeholders). Throws Error("<what>: ...") when
// the arguments are not llama-server options with their values.
TuneSetting parse_setting(const std::string& text, const std::string& what, const EngineArgs& engine);

// `base` with `value` laid over it: every engine option that `value` sets is taken out of base's
// arguments (under any spelling) and `value`'s appended; its variables replace base's.
TuneSetting overlay(const TuneSetting& base, const TuneSetting& value, const EngineArgs& engine);

}  // namespace onebit
