#include "saturate/search/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/core/option_doc.h"
#include "saturate/core/units.h"

namespace saturate {

std::string to_string(Strategy s) {
  switch (s) {
    case Strategy::kFit: return "fit";
    case Strategy::kPower: return "power";
    case Strategy::kBinsearch: return "binsearch";
    case Strategy::kDivisors: return "divisors";
  }
  return "fit";
}

Strategy parse_strategy(const std::string& text) {
  if (text == "fit") return Strategy::kFit;
  if (text == "power") return Strategy::kPower;
  if (text == "binsearch") return Strategy::kBinsearch;
  if (text == "divisors") return Strategy::kDivisors;
  throw UsageError("strategy", fmt::format("unknown value '{}' (expected fit, power, binsearch or divisors)", text));
}

void SearchOptions::check() const {
  check_option_range("target_fraction", target_fraction);  // the documented ranges (core/option_doc.h)
  check_option_range("max_batch", static_cast<double>(max_batch));
  check_option_range("start_batch", static_cast<double>(start_batch));
  if (warmup_steps < 0) throw UsageError("warmup_steps", fmt::format("{} is negative; 0 runs no warm-up", warmup_steps));
  check_option_range("measure_steps", measure_steps);
  check_option_range("confirm_runs", confirm_runs);
  if (max_trials < 1) throw UsageError("max_trials", fmt::format("{} must be at least 1", max_trials));
  if (strategy == Strategy::kDivisors && max_batch < 1)
    throw UsageError("max_batch", "the divisors strategy tries the divisors of this batch: give it (the effective "
                                  "batch the micro-batch must divide)");
}

namespace {

/// lo: largest batch known to pass (0: none); hi: smallest known to fail (0: none yet).
struct Bracket {
  int64_t lo = 0;
  int64_t hi = 0;
  bool closed() const { return hi != 0 && hi - lo <= 1; }
};

/// A probe at this share of the budget ends the jumps: the law is fitted on a baseline this long.
constexpr double kLongBaseline = 0.35;

class BatchSearchRun {
 public:
  BatchSearchRun(TrialRunner& runner, const SearchOptions& options, SearchResult& result)
      : runner_(runner), opt_(options), res_(result) {
    res_.strategy = opt_.strategy;
    res_.budget_bytes = runner_.budget_bytes();
    res_.target_bytes = static_cast<int64_t>(std::floor(opt_.target_fraction * static_cast<double>(res_.budget_bytes)));
  }

  /// nullopt when the trial errored or the trial limit was reached (the search then stops).
  std::optional<Trial> run(int64_t batch, const TrialRequest& request) {
    if (static_cast<int>(res_.trials.size()) >= opt_.max_trials) {
      if (res_.error.empty()) res_.error = fmt::format("search stopped after {} trials (the limit)", opt_.max_trials);
      return std::nullopt;
    }
    Trial t = runner_.run(batch, request);
    if (t.status == TrialStatus::kOom && request.budget_bytes > 0 && request.budget_bytes < res_.budget_bytes)
      t.status = TrialStatus::kOverTarget;
    res_.trials.push_back(t);
    res_.trial_steps += t.steps;
    if (opt_.on_trial) opt_.on_trial(t);
    if (t.status == TrialStatus::kError) {
      res_.error = fmt::format("batch {}: {}", batch, t.error);
      return std::nullopt;
    }
    return t;
  }

  TrialRequest timed() const { return {opt_.warmup_steps, opt_.measure_steps, 0}; }
  /// Enough for the steady-state peak: step 1 creates the optimizer state, step 2 runs with it.
  TrialRequest memory_only(int64_t budget_bytes) const { return {opt_.memory_warmup_steps, 1, budget_bytes}; }

  /// (batch, peak reserved) of every trial that ran to the end: what decides an OOM.
  std::vector<std::pair<int64_t, int64_t>> fitting_points() const {
    std::vector<std::pair<int64_t, int64_t>> pts;
    for (const Trial& t : res_.trials)
      if (t.ok()) pts.emplace_back(t.batch, t.peak_reserved_bytes);
    return pts;
  }

