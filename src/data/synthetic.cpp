// Implements: the synthetic dataset: random but reproducible pixels and labels (sample i is the
// same whoever asks), in the model's shape, through the same interface as real data.
#include "formats.h"

namespace saturate::data {
namespace {

/// Random but reproducible pixels: sample i is the same whoever asks.
class SyntheticDataset final : public Dataset {
 public:
  explicit SyntheticDataset(const DatasetOptions& o)
      : shape_(o.synthetic_shape), classes_(o.synthetic_classes), size_(o.synthetic_size), seed_(o.seed) {
    if (shape_.empty()) throw UsageError("`data` synthetic: the sample shape " + to_string(shape_) + " is empty");
    if (classes_ < 1 || size_ < 1) throw UsageError("`data` synthetic: needs at least one class and one sample");
  }
  std::string name() const override { return "synthetic"; }
  int64_t size() const override { return size_; }
  int64_t classes() const override { return classes_; }
  SampleShape shape() const override { return shape_; }
  int64_t get(int64_t index, int64_t, Image& out) const override {
    out.resize(shape_.height, shape_.width, shape_.channels);
    uint64_t x = seed_ * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(index) + 1;
    for (auto& p : out.pixels) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      p = static_cast<uint8_t>(x >> 24);
    }
    return static_cast<int64_t>((static_cast<uint64_t>(index) * 2654435761u + seed_) % static_cast<uint64_t>(classes_));
  }
  std::string locate(int64_t index) const override { return "synthetic sample " + std::to_string(index); }

 private:
  SampleShape shape_;
  int64_t classes_, size_;
  uint64_t seed_;
};

}  // namespace
}  // namespace saturate::data

namespace saturate {

std::unique_ptr<Dataset> open_synthetic(const DatasetOptions& o) { return std::make_unique<data::SyntheticDataset>(o); }

}  // namespace saturate
