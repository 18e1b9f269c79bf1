#include "saturate/report/data_text.h"

#include <fmt/format.h>

namespace saturate {

std::string data_text(const DataSource& source, const DataFindings& findings) {
  std::string s = fmt::format("data       {}: {} samples, {} classes\n", source.name, source.samples, source.classes);
  s += fmt::format("workers    {}{}, prefetch {}\n", findings.workers,
                   source.workers_note.empty() ? "" : " (" + source.workers_note + ")", findings.prefetch);
  s += fmt::format("data wait  {:.2f} ms per step ({:.1f} % of the step)\n", findings.wait_ms,
                   100 * findings.wait_fraction);
  if (source.skipped.count > 0 || !source.skipped.reasons.empty()) {
    s += fmt::format("skipped    {} bad samples (`skip_bad_samples`)\n", source.skipped.count);
    for (const auto& r : source.skipped.reasons) s += "           " + r + "\n";
  }
  return s;
}

std::string data_search_text(const DataSource& source, const SearchResult& result) {
  for (const Trial& t : result.trials)
    if (t.ok() && t.batch == result.throughput_batch)
      return "\n" + (t.findings.data ? data_text(source, *t.findings.data) : std::string());
  return "";
}

}  // namespace saturate