  /// (batch, the step's forward and backward peak) where the trials measured it, else the peak:
  /// what grows with the batch, without the optimizer's fixed peak that hides it under small
  /// batches (Trial::pre_optimizer_peak_bytes).
  std::vector<std::pair<int64_t, int64_t>> growth_points() const {
    std::vector<std::pair<int64_t, int64_t>> pts;
    for (const Trial& t : res_.trials)
      if (t.ok()) pts.emplace_back(t.batch, growth_bytes(t));
    return pts;
  }
  /// No trial that ran to the end peaked over `limit_bytes`, and the fitting trials' peaks spread
  /// over less than a quarter of the room between the highest of them and the limit: a law from
  /// them extrapolates far from a short baseline.
  bool short_baseline(int64_t limit_bytes) const {
    const auto pts = fitting_points();
    if (pts.size() < 2) return false;
    int64_t low = pts.front().second, high = low;
    for (const auto& [batch, peak] : pts) {
      if (peak > limit_bytes) return false;
      low = std::min(low, peak);
      high = std::max(high, peak);
    }
    return 4 * (high - low) < limit_bytes - high;
  }
  static int64_t growth_bytes(const Trial& t) {
    return t.pre_optimizer_peak_bytes > 0 ? t.pre_optimizer_peak_bytes : t.peak_reserved_bytes;
  }

  /// Narrows `br` to the largest batch that passes `check`, guided by the local memory law
  /// against `limit_bytes`; falls back to bisection (or doubling) after two wrong predictions.
  /// Returns false when a trial errored.
  template <class Check>
  bool narrow(Bracket& br, int64_t limit_bytes, Check check, bool* capped) {
    int misses = 0;
    double hedge = 1.0;  // shrinks after the law overshoots: curved memory makes it overshoot again
    int64_t expand = 0;  // step when no upper bound is known and the law has failed
    bool overshot = false;  // the last guess was the law's, and failed
    bool below_failure = false, tried_below_failure = false;  // the guess right below the law's failed one
    while (!br.closed()) {
      if (opt_.max_batch && br.lo >= opt_.max_batch) {
        if (capped) *capped = true;
        return true;
      }
      const MemoryLaw law = local_memory_law(fitting_points(), limit_bytes, runner_.granularity_bytes());
      const int64_t predicted = law.max_batch_within(limit_bytes);
      // a law that extrapolates over 4x the peaks' spread it was drawn from (a step whose small
      // batches all peak at one fixed place, such as a sharded step's gathered units under
      // checkpointing, shows a slope far under the real one): half way to its answer (at most 4x
      // the largest batch that fit), which lengthens the baseline, and no guess right below a
      // failure of it
      const bool short_law = short_baseline(limit_bytes);
      // batches per allocator rounding step: how far the law's answer can be off near the boundary.
      const int64_t band =
          (law.valid && runner_.granularity_bytes() > 0)
              ? std::max<int64_t>(1, static_cast<int64_t>(std::ceil(static_cast<double>(runner_.granularity_bytes()) /
                                                                    law.per_sample_bytes)))
              : 1;
      // the law guides while it agrees with the trials; when it says lo is the boundary, look one
      // rounding band above; a guess at or past a known failure is left to bisection.
      int64_t guess = 0;
      bool guided = false;
      below_failure = false;
      if (predicted >= 0 && misses < 2) {
        const double reach = short_law ? std::min(hedge, 0.5) : hedge;
        guess = predicted <= br.lo
                    ? br.lo + band
                    : br.lo + static_cast<int64_t>(std::ceil(reach * static_cast<double>(predicted - br.lo)));
        // and no further than 4x the largest batch that fit (on Gloo a small probe's peak holds a
        // late-freed copy of a gathered unit now and then: the slope from two small probes came
        // out a fifth of the real one, and half way to its answer ran out of memory twice)
        if (short_law && predicted > br.lo) guess = std::min(guess, std::max(br.lo + 1, 4 * br.lo));
        // the law's guess just failed and it still says that batch fits: it is off by little on a
        // long baseline (memory that curves up), so the boundary is most likely right below it
        // (once: where that fails too, memory curves more and the hedge takes over)
        below_failure = overshot && !short_law && !tried_below_failure && br.hi && predicted >= br.hi - 1;
        if (below_failure) guess = br.hi - 1;
        tried_below_failure = tried_below_failure || below_failure;
        guided = !br.hi || guess < br.hi;
      }
      if (!guided) {
        if (br.hi) {
          guess = br.lo + (br.hi - br.lo) / 2;
        } else {
          expand = expand ? expand * 2 : 2 * band;
          guess = br.lo + expand;
        }
        misses = 0;
      }
      guess = std::max(guess, br.lo + 1);
      if (br.hi) guess = std::min(guess, br.hi - 1);
      if (opt_.max_batch) guess = std::min(guess, opt_.max_batch);
      const bool expected_pass = guided && guess <= std::max(predicted, br.lo + band - 1);
      const std::optional<bool> passed = check(guess);
      if (!passed) return false;
      (*passed ? br.lo : br.hi) = guess;
      overshot = guided && !*passed;
      if (guided && !below_failure && *passed != expected_pass) {
        ++misses;
        if (!*passed) hedge = std::max(0.5, hedge * 0.75);
      }
    }
    return true;
  }

