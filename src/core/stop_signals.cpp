// StopSignals: see stop_signals.h. The handler only stores the signal, forwards it and writes
// one fixed line (kill(2) and write(2) are async-signal-safe); a second signal restores the
// default action and re-raises, unless the options keep waiting.
#include "saturate/core/stop_signals.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/signal_name.h"

namespace saturate {
namespace {

std::atomic<int> g_received{0};
std::atomic<bool> g_stopping{false};
std::atomic<bool> g_alive{false};
StopSignalsOptions g_options;
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_old[3];

void write_all(const char* s) { (void)!write(2, s, std::strlen(s)); }

void on_signal(int sig) {
  const int saved = errno;
  g_stopping.store(true);
  const int child = g_options.forward_to ? g_options.forward_to->load() : 0;
  if (child > 0 && sig != SIGINT) kill(child, sig);
  int expected = 0;
  if (!g_received.compare_exchange_strong(expected, sig)) {  // the second
    if (g_options.second_stops_at_once) {
      signal(sig, SIG_DFL);
      raise(sig);
    }
    errno = saved;
    return;
  }
  if (g_options.line) {
    write_all("\nsaturate: ");
    write_all(sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP");
    write_all(" received: ");
    write_all(g_options.line);
    write_all(" (send it again to stop at once)\n");
  }
  errno = saved;
}

}  // namespace

StopSignals::StopSignals(const StopSignalsOptions& options) {
  g_received.store(0);
  g_stopping.store(false);
  g_options = options;
  g_alive.store(true);
  for (int i = 0; i < 3; ++i) {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  // reads, writes and sockets (Gloo) carry on
    sigaction(kSignals[i], &sa, &g_old[i]);
  }
}

StopSignals::~StopSignals() {
  g_alive.store(false);
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &g_old[i], nullptr);
}

const std::atomic<int>& StopSignals::received() const { return g_received; }

const std::atomic<bool>& StopSignals::stopping() const { return g_stopping; }

int stop_signal_received() { return g_alive.load() ? g_received.load() : 0; }

StoppedBySignal::StoppedBySignal(int signal, const std::string& where)
    : std::runtime_error("stopped by " + signal_name(signal) + " during " + where),
      signal_(signal),
      where_(where) {}

namespace {
void on_file_size_limit(int) {}  // the write fails with EFBIG and its error names the file
}  // namespace

void make_file_size_limit_an_error() {
  struct sigaction xfsz {};
  xfsz.sa_handler = on_file_size_limit;
  sigemptyset(&xfsz.sa_mask);
  xfsz.sa_flags = SA_RESTART;
  sigaction(SIGXFSZ, &xfsz, nullptr);
}

}  // namespace saturate
