// Implements: PyTorch's memory snapshot of a timeline's step — the dict that
// torch.cuda.memory._snapshot() returns, pickled as torch.cuda.memory._dump_snapshot writes it —
// so that saturate's recording opens in the tools users know (pytorch.org/memory_viz, and
// torch.cuda._memory_viz's trace, segments and trace_plot helpers), on the CPU budget too.
//   segments:      one segment per allocation live when the step began (its one active block;
//                  what was live before the log began, without an address, at address 0)
//   device_traces: [[ alloc / free_requested / free_completed / oom entries of the step ]]
// The snapshot's replayed peak (live at the start + the trace's running sum) is the timeline's
// peak_allocated_bytes. No Python frames are recorded: every entry's `frames` is empty.
#pragma once
#include <string>

#include "saturate/memory/timeline.h"

namespace saturate {

/// The pickle bytes (protocol 2, plain dicts, lists, strings and ints: Python's pickle.load
/// reads them without torch).
std::string memory_snapshot_pickle(const Timeline& timeline);

}  // namespace saturate