  void fit() {
    const int64_t budget = res_.budget_bytes;
    // 1. a small memory probe, then jumps until a probe uses over a third of the budget: a
    // baseline long enough for the law near the boundary (issue 26: fewer trials; the floor is
    // two probes for the law, the predicted max and max + 1).
    int64_t first = opt_.max_batch ? std::min<int64_t>(2, opt_.max_batch) : 2;
    auto a = run(first, memory_only(0));
    if (!a) return;
    Bracket br;
    (a->ok() ? br.lo : br.hi) = first;
    Trial last = *a;
    int64_t previous_growth = -1;  // growth_bytes of the probe before `last`
    bool jumped_far = false;       // the 64x jump is taken once
    const int64_t first_growth = growth_bytes(*a);
    // how far the probes reach into the room above the first: enough for the law's baseline
    const auto span = [&](const Trial& t) {
      return static_cast<double>(growth_bytes(t) - first_growth) /
             std::max(1.0, static_cast<double>(budget - first_growth));
    };
    for (int jump = 0; jump < 5 && last.ok() && !br.hi; ++jump) {
      const double peak_share = static_cast<double>(last.peak_reserved_bytes) / static_cast<double>(budget);
      if (peak_share >= 0.5 || (peak_share >= kLongBaseline && span(last) >= kLongBaseline)) break;
      if (opt_.max_batch && br.lo >= opt_.max_batch) break;
      // trust the law once the probes span a visible part of the budget; before that, small
      // batches hide the per-sample part under fixed costs, so grow geometrically (an overshoot
      // costs one cheap OOM step and gives an upper bound).
      int64_t low = growth_bytes(last);
      for (const auto& pt : growth_points()) low = std::min(low, pt.second);
      const bool visible = static_cast<double>(growth_bytes(last) - low) >= 0.05 * static_cast<double>(budget);
      const MemoryLaw law = secant_memory_law(growth_points(), runner_.granularity_bytes());
      const int64_t predicted = visible ? law.max_batch_within(budget) : -1;
      int64_t next;
      // the probe's bytes over the baseline per sample overstate the per-sample cost (fixed costs
      // are in them): for memory that grows linearly, this many samples stay below the max
      const double used = std::max<double>(1.0, static_cast<double>(last.peak_reserved_bytes - last.baseline_bytes));
      const double room = static_cast<double>(budget - last.baseline_bytes);
      const double bound = 0.9 * room / used * static_cast<double>(last.batch);
      if (predicted > 0) {
        // a law from small batches underestimates memory that curves up: no further than the bound
        next = br.lo + static_cast<int64_t>(0.6 * static_cast<double>(predicted - br.lo));
        next = std::min(next, std::max(br.lo + 1, static_cast<int64_t>(bound)));
      } else {
        // the bound, but at least 8x (fixed costs may be most of the probe's bytes); once 64x when
        // the growth did not move since the probe before (< 1 % of the budget: a fixed peak, the
        // optimizer's, hides it). (Jumping 64x at once where the first probe's peak is the
        // optimizer's loses the mid-size probe that memory curving up needs: resnet18 under
        // 512 MiB took 12 trials instead of 7.)
        const bool flat = previous_growth >= 0 && static_cast<double>(growth_bytes(last) - previous_growth) <
                                                      0.01 * static_cast<double>(budget);
        const bool far = flat && !jumped_far;
        jumped_far = jumped_far || far;
        next = std::max(static_cast<int64_t>(static_cast<double>(last.batch) * (far ? 64.0 : 8.0)),
                        static_cast<int64_t>(bound));
      }
      if (opt_.max_batch) next = std::min(next, opt_.max_batch);
      if (next <= br.lo + br.lo / 4) break;  // too close to be worth a probe: narrow from here
      auto t = run(next, memory_only(0));
      if (!t) return;
      (t->ok() ? br.lo : br.hi) = next;
      previous_growth = growth_bytes(last);
      last = *t;
    }
    // a law on a short baseline (its probes reach under half the room) overshoots memory that
    // curves up: probe first where it puts the recommended batch (0.9 of the budget without a
    // target), which often brackets that batch too
    if (last.ok() && !br.hi && span(last) < 0.5) {
      const MemoryLaw law = secant_memory_law(fitting_points(), runner_.granularity_bytes());
      const int64_t hedge_bytes = res_.target_bytes < budget ? res_.target_bytes : static_cast<int64_t>(0.9 * static_cast<double>(budget));
      int64_t guess = law.max_batch_within(hedge_bytes);
      if (opt_.max_batch) guess = std::min(guess, opt_.max_batch);
      if (guess > br.lo + br.lo / 4) {
        auto t = run(guess, memory_only(0));
        if (!t) return;
        (t->ok() ? br.lo : br.hi) = guess;
      }
    }
    // 2. jump to the predicted largest batch, verify, narrow.
    bool capped = false;
    const auto passes = [&](int64_t batch) -> std::optional<bool> {
      auto t = run(batch, memory_only(0));
      if (!t) return std::nullopt;
      return t->ok();
    };
    if (!narrow(br, budget, passes, &capped)) return;
    res_.max_batch = br.lo;
    res_.max_batch_exact = br.closed();
    res_.capped = capped;
    if (res_.max_batch == 0) return;
    if (!confirm_boundary(passes)) return;
    // 3. the recommended batch: the same narrowing against the target, with trials run under a
    // budget lowered to the target so that those over it stop at their first step.
    Bracket rb = target_bracket();
    if (rb.hi == 0 || rb.hi > res_.max_batch) {
      res_.recommended_batch = rb.lo;
      res_.recommended_exact = res_.max_batch_exact && rb.lo == res_.max_batch;
      return;
    }
    const auto under_target = [&](int64_t batch) -> std::optional<bool> {
      auto t = run(batch, memory_only(res_.target_bytes));
      if (!t) return std::nullopt;
      return t->ok() && t->peak_reserved_bytes <= res_.target_bytes;
    };
    if (!narrow(rb, res_.target_bytes, under_target, nullptr)) return;
    res_.recommended_batch = rb.lo;
    res_.recommended_exact = rb.closed();
  }

