// Implements: the error every dataset and the loader throw for bad data, naming the file, the
// byte offset and (when known) the sample: "FILE at byte N: what is wrong". Bad data is bad
// input, so DataError is a UsageError (exit status 2).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "saturate/core/errors.h"

namespace saturate {

class DataError : public UsageError {
 public:
  /// `offset` < 0: no byte offset applies (a missing file, an empty folder).
  DataError(std::string file, int64_t offset, const std::string& problem)
      : UsageError(compose(file, offset, problem)), file_(std::move(file)), offset_(offset), problem_(problem) {}
  const std::string& file() const { return file_; }
  int64_t offset() const { return offset_; }
  const std::string& problem() const { return problem_; }

 private:
  static std::string compose(const std::string& file, int64_t offset, const std::string& problem) {
    return offset >= 0 ? file + " at byte " + std::to_string(offset) + ": " + problem : file + ": " + problem;
  }
  std::string file_;
  int64_t offset_;
  std::string problem_;
};

/// Samples left out under --skip-bad-samples: how many, and the first few reasons.
struct SkipReport {
  int64_t count = 0;
  std::vector<std::string> reasons;  ///< at most kMaxReasons, in the order met
  static constexpr size_t kMaxReasons = 8;
  void add(const std::string& reason, int64_t samples = 1) {
    count += samples;
    if (reasons.size() < kMaxReasons) reasons.push_back(reason);
  }
  void merge(const SkipReport& o) {
    count += o.count;
    for (const auto& r : o.reasons)
      if (reasons.size() < kMaxReasons) reasons.push_back(r);
  }
};

}  // namespace saturate
