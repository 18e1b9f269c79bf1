#include "dist_flags.h"

#include <fmt/format.h>

#include "saturate/core/device.h"
#include "saturate/core/errors.h"
#include "saturate/core/units.h"

namespace saturate::cli {

void add_dist_flags(CLI::App& app, DistFlags& f, bool search) {
  app.add_option("--backend", f.backend,
                 "process group when started as several ranks (saturate launch, torchrun, mpirun, srun): "
                 "auto (nccl on CUDA, gloo on CPU) | nccl | gloo")
      ->capture_default_str()
      ->envname("SATURATE_BACKEND");
  app.add_option("--dist-timeout", f.timeout_s,
                 "seconds a rendezvous or collective waits for the other ranks before failing")
      ->capture_default_str()
      ->envname("SATURATE_DIST_TIMEOUT");
  if (search)
    app.add_flag("!--no-rank-max", f.rank_max_exact,
                 "with unequal ranks, skip the local search that finds each larger rank's own max exactly");
}

DistEnv prepare_dist(const DistFlags& f, WorkloadFlags& w) {
  (void)parse_dist_backend(f.backend);
  if (!(f.timeout_s > 0))
    throw UsageError(fmt::format("--dist-timeout: {} is not a positive number of seconds (e.g. 300)", f.timeout_s));
  DistEnv env = read_dist_env();
  if (env.distributed() && (w.device == "cuda" || (w.device == "auto" && cuda_available())))
    w.device = fmt::format("cuda:{}", env.local_rank);
  return env;
}

std::unique_ptr<DistGroup> open_dist(const DistFlags& f, const DistEnv& env, const c10::Device& device) {
  if (!env.distributed()) return nullptr;
  DistOptions o;
  o.backend = parse_dist_backend(f.backend);
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(f.timeout_s * 1000));
  return DistGroup::connect(env, o, device.is_cuda(), device.is_cuda() ? device.index() : 0);
}

DistSearchResult run_dist_search(TrialRunner& probe, const SearchOptions& options, DistGroup* dist,
                                 bool exact_ranks) {
  DistSearchResult out;
  if (!dist) {
    out.result = search_batch_size(probe, options);
    return out;
  }
  RankSyncedRunner synced(probe, *dist);
  out.result = search_batch_size(synced, options);
  if (out.result.error.empty()) out.ranks = rank_maxima(synced, options, exact_ranks);
  return out;
}

std::string rank_text(const std::vector<RankMax>& ranks, const std::string& backend, int64_t used) {
  if (ranks.empty()) return "";
  std::string s = fmt::format("ranks              {} ({}):", ranks.size(), backend);
  for (const RankMax& r : ranks)
    s += fmt::format(" rank {} max {}{} of {};", r.rank, r.exact ? "" : ">=", r.max_batch,
                     format_bytes(r.budget_bytes));
  s += fmt::format(" every rank uses {}\n", used);
  return s;
}

}  // namespace saturate::cli
