// POSIX shell quoting: what the dry-run plan prints, and the splitting of option strings such as
// bench's --config ARGS, so that what a user types and what 1bit prints read the same way.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace onebit {

// Quotes `s` for a POSIX shell; plain words (letters, digits, -_./:=@,+%) stay unquoted.
std::string shell_quote(const std::string& s);

// Quotes each word and joins them with single spaces.
std::string shell_join(const std::vector<std::string>& words);

// "K=V K2=V2 " as a shell reads assignments before a command (each value quoted, the names are
// variable names), or "" for none.
std::string shell_assignments(const std::vector<std::pair<std::string, std::string>>& env);

// Splits like a POSIX shell without expansions: blanks separate words; single quotes, double
// quotes (with \" \\ \$ \` escapes) and backslash escapes are honoured. Throws Error on an
// unterminated quote or a trailing backslash.
std::vector<std::string> shell_split(const std::string& text);

}  // namespace onebit
