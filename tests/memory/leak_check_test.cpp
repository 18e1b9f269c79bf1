// Leak detection on real training runs: keeping each step's loss with its graph is flagged with
// about the graph's size per step; the built-in models stay flat over 50 steps.
#include "saturate/memory/leak_check.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "saturate/core/cpu_budget_allocator.h"
#include "support/support.h"

using namespace saturate;

namespace {

struct Rig {
  explicit Rig(ModelSpec s) {
    at::set_num_threads(1);  // small tensors: threads only add waiting on a loaded machine
    meter = make_memory_meter(torch::kCPU);
    workload = std::make_unique<Workload>(build_model(s), torch::kCPU, OptimizerKind::kAdam);
    meter->set_budget_bytes(int64_t{2} << 30);
  }
  ~Rig() { set_cpu_budget_bytes(0); }
  std::unique_ptr<MemoryMeter> meter;
  std::unique_ptr<Workload> workload;
};

/// What a kept loss holds, measured apart from the detector: the bytes a forward pass leaves
/// allocated while its loss is alive (the graph's saved tensors and the loss itself).
int64_t retained_graph_bytes(Workload& w, MemoryMeter& meter, int64_t batch) {
  Batch data = w.synthetic_batch(batch);
  const int64_t before = meter.stats().allocated_bytes;
  torch::Tensor loss = w.loss(w.model().forward(data.inputs), data.targets);
  return meter.stats().allocated_bytes - before;
}

}  // namespace

TEST(LeakCheckTest, KeepingEachLossWithItsGraphIsFlaggedAtAboutTheGraphsSize) {
  ModelSpec s;
  s.name = "mlp";
  s.width = 256;
  Rig rig(s);
  const int64_t batch = 64;
  const int64_t graph = retained_graph_bytes(*rig.workload, *rig.meter, batch);
  ASSERT_GT(graph, 3 * batch * 256 * 4);  // at least the three saved ReLU outputs
  LeakCheckOptions o;
  o.batch = batch;
  o.steps = 12;
  o.keep_loss_graph = true;
  const int64_t before = rig.meter->stats().allocated_bytes;
  const LeakCheckResult r = run_leak_check(*rig.workload, *rig.meter, o);
  EXPECT_TRUE(r.report.detected);
  EXPECT_NEAR(r.report.bytes_per_step, static_cast<double>(graph), 0.05 * static_cast<double>(graph));
  EXPECT_EQ(r.report.first_step, o.leak.warmup_steps);  // the first step checked after warm-up
  EXPECT_EQ(r.oom_step, -1);
  EXPECT_EQ(rig.meter->stats().allocated_bytes, before);  // the run cleaned up after itself
}

namespace {

void expect_no_leak_over_50_steps(const ModelSpec& s) {
  Rig rig(s);
  LeakCheckOptions o;
  o.batch = 2;
  o.steps = 50;
  const LeakCheckResult r = run_leak_check(*rig.workload, *rig.meter, o);
  EXPECT_FALSE(r.report.detected) << s.name << ": " << r.report.bytes_per_step << " B/step from step "
                                  << r.report.first_step;
  EXPECT_EQ(r.report.steps, 50) << s.name;
  EXPECT_EQ(r.oom_step, -1) << s.name << ": " << r.error;
}

}  // namespace

TEST(LeakCheckTest, MlpDoesNotLeakOver50Steps) {
  ModelSpec s;
  s.name = "mlp";
  s.width = 64;
  expect_no_leak_over_50_steps(s);
}

TEST(LeakCheckTest, ConvnetDoesNotLeakOver50Steps) {
  ModelSpec s;
  s.name = "convnet";
  expect_no_leak_over_50_steps(s);
}

TEST(LeakCheckTest, Resnet18DoesNotLeakOver50Steps) {
  ModelSpec s;
  s.name = "resnet18";
  s.input_shape = {3, 32, 32};
  s.classes = 10;
  expect_no_leak_over_50_steps(s);
}

TEST(LeakCheckTest, GptDoesNotLeakOver50Steps) {
  ModelSpec s;
  s.name = "gpt";
  s.layers = 1;
  s.width = 32;
  s.heads = 2;
  s.seq_len = 16;
  s.vocab = 64;
  expect_no_leak_over_50_steps(s);
}

TEST(LeakCheckTest, LeakWatchWarnsOnceWhenAKeptTensorGrowsEachStep) {
  auto meter = make_memory_meter(torch::kCPU);
  LeakWatch watch(*meter);
  std::vector<torch::Tensor> kept;
  int warnings = 0;
  std::string text;
  for (int step = 0; step < 12; ++step) {
    kept.push_back(torch::zeros({16384}, torch::kFloat));  // 64 KiB a step
    const std::string w = watch.after_step(step);
    if (!w.empty()) {
      ++warnings;
      text = w;
    }
  }
  EXPECT_EQ(warnings, 1);
  EXPECT_NE(text.find("64.0 KiB per step"), std::string::npos) << text;
  EXPECT_NEAR(watch.report().bytes_per_step, 65536, 1);
}
