// A TorchScript file written by the installed torch's Python loads and trains for real.
#include <torch/torch.h>

#include "saturate/core/errors.h"
#include "saturate/core/memory_meter.h"
#include "saturate/models/zoo.h"
#include "saturate/probe/probe.h"
#include "support/support.h"

using namespace saturate;

namespace {

std::string export_model(const std::string& dir, const std::string& how) {
  const std::string path = dir + "/model_" + how + ".pt";
  const std::string script =
      "import torch, sys\n"
      "torch.manual_seed(0)\n"
      "m = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(),\n"
      "    torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 10))\n"
      "m = torch.jit.script(m) if sys.argv[2] == 'script' else torch.jit.trace(m, torch.randn(2, 1, 28, 28))\n"
      "m.save(sys.argv[1])\n";
  const std::string py = dir + "/export.py";
  FILE* f = fopen(py.c_str(), "w");
  fputs(script.c_str(), f);
  fclose(f);
  std::string out;
  const int rc = saturate::testing::run_command(std::string(SATURATE_PYTHON) + " " + py + " " + path + " " + how, &out);
  EXPECT_EQ(rc, 0) << out;
  return path;
}

}  // namespace

TEST(TorchScriptTest, ScriptedAndTracedModelsLoadAndTrain) {
  const std::string dir = saturate::testing::temp_dir("torchscript");
  for (const std::string how : {"script", "trace"}) {
    ModelSpec s;
    s.name = export_model(dir, how);
    BuiltModel b = build_model(s);
    EXPECT_EQ(b.model->parameter_count(), 8 * 9 + 8 + 8 * 10 + 10);
    Workload w(std::move(b), torch::kCPU, OptimizerKind::kAdam, 0.05);
    const Batch batch = w.synthetic_batch(16);
    auto opt = w.make_optimizer();
    double first = 0, last = 0;
    for (int i = 0; i < 30; ++i) {
      opt->zero_grad();
      auto loss = w.loss(w.model().forward(batch.inputs), batch.targets);
      loss.backward();
      opt->step();
      (i == 0 ? first : last) = loss.item<double>();
    }
    EXPECT_LT(last, 0.8 * first) << how << ": the loss did not fall, the module did not train";
    auto meter = make_memory_meter(torch::kCPU);
    Probe probe(w, *meter);
    EXPECT_EQ(probe.run(8, {1, 1, 0}).status, TrialStatus::kOk);
  }
}

TEST(TorchScriptTest, MissingAndCorruptFilesAreUsageErrors) {
  ModelSpec s;
  s.name = "/nonexistent/model.pt";
  ASSERT_THROWS_WITH(build_model(s), UsageError, "no such file");
  const std::string dir = saturate::testing::temp_dir("torchscript_bad");
  s.name = dir + "/bad.pt";
  FILE* f = fopen(s.name.c_str(), "w");
  fputs("PK\x03\x04 not really a zip", f);
  fclose(f);
  ASSERT_THROWS_WITH(build_model(s), UsageError, "not a readable TorchScript file");
}
