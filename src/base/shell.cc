#include "base/shell.h"

#include <cstring>

#include "base/error.h"

namespace onebit {

std::string shell_quote(const std::string& s) {
  if (s.empty()) return "''";
  bool plain = true;
  for (unsigned char c : s) {
    if (!(std::isalnum(c) || std::strchr("-_./:=@,+%", c) != nullptr)) {
      plain = false;
      break;
    }
  }
  if (plain) return s;
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

std::string shell_join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    out += shell_quote(w);
  }
  return out;
}

std::string shell_assignments(const std::vector<std::pair<std::string, std::string>>& env) {
  std::string out;
  for (const auto& [k, v] : env) out += k + "=" + shell_quote(v) + " ";
  return out;
}

std::vector<std::string> shell_split(const std::string& text) {
  std::vector<std::string> words;
  std::string cur;
  bool in_word = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(cur), cur.clear(), in_word = false;
    } else if (c == '\'') {
      size_t end = text.find('\'', i + 1);
      if (end == std::string::npos) throw Error("unterminated single quote in: " + text);
      cur.append(text, i + 1, end - i - 1);
      i = end;
      in_word = true;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '\\' && j + 1 < text.size() && std::strchr("\"\\$`", text[j + 1]) != nullptr) ++j;
        cur += text[j];
      }
      if (j >= text.size()) throw Error("unterminated double quote in: " + text);
      i = j;
      in_word = true;
    } else if (c == '\\') {
      if (i + 1 >= text.size()) throw Error("trailing backslash in: " + text);
      cur += text[++i];
      in_word = true;
    } else {
      cur += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(cur);
  return words;
}

}  // namespace onebit
