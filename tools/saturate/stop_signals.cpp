// StopSignals: see stop_signals.h. The handler only stores the signal and writes one fixed line
// (write(2) is async-signal-safe); the second signal restores the default action and re-raises.
#include "stop_signals.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace saturate::cli {
namespace {

std::atomic<int> g_received{0};
const char* g_what = "";
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_old[3];

void write_all(const char* s) { (void)!write(2, s, std::strlen(s)); }

void on_signal(int sig) {
  const int saved = errno;
  int expected = 0;
  if (!g_received.compare_exchange_strong(expected, sig)) {  // the second: stop at once
    signal(sig, SIG_DFL);
    raise(sig);
    errno = saved;
    return;
  }
  write_all("\nsaturate: ");
  write_all(sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP");
  write_all(" received: ");
  write_all(g_what);
  write_all(" (send it again to stop at once)\n");
  errno = saved;
}

}  // namespace

StopSignals::StopSignals(const char* what) {
  g_received.store(0);
  g_what = what;
  for (int i = 0; i < 3; ++i) {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  // reads, writes and sockets (Gloo) carry on
    sigaction(kSignals[i], &sa, &g_old[i]);
  }
}

StopSignals::~StopSignals() {
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &g_old[i], nullptr);
}

const std::atomic<int>& StopSignals::received() const { return g_received; }

}  // namespace saturate::cli
