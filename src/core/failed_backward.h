// Implements: giving back the memory a backward pass that threw still holds.
// When a backward on the CPU throws (an out-of-memory among them), the autograd engine leaves the
// nodes it had not run yet in this thread's ready queue, each holding its saved activations, until
// the next backward on the thread runs: a whole batch's activations stay allocated after the
// failed step (measured: 61 MiB of resnet18 3x32x32 at batch 140, 281 MiB at 3x64x64 batch 168).
// A backward through one scalar drains the queue. Callers run it after a failed step.
#pragma once

namespace saturate {
/// Runs a one-element backward on this thread so that the autograd engine drops what a failed
/// backward left queued. Cheap (one tiny node); never throws.
void release_failed_backward() noexcept;
}  // namespace saturate
