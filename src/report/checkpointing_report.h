// Implements: the report of `search --checkpointing auto`: both curves (without and with
// checkpointing) as JSON and as a short side-by-side table, and the choice with its reason.
#pragma once
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "saturate/search/checkpointing_choice.h"

namespace saturate {

/// One search as a curve: its trials (batch, status, peaks, step time, samples/s), the fitted
/// memory law, max/recommended batch, the recommended batch's measured samples/s (null when
/// no trial ran exactly there) and the fastest usable batch.
nlohmann::json checkpointing_curve_json(const SearchResult& r);

/// {policy: "auto", choice, reason, curves: {none: ..., <with_policy>: ...}}.
nlohmann::json checkpointing_auto_json(const CheckpointingChoice& c, const SearchResult& without,
                                       const SearchResult& with, const std::string& with_policy);

/// The choice, its reason and both curves side by side, for people.
std::string checkpointing_auto_text(const CheckpointingChoice& c, const SearchResult& without,
                                    const SearchResult& with, const std::string& with_policy);

}  // namespace saturate
