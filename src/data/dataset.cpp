// Implements: opening a dataset from its --data spec.
#include "formats.h"

namespace saturate {

std::string to_string(const SampleShape& s) {
  return std::to_string(s.channels) + "x" + std::to_string(s.height) + "x" + std::to_string(s.width);
}

std::unique_ptr<Dataset> open_dataset(const std::string& spec, const DatasetOptions& o) {
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const std::string arg = colon == std::string::npos ? "" : spec.substr(colon + 1);
  const auto need_arg = [&](const char* what) {
    if (arg.empty())
      throw UsageError("--data " + spec + ": give " + what + " after the colon, e.g. " + kind + ":/data/" + kind);
  };
  if (kind == "fashion-mnist" || kind == "fashion_mnist") {
    const std::string dir = arg.empty() ? o.fashion_mnist_dir : arg;
    if (!data::is_directory(dir))
      throw UsageError("--data fashion-mnist: " + dir +
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
  if (kind == "synthetic" && arg.empty()) return open_synthetic(o);
  throw UsageError("--data: unknown value '" + spec +
                   "' (expected fashion-mnist, idx:DIR, cifar10:DIR, cifar100:DIR, images:DIR, wds:DIR|GLOB or "
                   "synthetic)");
}

}  // namespace saturate
