// Implements: a count a user gives, or leaves to saturate to choose ("auto"), as the options that
// take one hold it (issue 46): not a 0 or a -1 beside real counts. An option whose absence means
// something else again (no evaluation batch given: the default rule) is an
// std::optional<CountOrAuto>.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace saturate {

class CountOrAuto {
 public:
  /// "auto": saturate chooses.
  static CountOrAuto automatic() { return CountOrAuto(); }
  /// A count as given (validated by the option that holds it).
  static CountOrAuto of(int64_t count) {
    CountOrAuto c;
    c.count_ = count;
    return c;
  }

  bool is_auto() const { return !count_.has_value(); }
  /// The count given; 0 for auto (for arithmetic that treats "not given" as 0).
  int64_t given_or_zero() const { return count_.value_or(0); }
  /// The count given; nullopt for auto.
  const std::optional<int64_t>& given() const { return count_; }
  /// "auto" or the count, as a user writes it.
  std::string to_string() const { return count_ ? std::to_string(*count_) : "auto"; }
  bool operator==(const CountOrAuto& other) const { return count_ == other.count_; }
  bool operator!=(const CountOrAuto& other) const { return !(*this == other); }

 private:
  CountOrAuto() = default;
  std::optional<int64_t> count_;
};

}  // namespace saturate
