// A graceful stop for `saturate train`: the first SIGINT, SIGTERM or SIGHUP is remembered (the
// trainer finishes the step it is in, writes a final checkpoint and the summary, and the command
// exits 128 + the signal); a second one stops the process at once, as if no handler were there.
// SIGXFSZ stays the library's business (ignored in main). One instance at a time.
#pragma once
#include <atomic>
#include <string>

#include "saturate/core/signal_name.h"

namespace saturate::cli {

class StopSignals {
 public:
  /// Installs the handlers; `what` ends the line printed on the first signal ("stopping after
  /// the current step ...").
  explicit StopSignals(const char* what);
  /// Puts the previous handlers back.
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  /// 0, or the first signal received.
  const std::atomic<int>& received() const;
};

}  // namespace saturate::cli
