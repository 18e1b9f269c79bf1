// Implements: this process's resident memory (Linux /proc/self/statm), for checks that watch tensor
// bytes and must say what the process as a whole did beside them (the leak check).
#pragma once
#include <cstdint>

namespace saturate {

/// Resident bytes of this process now; -1 when /proc cannot tell.
int64_t own_resident_bytes();

}  // namespace saturate
