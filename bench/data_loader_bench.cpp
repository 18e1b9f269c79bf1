// Loader throughput alone: how many samples/s saturate's loader decodes and augments into
// batches, with nothing else running. bench/data_loader.py runs it next to PyTorch's DataLoader.
//   saturate_data_bench --data images:DIR --workers 2 --batch 64 --batches 60 --shape 3x128x128
// Prints one JSON line.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

#include "saturate/data/dataset.h"
#include "saturate/data/loader.h"

int main(int argc, char** argv) {
  using namespace saturate;
  std::string spec, shape_text;
  int workers = 1, prefetch = 2;
  int64_t batch = 64, batches = 0, warmup = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--data") spec = v;
    else if (a == "--workers") workers = std::stoi(v);
    else if (a == "--prefetch") prefetch = std::stoi(v);
    else if (a == "--batch") batch = std::stoll(v);
    else if (a == "--batches") batches = std::stoll(v);
    else if (a == "--warmup") warmup = std::stoll(v);
    else if (a == "--shape") shape_text = v;
    else {
      std::cerr << "unknown flag " << a << "\n";
      return 2;
    }
  }
  try {
    std::shared_ptr<Dataset> ds = open_dataset(spec, {});
    LoaderOptions o;
    o.batch_size = batch;
    o.workers = workers;
    o.prefetch = prefetch;
    o.augment.mean = {0.5f, 0.5f, 0.5f};
    o.augment.std = {0.25f, 0.25f, 0.25f};
    if (!shape_text.empty()) {
      long c = 0, h = 0, w = 0;
      std::sscanf(shape_text.c_str(), "%ldx%ldx%ld", &c, &h, &w);
      o.shape = {c, h, w};
    }
    Loader loader(ds, o);
    if (batches <= 0) batches = loader.batches_per_epoch();
    for (int64_t i = 0; i < warmup; ++i) loader.next();
    const auto start = std::chrono::steady_clock::now();
    int64_t samples = 0;
    double checksum = 0;
    for (int64_t i = 0; i < batches; ++i) {
      const LoadedBatch b = loader.next();
      samples += b.inputs.size(0);
      checksum += b.inputs.data_ptr<float>()[0];
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("{\"loader\": \"saturate\", \"workers\": %d, \"batch\": %ld, \"samples\": %ld, \"seconds\": %.4f, "
                "\"samples_per_s\": %.1f, \"wait_ms_total\": %.1f, \"checksum\": %.3f}\n",
                workers, static_cast<long>(batch), static_cast<long>(samples), s, samples / s,
                loader.stats().wait_ms_total, checksum);
  } catch (const std::exception& e) {
    std::cerr << "saturate_data_bench: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
