#include "engine/engine_args.h"

#include <sstream>

#include "base/embedded.h"
#include "base/error.h"

namespace onebit {
namespace {

std::string normalise(std::string_view s) {
  std::string out(s);
  if (out.rfind("--", 0) == 0)
    for (char& c : out)
      if (c == '_') c = '-';
  return out;
}

// Splits a value hint into values: spaces inside <>, [] and {} do not separate
// ("<tensor name pattern>=<buffer type>,..." is one value, "START END" two).
size_t count_values(std::string_view hint) {
  size_t n = 0;
  int depth = 0;
  bool in_word = false;
  for (char c : hint) {
    if (c == '<' || c == '[' || c == '{') ++depth;
    if (c == '>' || c == ']' || c == '}') --depth;
    if (c == ' ' && depth <= 0) {
      in_word = false;
    } else if (!in_word) {
      in_word = true;
      ++n;
    }
  }
  return n;
}

// "-ub,   --ubatch-size N     physical ..." -> the part before the help column.
std::string option_head(const std::string& line) {
  std::string head;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == ',' && i + 1 < line.size() && line[i + 1] == ' ') {  // ", " plus padding separates spellings
      head += ", ";
      while (i + 1 < line.size() && line[i + 1] == ' ') ++i;
      continue;
    }
    if (line[i] == ' ' && i + 1 < line.size() && line[i + 1] == ' ') break;
    head += line[i];
  }
  return head;
}

}  // namespace

std::string EngineOption::negated_env() const {
  if (env.rfind("LLAMA_ARG_", 0) != 0) return "";
  for (const auto& s : spellings)
    if (s.rfind("--no-", 0) == 0) return "LLAMA_ARG_NO_" + env.substr(10);
  return "";
}

EngineArgs EngineArgs::from_help(std::string_view text) {
  EngineArgs table;
  std::istringstream in{std::string(text)};
  std::string line;
  EngineOption* current = nullptr;
  while (std::getline(in, line)) {
    if (line.rfind("-----", 0) == 0 || line.empty()) {
      current = nullptr;
      continue;
    }
    if (line[0] == '-') {
      std::string head = option_head(line);
      EngineOption opt;
      size_t start = 0;
      while (true) {
        size_t comma = head.find(", ", start);
        std::string item = head.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (comma == std::string::npos) {
          size_t space = item.find(' ');
          if (space != std::string::npos) {
            opt.values = count_values(std::string_view(item).substr(space + 1));
            item.resize(space);
          }
          opt.spellings.push_back(item);
          break;
        }
        opt.spellings.push_back(item);
        start = comma + 2;
      }
      table.options_.push_back(std::move(opt));
      current = &table.options_.back();
      continue;
    }
    if (current != nullptr) {
      size_t at = line.find("(env: ");
      if (at != std::string::npos) {
        size_t end = line.find(')', at);
        current->env = line.substr(at + 6, end == std::string::npos ? std::string::npos : end - at - 6);
      }
    }
  }
  if (table.options_.empty()) throw Error("llama-server --help lists no options");
  for (size_t i = 0; i < table.options_.size(); ++i)
    for (const auto& s : table.options_[i].spellings) table.by_spelling_.emplace(normalise(s), i);
  return table;
}

const EngineArgs& EngineArgs::builtin() {
  static const EngineArgs table = from_help(embedded::kLlamaServerHelp);
  return table;
}

const EngineOption* EngineArgs::find(std::string_view spelling) const {
  auto it = by_spelling_.find(normalise(spelling));
  return it == by_spelling_.end() ? nullptr : &options_[it->second];
}

int EngineArgs::values_of(std::string_view spelling) const {
  const EngineOption* o = find(spelling);
  return o == nullptr ? -1 : static_cast<int>(o->values);
}

bool EngineArgs::present_on(const std::vector<std::string>& argv, const EngineOption& option) const {
  for (size_t i = 0; i < argv.size(); ++i) {
    const EngineOption* o = find(argv[i]);
    if (o == nullptr) continue;
    if (o == &option) return true;
    i += o->values;
  }
  return false;
}

bool EngineArgs::looks_like_flag(std::string_view w) {
  if (w.size() < 2 || w[0] != '-') return false;
  char c = w[1];
  return !(std::isdigit(static_cast<unsigned char>(c)) || c == '.');
}

}  // namespace onebit
