// Implements: how long this thread waited for a CPU (Linux's per-thread scheduler statistics), so
// a timing on a shared CPU can count the step's own time apart from other processes' turns.
#pragma once

namespace saturate {

/// This thread's time, in ms, spent runnable on a run queue (waiting for a CPU that another
/// process held) since it started: /proc/thread-self/schedstat's second field. Negative where
/// the kernel does not keep it (no schedstat, not Linux).
double run_queue_wait_ms();

}  // namespace saturate
