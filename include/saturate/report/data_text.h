// Implements: the data lines for people: the dataset, the loader's workers and prefetch, the
// wait a trial measured, the bad samples skipped (data/ measures into DataFindings, this prints).
#pragma once
#include <cstdint>
#include <string>

#include "saturate/data/data_error.h"
#include "saturate/probe/findings.h"
#include "saturate/search/search.h"

namespace saturate {

/// What the command knows of its data beside a trial's findings.
struct DataSource {
  std::string name;          ///< the dataset's name
  int64_t samples = 0;       ///< the dataset's size
  int64_t classes = 0;
  SkipReport skipped;        ///< bad samples left out so far, with their first reasons
  std::string workers_note;  ///< "auto: ..." when --workers auto chose ("" otherwise)
};

/// "data ...", "workers ...", "data wait ..." and, when samples were skipped, "skipped ..." lines.
std::string data_text(const DataSource& source, const DataFindings& findings);
/// The search's data lines: a blank line, then those of the trial at the throughput batch ("" when
/// no trial there ran).
std::string data_search_text(const DataSource& source, const SearchResult& result);

}  // namespace saturate
