// Implements: the two kinds of failure a user can meet, so that `main` can pick the exit code.
//  - UsageError: bad input (a flag value, a file that is not a model); exit status 2.
//  - RuntimeFailure: the input was fine but the run failed (no GPU answered, a model needs
//    more memory than the budget at batch 1); exit status 1.
// Messages name the value, what is allowed and how to fix it. The library never prints.
#pragma once
#include <stdexcept>
#include <string>

namespace saturate {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class RuntimeFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace saturate
