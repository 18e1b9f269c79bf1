// Implements: opening a dataset from its --data spec, and the held-out (val) split of images:
// and wds: data.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "formats.h"
#include "saturate/data/sampler.h"

namespace saturate {
namespace {

std::string format_fraction(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", f);
  return buf;
}

/// 64-bit FNV-1a of the key, then splitmix64's finaliser (FNV alone clusters similar keys).
uint64_t key_hash(const std::string& key) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char c : key) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return mix64(h);
}

void check_fraction(double fraction) {
  if (!(fraction >= 0 && fraction < 1))  // NaN too
    throw UsageError("`val_fraction` " + format_fraction(fraction) +
                     ": must be at least 0 and below 1 (the share of samples held out for validation, e.g. 0.1; 0: "
                     "none)");
}

}  // namespace

bool can_hold_out(const std::string& spec) {
  return spec.rfind("images:", 0) == 0 || spec.rfind("wds:", 0) == 0;
}

std::vector<bool> held_out_keys(const std::vector<std::string>& keys, double fraction, const std::string& spec) {
  check_fraction(fraction);
  const auto n = static_cast<int64_t>(keys.size());
  std::vector<bool> held(keys.size(), false);
  if (fraction == 0 || n == 0) return held;
  const auto k = static_cast<int64_t>(std::llround(fraction * static_cast<double>(n)));
  const std::string f = format_fraction(fraction), count = std::to_string(n);
  if (k == 0)
    throw UsageError("`val_fraction` " + f + " holds out no sample of the " + count + " in " + spec + " (" + f + " x " +
                     count + " rounds to 0); give at least " + format_fraction(0.5 / static_cast<double>(n)) +
                     " or add samples");
  if (k >= n)
    throw UsageError("`val_fraction` " + f + " leaves no training sample of the " + count + " in " + spec +
                     "; give a smaller fraction (below " + format_fraction(1 - 0.5 / static_cast<double>(n)) + ")");
  std::vector<uint64_t> hash(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) hash[i] = key_hash(keys[i]);
  const auto less = [&](size_t a, size_t b) { return hash[a] != hash[b] ? hash[a] < hash[b] : keys[a] < keys[b]; };
  std::vector<size_t> order(keys.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::nth_element(order.begin(), order.begin() + (k - 1), order.end(), less);
  const size_t last = order[static_cast<size_t>(k - 1)];  // the k-th smallest (hash, key)
  // every sample up to it, those with its very key included: order-free even with duplicate keys
  for (size_t i = 0; i < keys.size(); ++i) held[i] = !less(last, i);
  return held;
}

namespace data {

std::vector<bool> keep_for_split(const std::vector<std::string>& keys, const DatasetOptions& o, const std::string& spec) {
  if (o.split == "test")
    throw UsageError("`data` " + spec +
                     " has no test split; hold out a validation split with `val_fraction` F (e.g. 0.1)");
  if (o.split != "train" && o.split != "val")
    throw UsageError("`data` " + spec + ": unknown split '" + o.split + "' (expected train or val)");
  if (o.split == "val" && o.val_fraction == 0)
    throw UsageError("`data` " + spec + ": the val split needs `val_fraction` F > 0 (e.g. 0.1)");
  std::vector<bool> keep = held_out_keys(keys, o.val_fraction, spec);
  if (o.split == "train") keep.flip();
  return keep;
}

std::string split_suffix(const DatasetOptions& o) {
  return o.val_fraction > 0 ? " (" + o.split + ", val-fraction " + format_fraction(o.val_fraction) + ")" : "";
}

}  // namespace data

std::string to_string(const SampleShape& s) {
  return std::to_string(s.channels) + "x" + std::to_string(s.height) + "x" + std::to_string(s.width);
}

std::unique_ptr<Dataset> open_dataset(const std::string& spec, const DatasetOptions& o) {
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const std::string arg = colon == std::string::npos ? "" : spec.substr(colon + 1);
  const auto need_arg = [&](const char* what) {
    if (arg.empty())
      throw UsageError("`data` " + spec + ": give " + what + " after the colon, e.g. " + kind + ":/data/" + kind);
  };
  // held-out data: a real test split (IDX, CIFAR), or --val-fraction's val split (images:, wds:)
  check_fraction(o.val_fraction);
  const bool holds_out = kind == "images" || kind == "wds";
  const bool synthetic = kind == "synthetic";
  const bool has_test = kind == "fashion-mnist" || kind == "fashion_mnist" || kind == "idx" || kind == "mnist" ||
                        kind == "cifar10" || kind == "cifar100";
  if (o.val_fraction > 0 && (has_test || synthetic)) {
    throw UsageError("`val_fraction` " + format_fraction(o.val_fraction) + ": `data` " + spec +
                     (synthetic ? " has no fixed samples to hold out (they are random)"
                                : " has its own test split, which training evaluates on") +
                     "; drop `val_fraction` (it holds out samples of images:DIR and wds: data only)");
  }
  if (holds_out && o.split == "test")
    throw UsageError("`data` " + spec + " has no test split; hold out a validation split with `val_fraction` F (e.g. 0.1)");
  if ((has_test || synthetic) && o.split == "val")
    throw UsageError("`data` " + spec + ": no val split (" +
                     (synthetic ? std::string("synthetic samples are random") : "it has a test split") + ")");
  if (kind == "fashion-mnist" || kind == "fashion_mnist") {
    const std::string dir = arg.empty() ? o.fashion_mnist_dir : arg;
    if (!data::is_directory(dir))
      throw UsageError("`data` fashion-mnist: " + dir +
                       " does not exist; install Debian's dataset-fashion-mnist (scripts/setup.sh does), or give "
                       "idx:DIR");
    return open_idx_dir(dir, o);
  }
  if (kind == "idx" || kind == "mnist") {
    need_arg("a folder of IDX files");
    return open_idx_dir(arg, o);
  }
  if (kind == "cifar10" || kind == "cifar100") {
    need_arg("the folder of the binary batches");
    return open_cifar(arg, kind == "cifar10" ? 10 : 100, o);
  }
  if (kind == "images") {
    need_arg("a folder with one sub-folder per class");
    return open_image_folder(arg, o);
  }
  if (kind == "wds") {
    need_arg("a folder of tar shards or a glob");
    return open_webdataset(arg, o);
  }
  if (kind == "synthetic" && arg.empty()) {
    // sample i is the same in every split: a "test" split would be the training samples
    if (o.split != "train")
      throw UsageError("`data` synthetic has no test split (its samples are random; the same in every split)");
    return open_synthetic(o);
  }
  throw UsageError("`data`: unknown value '" + spec +
                   "' (expected fashion-mnist, idx:DIR, cifar10:DIR, cifar100:DIR, images:DIR, wds:DIR|GLOB or "
                   "synthetic)");
}

}  // namespace saturate
