#include "model/rotate_command.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <optional>

#include "base/cli.h"
#include "base/error.h"
#include "model/rotate.h"

namespace onebit {
namespace {

std::vector<CliOption> rotate_table(RotateOptions& o, std::string& imatrix) {
  return {
      {{"--imatrix"}, "FILE", "an importance matrix (llama-imatrix's GGUF output) to weigh the\nquantization error by",
       [&imatrix](const std::string& v) { imatrix = v; }},
      {{"--plain"}, "", "quantize the same tensors to Q4_0 without rotating them (no stamp),\nto compare with",
       [&o](const std::string&) { o.plain = true; }},
      {{"--threads"}, "N", "threads that quantize (default: every core)",
       [&o](const std::string& v) { o.threads = static_cast<int>(parse_int_option("--threads", v, 1, 1024)); }},
  };
}

}  // namespace

std::string rotate_usage() {
  RotateOptions o;
  std::string imatrix;
  return "usage: 1bit rotate IN.gguf OUT.gguf [--imatrix FILE] [--plain] [--threads N]\n\n"
         "Writes a Hadamard-rotated Q4_0 file (H32): every weight that multiplies activations\n"
         "(attention, FFN and their expert forms, delta-net projections) is rotated per 32-block of\n"
         "its input by the normalized Hadamard matrix and quantized to Q4_0; every other tensor stays\n"
         "as IN has it; the file is stamped onebit.hadamard_q4_0 = 32. IN is F32, F16, BF16 or Q8_0\n"
         "(weights already in 4 bits would carry their rounding into the rotation).\n\n"
         "options:\n" +
         format_options(rotate_table(o, imatrix));
}

int run_rotate(const std::vector<std::string>& args) {
  try {
    RotateOptions o;
    std::string imatrix;
    CliParse p = parse_cli(rotate_table(o, imatrix), args);
    if (p.help) {
      std::cout << rotate_usage();
      return 0;
    }
    if (p.positional.size() != 2) throw Error("expected IN.gguf and OUT.gguf (see 1bit rotate --help)");
    const std::string& out = p.positional[1];
    std::optional<Importance> importance;
    if (!imatrix.empty()) {
      importance = load_importance(imatrix);
      o.importance = &*importance;
    }
    const bool tty = isatty(2);
    RotateSummary s = rotate_model(p.positional[0], out, o, [&](const RotateProgress& r) {
      if (!tty && r.tensor != r.tensors) return;
      std::fprintf(stderr, "%s1bit rotate: %s tensor %lld of %lld, %.1f of %.1f MiB", tty ? "\r" : "", out.c_str(),
                   static_cast<long long>(r.tensor), static_cast<long long>(r.tensors), r.bytes / 1048576.0,
                   r.total / 1048576.0);
      if (r.tensor == r.tensors) std::fprintf(stderr, "\n");
    });
    std::cout << out << ": " << s.rotated << " tensors " << (o.plain ? "quantized" : "rotated and quantized")
              << " to Q4_0, " << s.kept << " kept as they were, " << s.bytes << " bytes\n";
    if (s.without_importance > 0)
      std::cerr << "1bit rotate: " << imatrix << " had no data for " << s.without_importance << " of the " << s.rotated
                << " weights; those were quantized without it\n";
    return 0;
  } catch (const Error& e) {
    std::cerr << "1bit rotate: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace onebit
