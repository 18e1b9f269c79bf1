// Implements: a graceful stop on SIGINT, SIGTERM and SIGHUP for a run that must end well (the
// trainer finishes its step, writes a final checkpoint and the summary; a watched command is let
// finish so that its summary can be printed). The first signal is remembered; optionally a line
// says so on stderr (written by the handler: the one output a handler can give), and SIGTERM and
// SIGHUP are forwarded to a child (SIGINT from a terminal reaches it by itself). A second signal
// stops the process at once, as if no handler were there, unless the options keep waiting.
// SIGXFSZ is not touched. One instance at a time; the previous handlers come back at its end.
#pragma once
#include <atomic>
#include <stdexcept>
#include <string>

namespace saturate {

struct StopSignalsOptions {
  /// Ends the line written on the first signal ("stopping after the current step ..."); nullptr:
  /// no line.
  const char* line = nullptr;
  /// A second signal stops the process at once (the default action); false: it is only
  /// remembered (and forwarded) like the first.
  bool second_stops_at_once = true;
  /// A child's pid (0: none yet) to which SIGTERM and SIGHUP are forwarded.
  const std::atomic<int>* forward_to = nullptr;
};

class StopSignals {
 public:
  /// Installs the handlers.
  explicit StopSignals(const StopSignalsOptions& options);
  /// Puts the previous handlers back.
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  /// 0, or the first signal received.
  const std::atomic<int>& received() const;
  /// True once a signal came (for a flag a loop polls).
  const std::atomic<bool>& stopping() const;
};

/// The first signal the StopSignals alive in this process received; 0 when none came or none is
/// alive (a command that does not stop gracefully keeps the default action: the signal ends it).
/// For waits that are not steps: a rendezvous, a batch-size search between trials.
int stop_signal_received();

/// Thrown where a wait or a search ends because a stop signal came; the command exits 128 +
/// signal(). what(): "stopped by SIGTERM during <where>".
class StoppedBySignal : public std::runtime_error {
 public:
  StoppedBySignal(int signal, const std::string& where);
  int signal() const { return signal_; }
  /// What the run was doing ("the rendezvous (waiting for the other ranks)").
  const std::string& where() const { return where_; }

 private:
  int signal_;
  std::string where_;
};

/// `ulimit -f`: a write past the limit raises SIGXFSZ, which kills without a word. Caught (not
/// ignored, so that commands run by `monitor` and `launch` get the default back at exec), the
/// write fails with EFBIG and the error says the limit was reached writing the file.
void make_file_size_limit_an_error();

}  // namespace saturate
