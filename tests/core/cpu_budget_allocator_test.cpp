#include "saturate/core/cpu_budget_allocator.h"

#include <pthread.h>

#include <thread>

#include <torch/torch.h>

#include "saturate/core/memory_meter.h"
#include "saturate/core/oom.h"
#include "support/support.h"

using namespace saturate;

namespace {
/// Sets a budget for one test and lifts it afterwards.
struct ScopedBudget {
  explicit ScopedBudget(int64_t bytes) { set_cpu_budget_bytes(bytes); }
  ~ScopedBudget() { set_cpu_budget_bytes(0); }
};
}  // namespace

TEST(CpuBudgetAllocatorTest, IsInstalledAsLibTorchsCpuAllocator) {
  EXPECT_TRUE(cpu_budget_allocator_installed());
}

TEST(CpuBudgetAllocatorTest, CountsEveryTensorByte) {
  const int64_t before = cpu_memory_counters().allocated_bytes;
  {
    auto t = torch::empty({1000, 250}, torch::kFloat);  // 1,000,000 bytes
    EXPECT_EQ(cpu_memory_counters().allocated_bytes - before, 1000000);
    auto d = torch::empty({1000}, torch::kDouble);
    EXPECT_EQ(cpu_memory_counters().allocated_bytes - before, 1008000);
  }
  EXPECT_EQ(cpu_memory_counters().allocated_bytes, before);
}

TEST(CpuBudgetAllocatorTest, ThrowsOutOfMemoryErrorPastTheBudgetAndStaysHealthy) {
  const int64_t before = cpu_memory_counters().allocated_bytes;
  ScopedBudget budget(before + (8 << 20));
  auto fits = torch::ones({1 << 20}, torch::kFloat);  // 4 MiB
  try {
    auto too_big = torch::ones({2 << 20}, torch::kFloat);  // 8 MiB more
    FAIL() << "expected an out-of-memory error";
  } catch (const c10::OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("CPU budget exceeded"), std::string::npos);
    EXPECT_TRUE(is_out_of_memory(e));
  }
  EXPECT_EQ(cpu_memory_counters().allocated_bytes - before, 4 << 20);
  auto again = torch::ones({512 << 10}, torch::kFloat);  // 2 MiB still fits
  EXPECT_FLOAT_EQ(again.sum().item<float>(), 512.f * 1024.f);
}

TEST(CpuBudgetAllocatorTest, OutOfMemoryInsideBackwardIsCaughtAndReleased) {
  auto w = torch::randn({512, 512}, torch::requires_grad());
  const int64_t before = cpu_memory_counters().allocated_bytes;
  // forward of 64 chained matmuls keeps ~64 MiB of activations; backward needs more.
  ScopedBudget budget(before + (70 << 20));
  bool oom = false;
  try {
    auto x = torch::randn({4096, 512});
    for (int i = 0; i < 8; ++i) x = torch::tanh(x.mm(w));
    x.sum().backward();
  } catch (const std::exception& e) {
    oom = is_out_of_memory(e);
  }
  EXPECT_TRUE(oom);
  w.mutable_grad() = torch::Tensor();
  EXPECT_EQ(cpu_memory_counters().allocated_bytes, before);
}

TEST(CpuBudgetAllocatorTest, MeterReportsPeakSinceReset) {
  auto meter = make_memory_meter(torch::kCPU);
  meter->reset_peak();
  const int64_t base = meter->stats().allocated_bytes;
  { auto t = torch::empty({3 << 20}, torch::kByte); }
  const MemoryStats s = meter->stats();
  EXPECT_EQ(s.allocated_bytes, base);
  EXPECT_EQ(s.peak_allocated_bytes - base, 3 << 20);
  EXPECT_EQ(s.peak_reserved_bytes, s.peak_allocated_bytes);
}

TEST(CpuBudgetAllocatorTest, GloosWorkerThreadsBuffersAreLeftOutOfTheBudgetAndOtherThreadsAreCounted) {
  // Gloo stages a collective's buffers on its worker threads ("pt_gloo_runloop") while the
  // step's thread runs on; counted, they made the same FSDP step fit or run out of memory by
  // the scheduler's timing. A loader's or any other thread's tensors are counted.
  const auto allocated_on = [](const char* thread_name) {
    int64_t counted = -1;
    std::thread t([&] {
      pthread_setname_np(pthread_self(), thread_name);
      const int64_t before = cpu_memory_counters().allocated_bytes;
      auto staged = torch::empty({1 << 18}, torch::kFloat);  // 1 MiB
      counted = cpu_memory_counters().allocated_bytes - before;
    });
    t.join();
    return counted;
  };
  EXPECT_EQ(allocated_on("pt_gloo_runloop"), 0);
  EXPECT_EQ(allocated_on("loader"), 1 << 20);
  // and a buffer Gloo's thread made, freed elsewhere, leaves the count as it was
  const int64_t before = cpu_memory_counters().allocated_bytes;
  torch::Tensor kept;
  std::thread t([&] {
    pthread_setname_np(pthread_self(), "pt_gloo_runloop");
    kept = torch::empty({1 << 18}, torch::kFloat);
  });
  t.join();
  kept = torch::Tensor();
  EXPECT_EQ(cpu_memory_counters().allocated_bytes, before);
}
