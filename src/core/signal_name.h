// Implements: a signal's name for messages and the train summary ("SIGTERM").
#pragma once
#include <string>

namespace saturate {

/// "SIGINT", "SIGTERM", "SIGHUP", "SIGKILL"; "signal N" for others.
std::string signal_name(int signal);

}  // namespace saturate
