// Leak detection on real training runs: keeping each step's loss with its graph is flagged with
// about the graph's size per step; the built-in models stay flat over 50 steps.
#include "saturate/memory/leak_check.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "saturate/core/cpu_budget_allocator.h"
#include "support/support.h"

using namespace saturate;

namespace {

struct LeakRig {
  explicit LeakRig(ModelSpec s) {
    at::set_num_threads(1);  // small tensors: threads only add waiting on a loaded machine
    meter = make_memory_meter(torch::kCPU);
    workload = std::make_unique<Workload>(build_model(s), torch::kCPU, OptimizerKind::kAdam);
    meter->set_budget_bytes(int64_t{2} << 30);
  }
  ~LeakRig() { set_cpu_budget_bytes(0); }
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
  LeakRig rig(s);
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
  // the sites: together about the graph's size, all made by the forward pass (the kept graph
  // holds forward activations such as the ReLU outputs; backward's and the optimizer's buffers
  // are freed each step)
  ASSERT_FALSE(r.sites.empty()) << r.sites_method;
  double sites_bytes = 0;
  bool relu = false;
  for (const LeakSite& site : r.sites) {
    sites_bytes += site.bytes_per_step;
    EXPECT_EQ(site.site.rfind("backward", 0), std::string::npos) << site.site;
    EXPECT_NE(site.site, "(unknown)");
    relu = relu || site.site.find("aten::relu") != std::string::npos;
  }
  EXPECT_NEAR(sites_bytes, static_cast<double>(graph), 0.05 * static_cast<double>(graph));
  EXPECT_TRUE(relu) << leak_sites_json(r.sites).dump();  // ReLU saves its output for backward
  EXPECT_EQ(r.sites_method.rfind("CPU allocator event log", 0), 0u) << r.sites_method;
}

TEST(LeakSitesTest, OnlyAllocationsOutlivingTheirStepCountAndTheLastStepIsLeftOut) {
  CpuEventLog log;
  const char* kept = "aten::linear > aten::addmm";
  const char* temp = "aten::relu";
  using E = CpuAllocationEvent;
  // step 0: a kept 100 B allocation, a freed temporary, a free of memory from before the window
  log.events.push_back({E::kAlloc, 100, 0x10, 0, kept});
  log.events.push_back({E::kAlloc, 50, 0x20, 0, temp});
  log.events.push_back({E::kFree, 50, 0x20, 0, nullptr});
  log.events.push_back({E::kFree, 999, 0x99, 0, nullptr});
  // step 1: another kept 300 B, a 40 B one with no site, a temporary freed in step 2
  log.events.push_back({E::kAlloc, 300, 0x30, 0, kept});
  log.events.push_back({E::kAlloc, 40, 0x40, 0, nullptr});
  log.events.push_back({E::kAlloc, 70, 0x50, 0, temp});
  // step 2 (the last): frees step 1's temporary, allocates what the next step would free
  log.events.push_back({E::kFree, 70, 0x50, 0, nullptr});
  log.events.push_back({E::kAlloc, 5000, 0x60, 0, temp});
  const std::vector<LeakSite> sites = leaked_sites(log, {4, 7, 9});
  ASSERT_EQ(sites.size(), 2u) << leak_sites_json(sites).dump();
  EXPECT_EQ(sites[0].site, kept);
  EXPECT_DOUBLE_EQ(sites[0].bytes_per_step, 200.0);  // (100 + 300) over the two counted steps
  EXPECT_DOUBLE_EQ(sites[0].allocations_per_step, 1.0);
  EXPECT_EQ(sites[1].site, "(unknown)");
  EXPECT_DOUBLE_EQ(sites[1].bytes_per_step, 20.0);
  EXPECT_TRUE(leaked_sites(log, {9}).empty());  // one step: nothing can be told apart
}

namespace {

void expect_no_leak_over_50_steps(const ModelSpec& s) {
  LeakRig rig(s);
  LeakCheckOptions o;
  o.batch = 2;
  o.steps = 50;
  const LeakCheckResult r = run_leak_check(*rig.workload, *rig.meter, o);
  EXPECT_FALSE(r.report.detected) << s.name << ": " << r.report.bytes_per_step << " B/step from step "
                                  << r.report.first_step;
  EXPECT_EQ(r.report.steps, 50) << s.name;
  EXPECT_EQ(r.oom_step, -1) << s.name << ": " << r.error;
  // and the site steps find nothing left alive
  double sites_bytes = 0;
  for (const LeakSite& site : r.sites) sites_bytes += site.bytes_per_step;
  EXPECT_LT(sites_bytes, 1024.0) << s.name << ": " << leak_sites_json(r.sites).dump();
  EXPECT_EQ(r.sites_method.rfind("CPU allocator event log", 0), 0u) << r.sites_method;
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

TEST(LeakCheckTest, LeakWatchWarnsOnceWhenAKeptTensorGrowsEachStepThenNamesItsSite) {
  auto meter = make_memory_meter(torch::kCPU);
  LeakWatch watch(*meter);
  std::vector<torch::Tensor> kept;
  std::vector<std::string> lines;
  for (int step = 0; step < 16; ++step) {
    kept.push_back(torch::zeros({16384}, torch::kFloat));  // 64 KiB a step
    const std::string w = watch.after_step(step);
    if (!w.empty()) lines.push_back(w);
  }
  ASSERT_EQ(lines.size(), 2u);  // the warning, once; then, five steps later, the site
  EXPECT_NE(lines[0].find("64.0 KiB per step"), std::string::npos) << lines[0];
  EXPECT_NEAR(watch.report().bytes_per_step, 65536, 1);
  EXPECT_NE(lines[1].find("aten::zeros 64.0 KiB/step"), std::string::npos) << lines[1];
  ASSERT_EQ(watch.sites().size(), 1u);
  EXPECT_EQ(watch.sites()[0].site, "aten::zeros");
  EXPECT_DOUBLE_EQ(watch.sites()[0].bytes_per_step, 65536.0);
  EXPECT_FALSE(cpu_event_log_active());  // the site steps are over: the log is free again
}