  /// Re-probes max_batch and max_batch+1 (SearchOptions::confirm_runs times each). Where the
  /// max fails on a re-probe, narrows again below it (a batch must pass again to count); where
  /// max+1 passes, the max stays (it passed every time) and the spread says how far the
  /// boundary moves. False when a trial errored.
  template <class Passes>
  bool confirm_boundary(const Passes& passes) {
    if (opt_.confirm_runs <= 0 || !res_.max_batch_exact || res_.capped) return true;
    int64_t highest_pass = res_.max_batch;
    bool agreed = true;
    for (int i = 0; i < opt_.confirm_runs && res_.max_batch > 0; ++i) {
      const auto next_passes = passes(res_.max_batch + 1);
      if (!next_passes) return false;
      if (*next_passes) {
        agreed = false;
        highest_pass = std::max(highest_pass, res_.max_batch + 1);
      }
      const auto max_passes = passes(res_.max_batch);
      if (!max_passes) return false;
      if (*max_passes) continue;
      agreed = false;
      // the boundary is lower this time: narrow between 0 and the max that failed, with fresh
      // trials (an earlier pass does not count, it might not hold again)
      Bracket lower{0, res_.max_batch};
      int64_t step = 1;
      while (true) {  // step down 1, 2, 4, ... until a batch passes: the spread is usually small
        const int64_t b = std::max<int64_t>(0, res_.max_batch - step);
        if (b == 0) break;
        const auto ok = passes(b);
        if (!ok) return false;
        if (*ok) {
          lower.lo = b;
          break;
        }
        lower.hi = b;
        step *= 2;
      }
      while (lower.lo > 0 && !lower.closed()) {
        const int64_t mid = lower.lo + (lower.hi - lower.lo) / 2;
        const auto ok = passes(mid);
        if (!ok) return false;
        (*ok ? lower.lo : lower.hi) = mid;
      }
      res_.max_batch = lower.lo;
      res_.max_batch_exact = lower.closed();
    }
    res_.confirm_runs = opt_.confirm_runs;
    res_.boundary_confirmed = agreed;
    res_.boundary_spread = highest_pass - res_.max_batch;
    return true;
  }

