// Implements: the kinds of failure, so that `main` can pick the exit code.
//  - UsageError: bad input (a flag value, a file that is not a model); exit status 2.
//  - RuntimeFailure: the input was fine but the run failed (no GPU answered, a model needs
//    more memory than the budget at batch 1); exit status 1.
//  - InternalError: a bug in saturate itself (a broken invariant, never the user's input); the
//    message asks for a report; exit status 70 (EX_SOFTWARE).
// Messages name the value, what is allowed and how to fix it. The library never prints.
#pragma once
#include <stdexcept>
#include <string>

namespace saturate {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  /// An error about one option of the library (a field name such as "global_batch"); the
  /// message does not name a flag, the command line adds its flag (flag_for_option).
  UsageError(std::string option, const std::string& message)
      : std::runtime_error(message), option_(std::move(option)) {}
  /// The option the error concerns; empty when the message already names it.
  const std::string& option() const { return option_; }

 private:
  std::string option_;
};

class RuntimeFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What every InternalError's message ends with.
inline constexpr const char* kReportBug =
    "this is a bug in saturate, please report it at https://github.com/saturate/saturate/issues with the command line";

/// A bug, not bad input nor a failed run: `what` says which invariant broke; the message adds
/// kReportBug. Not a RuntimeFailure, so that no caller mistakes it for an expected failure.
class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& what) : std::logic_error(what + "; " + kReportBug) {}
};

}  // namespace saturate
