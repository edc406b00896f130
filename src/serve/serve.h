// `1bit serve`: argv -> facts -> recipes -> engine command -> child -> proxy.
#pragma once

#include <string>
#include <vector>

namespace onebit {

// Runs the serve command with its arguments (after "serve"); returns the exit code. Errors are
// printed as one line "1bit serve: <message>".
int run_serve(const std::vector<std::string>& args);

}  // namespace onebit