  /// From the trials so far: largest batch measured within the target, smallest seen over it.
  Bracket target_bracket() const {
    Bracket b;
    for (const Trial& t : res_.trials) {
      const bool within = t.ok() && t.peak_reserved_bytes <= res_.target_bytes;
      if (within) b.lo = std::max(b.lo, t.batch);
      else if (b.hi == 0 || t.batch < b.hi) b.hi = t.batch;
    }
    if (b.hi && b.hi <= b.lo) b.hi = 0;  // noise: a smaller batch over, a larger one within
    return b;
  }

  /// Divisors of max_batch only: from start_batch (the largest divisor at or below it) up by
  /// doubling while they fit, or down by halving until one does, then bisection over the divisors
  /// between the last that fit and the first that did not. Each step at least doubles or halves,
  /// so it takes fewer trials than a finder that steps down by 0.9.
  void divisors() {
    std::vector<int64_t> d;
    for (int64_t b = 1; b <= opt_.max_batch; ++b)
      if (opt_.max_batch % b == 0) d.push_back(b);
    const auto n = static_cast<int64_t>(d.size());
    const auto at_most = [&](int64_t batch) {  // index of the largest divisor <= batch (0 at least)
      int64_t i = 0;
      while (i + 1 < n && d[static_cast<size_t>(i + 1)] <= batch) ++i;
      return i;
    };
    const auto at_least = [&](int64_t batch) {  // index of the smallest divisor >= batch (the last at most)
      int64_t i = n - 1;
      while (i > 0 && d[static_cast<size_t>(i - 1)] >= batch) --i;
      return i;
    };
    const auto div = [&](int64_t i) { return d[static_cast<size_t>(i)]; };
    int64_t lo = -1, hi = n;  // indices: the largest divisor seen to fit, the smallest seen not to
    int64_t i = at_most(std::max<int64_t>(1, opt_.start_batch));
    while (true) {
      auto t = run(div(i), timed());
      if (!t) return;
      (t->ok() ? lo : hi) = i;
      if (hi == lo + 1 || lo == n - 1 || hi == 0) break;
      if (hi == n) i = at_least(2 * div(lo));       // every one so far fit: double
      else if (lo == -1) i = at_most(div(hi) / 2);  // none fit yet: halve
      else i = (lo + hi) / 2;                       // bisect the divisors between
    }
    res_.max_batch = lo >= 0 ? div(lo) : 0;
    res_.max_batch_exact = lo >= 0 && hi < n && div(hi) == div(lo) + 1;
    res_.capped = lo == n - 1;  // max_batch itself fits: the step may fit more
    const Bracket rb = target_bracket();
    res_.recommended_batch = rb.lo;
    res_.recommended_exact = rb.closed();
  }

  void power_then_maybe_bisect(bool bisect) {
    Bracket br;
    int64_t batch = std::max<int64_t>(1, opt_.start_batch);
    if (opt_.max_batch) batch = std::min(batch, opt_.max_batch);
    while (true) {
      auto t = run(batch, timed());
      if (!t) return;
      if (!t->ok()) {
        br.hi = batch;
        break;
      }
      br.lo = batch;
      if (opt_.max_batch && batch >= opt_.max_batch) {
        res_.capped = true;
        break;
      }
      batch *= 2;
      if (opt_.max_batch) batch = std::min(batch, opt_.max_batch);
    }
    // the first batch did not fit: halve until one does (Lightning halves on OOM too).
    while (br.lo == 0 && br.hi > 1) {
      const int64_t half = br.hi / 2;
      auto t = run(half, timed());
      if (!t) return;
      (t->ok() ? br.lo : br.hi) = half;
    }
    while (bisect && !br.closed() && br.hi) {
      const int64_t mid = br.lo + (br.hi - br.lo) / 2;
      auto t = run(mid, timed());
      if (!t) return;
      (t->ok() ? br.lo : br.hi) = mid;
    }
    res_.max_batch = br.lo;
    res_.max_batch_exact = br.closed();
    if (bisect) {
      const auto passes = [&](int64_t b) -> std::optional<bool> {
        auto t = run(b, timed());
        if (!t) return std::nullopt;
        return t->ok();
      };
      if (!confirm_boundary(passes)) return;
    }
    const Bracket rb = target_bracket();
    res_.recommended_batch = rb.lo;
    res_.recommended_exact = rb.closed();
  }

