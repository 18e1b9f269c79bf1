#include "saturate/dist/search_run.h"

#include <fmt/format.h>

namespace saturate {

SearchRun run_search(Probe& probe, const SearchRunOptions& o, Collectives* comm) {
  SearchRun run;
  const bool compare = o.compare_checkpointing && as_block_model(probe.workload().model()) != nullptr;
  if (o.compare_checkpointing && !compare)
    run.not_compared = fmt::format("{} has no blocks to checkpoint", probe.workload().model().name());
  const CheckpointPolicy base = probe.checkpointing();
  if (compare) {
    probe.set_checkpointing({});
    if (o.on_pass) o.on_pass("1/2 without checkpointing");
  }
  run.chosen = search_across_ranks(probe, o.search, comm, o.exact_ranks);
  if (!compare || !run.chosen.result.error.empty()) return run;
  if (o.on_pass) o.on_pass(fmt::format("2/2 with checkpointing {}", to_string(o.with_policy)));
  probe.set_checkpointing(o.with_policy);
  DistSearchResult with = search_across_ranks(probe, o.search, comm, o.exact_ranks);
  run.without = run.chosen.result;
  run.with = with.result;
  run.choice = choose_checkpointing(*run.without, *run.with, to_string(o.with_policy), o.required_batch,
                                    o.search.throughput_tolerance);
  if (run.choice->choice != "none") {
    run.chosen = std::move(with);  // the answer is the chosen curve's
  } else {
    probe.set_checkpointing(base);
  }
  return run;
}

}  // namespace saturate
