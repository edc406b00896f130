// The one error type of the 1bit library. Its message is complete and user-facing: a command
// prints it after "1bit <command>: " and exits 1. Messages about a file start with its path.
#pragma once

#include <stdexcept>
#include <string>

namespace onebit {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace onebit
