#include "model/synth_command.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "base/cli.h"
#include "base/error.h"
#include "base/paths.h"
#include "model/synth.h"

namespace onebit {
namespace {

struct SynthArgs {
  std::string like, out, type = "f16", vocab_dir;
  uint64_t seed = 1;
};

std::vector<CliOption> synth_table(SynthArgs& a) {
  return {
      {{"--like"}, "NAME", "the shape to copy (see the list below)", [&a](const std::string& v) { a.like = v; }},
      {{"-o", "--output"}, "FILE", "where to write the GGUF", [&a](const std::string& v) { a.out = v; }},
      {{"--type"}, "T", "weight type: f32, f16, q8_0 or q4_0 (default: f16)", [&a](const std::string& v) { a.type = v; }},
      {{"--seed"}, "N", "random seed (default: 1)",
       [&a](const std::string& v) { a.seed = static_cast<uint64_t>(parse_int_option("--seed", v, 0, INT64_MAX)); }},
      {{"--vocab-dir"}, "DIR", "where the engine's ggml-vocab-*.gguf files are (default: the engine's)",
       [&a](const std::string& v) { a.vocab_dir = v; }},
  };
}

// What a shape's file holds and, for a drafter, the shape it drafts for.
std::string describe(const SynthShape& sh) {
  std::string layers = std::to_string(sh.n_layer) + (sh.n_layer == 1 ? " layer" : " layers");
  if (sh.nextn > 0) layers = sh.drafter == "mtp-head" ? "MTP layer alone" : layers + " + " + std::to_string(sh.nextn) + " MTP";
  return sh.architecture + ", " + layers + ", " + std::to_string(sh.n_embd) + " wide, " +
         (sh.target.empty() ? "vocabulary " + sh.vocab : "drafts for " + sh.target);
}

}  // namespace

std::string synth_usage() {
  SynthArgs a;
  std::string s = "usage: 1bit synth --like NAME -o OUT.gguf [--type T] [--seed N]\n\n"
                  "Writes a model with random weights, the exact tensor shapes of NAME and its real\n"
                  "tokenizer. It loads and runs in the engine: speeds are real, text is noise.\n\n"
                  "options:\n" + format_options(synth_table(a)) + "\nshapes:\n";
  for (const auto& sh : synth_shapes())
    s += "  " + sh.name + std::string(sh.name.size() < 22 ? 22 - sh.name.size() : 1, ' ') + describe(sh) + "\n";
  return s;
}

int run_synth(const std::vector<std::string>& args) {
  try {
    SynthArgs a;
    CliParse p = parse_cli(synth_table(a), args);
    if (p.help) {
      std::cout << synth_usage();
      return 0;
    }
    if (!p.positional.empty()) throw Error("unexpected argument \"" + p.positional.front() + "\"");
    if (a.like.empty() || a.out.empty()) throw Error("--like NAME and -o FILE are required (see 1bit synth --help)");
    const SynthShape* shape = find_synth_shape(a.like);
    if (shape == nullptr) throw Error("--like: unknown shape \"" + a.like + "\" (see 1bit synth --help)");
    SynthOptions o;
    o.type = a.type;
    o.seed = a.seed;
    o.vocab_dir = a.vocab_dir.empty() ? engine_vocab_dir() : a.vocab_dir;
    const bool tty = isatty(2);
    write_synth_model(*shape, o, a.out, [&](uint64_t done, uint64_t total) {
      if (!tty && done != total) return;
      std::fprintf(stderr, "%s1bit synth: %s %.0f%% (%.1f of %.1f MiB)", tty ? "\r" : "", a.out.c_str(), 100.0 * done / total,
                   done / 1048576.0, total / 1048576.0);
      if (done == total) std::fprintf(stderr, "\n");
    });
    return 0;
  } catch (const Error& e) {
    std::cerr << "1bit synth: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace onebit
