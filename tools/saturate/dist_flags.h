// Flags and glue for data-parallel runs of search and train: --backend, --dist-timeout, the
// rendezvous from the environment (torchrun, saturate launch, mpirun, SLURM) and rank 0 output.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "saturate/dist/process_group.h"
#include "saturate/dist/rank_synced.h"

namespace saturate::cli {

struct DistFlags {
  std::string backend = "auto";
  double timeout_s = 300;
  bool rank_max_exact = true;
};
void add_dist_flags(CLI::App& app, DistFlags& f, bool search);

/// Reads the rendezvous; when this process is one rank of several, sets a CUDA device to the
/// local rank's GPU (--device auto|cuda) and checks the flags. Call before open_session.
DistEnv prepare_dist(const DistFlags& f, WorkloadFlags& w);
/// Joins the process group (nullptr for one process).
std::unique_ptr<DistGroup> open_dist(const DistFlags& f, const DistEnv& env, const c10::Device& device);

struct DistSearchResult {
  SearchResult result;
  std::vector<RankMax> ranks;  ///< empty for one process
};
/// The search, rank-synced through `dist` when given (every rank gets the same result).
DistSearchResult run_dist_search(TrialRunner& probe, const SearchOptions& options, DistGroup* dist, bool exact_ranks);
/// "ranks      2 (gloo): rank 0 max 9881 of 256.0 MiB, rank 1 max 4410 of 128.0 MiB; using 4410\n"
std::string rank_text(const std::vector<RankMax>& ranks, const std::string& backend, int64_t used);

}  // namespace saturate::cli
