#include "saturate/report/memory_text.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "saturate/core/units.h"

namespace saturate {

std::string breakdown_table(const MemoryBreakdown& b) {
  const double peak = b.peak_reserved_bytes > 0 ? static_cast<double>(b.peak_reserved_bytes) : 1.0;
  std::string out = fmt::format("memory at the peak (step {}, {}), from the {}\n", b.peak_step, b.peak_phase, b.source);
  const auto row = [&](const char* name, int64_t bytes, const char* how) {
    out += fmt::format("  {:<20} {:>12} {:>6.1f} %   {}\n", name, format_bytes(bytes), 100.0 * bytes / peak, how);
  };
  row("parameters", b.parameters_bytes, "exact: trainable tensor sizes");
  row("gradients", b.gradients_bytes, "measured: made in backward, kept after it");
  row("optimizer state", b.optimizer_state_bytes, "measured: made in the optimizer step, kept after it");
  row("inputs", b.inputs_bytes, "measured: made before the first step (the batch)");
  row("activations", b.activations_bytes, "measured: made in forward, live at the peak");
  row("workspace", b.workspace_bytes, "measured: temporaries of backward/optimizer");
  if (b.communication_bytes || b.gathered_parameters_bytes) {  // a sharded step's (FSDP2)
    row("communication", b.communication_bytes, "measured: made in the collectives (buffers, backend copies)");
    row("gathered weights", b.gathered_parameters_bytes, "measured: units' weights gathered whole");
  }
  row("other", b.other_bytes, "derived: live before the trial - parameters (buffers)");
  row("allocator overhead", b.allocator_overhead_bytes, "derived: peak reserved - peak allocated");
  out += fmt::format("  {:<20} {:>12}            measured: the allocator's peak (parts add up to it)\n",
                     "peak allocated", format_bytes(b.peak_allocated_bytes));
  out += fmt::format("  {:<20} {:>12}\n", "peak reserved", format_bytes(b.peak_reserved_bytes));
  out += fmt::format("  {:<20} {:>12}            measured: forward's live bytes at its end\n", "saved for backward",
                     format_bytes(b.saved_for_backward_bytes));
  if (!b.largest_at_peak.empty()) {
    out += "largest live allocations at the peak\n";
    for (const LiveAllocation& a : b.largest_at_peak)
      out += fmt::format("  {:>12}  {:<16} made in step {} {}\n", format_bytes(a.bytes), a.part, a.step, a.phase);
  }
  if (b.truncated) out += "warning: the event log overflowed; parts after the overflow are missing\n";
  return out;
}

std::string plan_text(const PlanResult& p) {
  std::string s = fmt::format("plan for {} ({}): a PREDICTION, not a measurement\n", p.target, format_bytes(p.capacity_bytes));
  s += fmt::format("  max_batch          {}{} (predicted allocator peak {})\n", p.max_batch,
                   p.batch_limited ? " (the batch limit; more may fit)" : "", format_bytes(p.predicted_max_peak_bytes));
  s += fmt::format("  recommended_batch  {} (predicted allocator peak {}, target {:.0f} % = {})\n", p.recommended_batch,
                   format_bytes(p.predicted_peak_bytes), 100 * p.target_fraction, format_bytes(p.target_bytes));
  s += fmt::format("  how: {}{}.\n", p.method, p.device_here.empty() ? "" : ", recorded on " + p.device_here);
  s += "  check it on the card with: saturate search `device` cuda\n";
  return s;
}

std::string timeline_summary(const Timeline& t) {
  std::string s = fmt::format("timeline   step {}: {} at the start, peak {} at {:.1f} ms ({}), step {:.1f} ms\n", t.step,
                              format_bytes(t.start_bytes), format_bytes(t.peak_allocated_bytes), t.peak_ms,
                              t.peak_phase.empty() ? "-" : t.peak_phase, t.duration_ms);
  for (const TimelinePhase& p : t.phases)
    s += fmt::format("           {:<10} {:8.1f} - {:8.1f} ms\n", p.phase, p.begin_ms, p.end_ms);
  return s;
}

namespace {
/// Host growth per step worth a word when the tensors were flat (the allocator's own pools and
/// the interpreter move by less).
constexpr double kHostGrowthNoteBytesPerStep = 1 << 20;
}  // namespace

std::string leak_text(const LeakCheckResult& r, int steps) {
  const LeakReport& l = r.report;
  std::string s;
  if (!r.checked())
    s = fmt::format("leak       not checked: {} of the {} steps a verdict needs ran{}\n", l.steps, r.steps_needed,
                    r.oom_step >= 0 ? fmt::format(" (out of memory at step {}: lower the batch or raise the budget)",
                                                  r.oom_step)
                                    : "");
  else if (l.detected)
    s = fmt::format("leak       DETECTED: +{} per step from step {} ({} -> {} over {} steps)\n",
                    format_bytes(static_cast<int64_t>(l.bytes_per_step)), l.first_step, format_bytes(l.warm_bytes),
                    format_bytes(l.last_bytes), l.steps);
  else
    s = fmt::format("leak       none: allocated after each step flat once warm ({} over {} steps)\n",
                    format_bytes(l.last_bytes), l.steps);
  if (l.detected && !r.sites.empty())
    s += fmt::format("           left alive per step by: {}\n", leak_sites_text(r.sites, 5));
  else if (l.detected && !r.sites_method.empty() && r.sites_method.rfind("not ", 0) == 0)
    s += fmt::format("           allocation sites {}\n", r.sites_method);
  if (r.oom_step >= 0) s += fmt::format("           the run ran out of memory at step {} of {}\n", r.oom_step, steps);
  if (r.host_growth_bytes) {
    // the verdict is about tensors; say what the process did beside them
    const int64_t growth = *r.host_growth_bytes;
    const double per_step = static_cast<double>(growth) / std::max(1, r.host_growth_steps);
    s += fmt::format("           watched: tensor bytes after each step; the process's resident memory {} {} over "
                     "the {} steps after warm-up{}\n",
                     growth >= 0 ? "grew" : "shrank", format_bytes(std::abs(growth)),
                     r.host_growth_steps,
                     !l.detected && per_step >= kHostGrowthNoteBytesPerStep
                         ? fmt::format(" ({}/step while tensors stayed flat: something outside tensors is kept "
                                       "from step to step, such as Python objects or the autograd graphs they hold)",
                                       format_bytes(static_cast<int64_t>(per_step)))
                         : "");
  }
  return s;
}

}  // namespace saturate
