// The monitor's private helpers for readings (not installed): a missing reading and the rounding
// every reading is written with.
#pragma once

#include <cmath>
#include <limits>

namespace saturate::monitor_detail {

/// A reading that is not there (no sample, a sensor that does not answer): NaN, written as null.
inline constexpr double kNoReading = std::numeric_limits<double>::quiet_NaN();

/// A reading rounded to thousandths for the JSON and the text (NaN stays NaN).
inline double round3(double v) { return std::round(v * 1000.0) / 1000.0; }

}  // namespace saturate::monitor_detail