 private:
  TrialRunner& runner_;
  const SearchOptions& opt_;
  SearchResult& res_;
};

/// Among the trials up to `limit` (the memory-safe batch): the smallest batch
/// within `tolerance` of the fastest one's samples/s. Never above the limit: a batch past the
/// target is not one to train at, however fast its probe ran.
int64_t throughput_batch(const std::vector<Trial>& trials, double tolerance, int64_t limit) {
  const auto counts = [limit](const Trial& t) { return t.ok() && t.batch <= limit; };
  double best = 0;
  for (const Trial& t : trials)
    if (counts(t)) best = std::max(best, t.samples_per_s);
  int64_t batch = 0;
  for (const Trial& t : trials)
    if (counts(t) && t.samples_per_s >= (1.0 - tolerance) * best && (batch == 0 || t.batch < batch)) batch = t.batch;
  return batch;
}

}  // namespace

SearchResult search_batch_size(TrialRunner& runner, const SearchOptions& options) {
  options.check();
  const auto start = std::chrono::steady_clock::now();
  SearchResult result;
  BatchSearchRun run(runner, options, result);
  switch (options.strategy) {
    case Strategy::kFit: run.fit(); break;
    case Strategy::kPower: run.power_then_maybe_bisect(false); break;
    case Strategy::kBinsearch: run.power_then_maybe_bisect(true); break;
    case Strategy::kDivisors: run.divisors(); break;
  }
  std::vector<std::pair<int64_t, int64_t>> allocated;
  for (const Trial& t : result.trials)
    if (t.ok()) allocated.emplace_back(t.batch, t.peak_allocated_bytes);
  result.memory_model = fit_memory_law(allocated);
  result.throughput_batch = result.recommended_batch > 0 ? throughput_batch(result.trials, options.throughput_tolerance,
                                                                            result.recommended_batch)
                                                         : 0;
  if (result.recommended_batch == 0) result.recommended_exact = false;  // nothing to be exact about
  result.search_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

MemoryGrowth memory_growth(const SearchResult& r) {
  MemoryGrowth g;
  int64_t grew_between_steps = 0;  // a cache grows once, at a trial's first step; a step that keeps, at every step
  for (const Trial& t : r.trials) {
    if (t.steps < 2 || t.step_growth_bytes <= 0) continue;
    grew_between_steps += t.step_growth_bytes;
    ++g.trials_grew;
    g.retained_bytes += std::max<int64_t>(0, t.after_bytes - t.baseline_bytes);
    if (t.ok() && t.batch > g.at_batch) {
      g.at_batch = t.batch;
      g.bytes_per_step = t.step_growth_bytes / (t.steps - 1);
    }
  }
  const int64_t floor_bytes = std::max<int64_t>(int64_t{1} << 20, r.budget_bytes / 100);
  g.significant = g.trials_grew >= 2 && grew_between_steps > floor_bytes && g.at_batch > 0;
  return g;
}

std::string MemoryGrowth::warning() const {
  if (!significant) return "";
  return fmt::format("the step keeps memory alive from one call to the next: {} more allocated after the search "
                     "({} trials grew; at batch {}, {} per step), so the max holds for a trial's few steps, not "
                     "for a run, which grows until it runs out; keep no tensors between steps (loss.item(), "
                     "not loss; outputs detached and dropped)",
                     format_bytes(retained_bytes), trials_grew, at_batch, format_bytes(bytes_per_step));
}

}  // namespace saturate
