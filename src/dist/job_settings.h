// Implements: what this process runs, as every rank of a job must run it (issue 43: ranks on
// different commands or models aborted in Gloo with "collective mismatch" after 3-27 s). The
// command and the settings that must agree, recorded once before any work; the rendezvous
// (DistGroup::connect) publishes them, and rank 0 compares every rank's with its own before any
// collective: a difference is a UsageError on every rank naming the setting, both values and
// both ranks. Per-rank settings (a rank's device, budget, threads, outputs) are left out by the
// caller. Nothing recorded: nothing compared (a library user's own group).
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace saturate {

struct JobSettings {
  std::vector<std::pair<std::string, std::string>> items;  ///< {"command", "search"}, {"model", "mlp"}, ...
  /// One line per item, "name=value" (control characters shown as '?'), for the store.
  std::string text() const;
  /// From text(); the items in order.
  static JobSettings parse(const std::string& text);
  /// "" when equal; else the first difference, in words: "`model` convnet (rank 0 has mlp)".
  /// `theirs_name` names the other side ("rank 0").
  std::string difference(const JobSettings& theirs, const std::string& theirs_name) const;
};

/// Records what this process runs (replacing what was recorded).
void set_job_settings(JobSettings settings);
/// What was recorded (empty when nothing was).
const JobSettings& job_settings();

}  // namespace saturate
