// Implements: the phases of a training step and the observer told when each begins and ends.
// Shared by the probe (ProbeObserver adds trials) and the Trainer (a long run of steps), so
// that one monitor times both. Calls come from the thread running the steps; an observer's
// hooks must be cheap (no allocation in steady state, no device synchronization).
#pragma once
#include <string>

namespace saturate {

enum class Phase { kDataWait, kHostToDevice, kForward, kBackward, kOptimizer, kAllreduce };
/// "data_wait", "h2d", "forward", "backward", "optimizer", "allreduce" (the JSON names).
std::string to_string(Phase p);
/// The inverse of to_string; throws UsageError naming the allowed names otherwise.
Phase parse_phase(const std::string& name);

class PhaseObserver {
 public:
  virtual ~PhaseObserver() = default;
  /// `measured` is false for warm-up steps (and, in training, for a step redone after an OOM).
  virtual void step_begin(int step, bool measured) {}
  /// Phases nest in steps and may repeat within one (micro-batches): their times add up.
  virtual void phase_begin(Phase phase) {}
  virtual void phase_end(Phase phase) {}
  /// After the step's work completed (on CUDA: after the step's synchronizing read), so that
  /// device timing events recorded in it are ready.
  virtual void step_end(int step, bool measured) {}
  /// Time a phase took that was measured elsewhere and is contained in phase `within` of the
  /// current step (e.g. the all-reduce a DDP backward waited for): moves `ms` from `within`
  /// to `phase`.
  virtual void phase_moved(Phase phase, Phase within, double ms) {}
  /// A named region of the memory log inside a phase, not a timed phase of its own: what is
  /// allocated in it is counted as that part of the peak (memory/breakdown.h: "communication",
  /// "gathered_parameters"). Only the memory observer records them.
  virtual void region_begin(const std::string& name) {}
  virtual void region_end(const std::string& name) {}
};

/// Marks a phase of a user's own step for the observer of the trial (or run) in progress on
/// this thread; does nothing when there is none:
///   { saturate::PhaseScope forward(saturate::Phase::kForward); loss = loss_fn(model(x), y); }
class PhaseScope {
 public:
  explicit PhaseScope(Phase phase);
  ~PhaseScope();
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  PhaseObserver* observer_;
  Phase phase_;
};

/// The observer PhaseScope reports to on this thread (nullptr: none), for markers that cannot
/// be scopes (a Python context manager's __enter__ and __exit__).
PhaseObserver* current_phase_observer();

/// Makes `observer` the one PhaseScope reports to on this thread for the install's lifetime
/// (the probe installs its observers around a trial's steps).
class PhaseObserverInstall {
 public:
  explicit PhaseObserverInstall(PhaseObserver* observer);
  ~PhaseObserverInstall();
  PhaseObserverInstall(const PhaseObserverInstall&) = delete;
  PhaseObserverInstall& operator=(const PhaseObserverInstall&) = delete;

 private:
  PhaseObserver* saved_;
};

}  // namespace saturate
