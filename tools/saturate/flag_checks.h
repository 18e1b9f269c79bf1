// Range checks for numeric flags: each names the value, the range allowed and what the value
// means, before any work starts (CLI11 validators: a usage error, exit status 2). Counts of
// threads and workers are bounded by the machine.
#pragma once
#include <string>

#include <CLI/CLI.hpp>

namespace saturate::cli {

/// The value is a finite number in [lo, hi]; `meaning` ends the message ("0: no cap").
CLI::Validator in_range(double lo, double hi, const std::string& meaning = "");

/// The most CPU threads or loader workers one flag may ask for: 4 per core of this machine.
int max_threads();

/// A check for a count of threads or workers: 0..max_threads().
CLI::Validator thread_count(const std::string& meaning);

}  // namespace saturate::cli
