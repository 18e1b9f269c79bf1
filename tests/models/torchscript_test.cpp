// A TorchScript file written by the installed torch's Python loads and trains for real.
#include <torch/torch.h>

#include "saturate/core/errors.h"
#include "saturate/core/memory_meter.h"
#include "models/flops.h"
#include "saturate/models/zoo.h"
#include "saturate/monitor/flop_counter.h"
#include "saturate/probe/probe.h"
#include "saturate/step/training_step.h"
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

// The file's architecture is unknown here: its FLOPs are counted from the operators its
// interpreter dispatches. Conv 1->8 (3x3, padding 1) on 28x28, then Linear 8->10 after the pool;
// the conv's input is the data (weight gradient only), the linear's input needs its gradient.
TEST(TorchScriptTest, TheFlopsOfAScriptedOrTracedModelAreCountedFromItsOperators) {
  const std::string dir = saturate::testing::temp_dir("torchscript_flops");
  const double conv = 28.0 * 28 * 8 * 1 * 9, linear = 8.0 * 10;
  const double per_sample = 2 * conv * 2 + 2 * linear * 3;
  for (const std::string how : {"script", "trace"}) {
    ModelSpec s;
    s.name = export_model(dir, how);
    EXPECT_FALSE(analytic_flops(s));
    Workload w(build_model(s), torch::kCPU, OptimizerKind::kAdam, 0.05);
    TrainingStep step(w, {});
    const Batch batch = w.synthetic_batch(6);
    FlopCounter counter;
    (void)step.run(batch);
    std::string ops;
    for (const auto& [op, f] : counter.flops_by_operator()) ops += op + "=" + std::to_string(f) + " ";
    EXPECT_DOUBLE_EQ(counter.total_flops(), 6 * per_sample) << how << ": " << ops;
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

TEST(TorchScriptTest, ATokenModelsSpecResolvesToTheSameSpecTwice) {
  // the CLI resolves the flags before it loads anything, build_model resolves again
  ModelSpec s;
  s.name = "lm.pt";
  s.tokens = true;
  s.seq_len = 256;
  s.vocab = 8192;
  const ModelSpec once = resolve_model_spec(s);
  const ModelSpec twice = resolve_model_spec(once);
  EXPECT_TRUE(once.input_shape.empty());
  EXPECT_TRUE(twice.input_shape.empty());
  EXPECT_EQ(twice.seq_len, 256);
  EXPECT_EQ(twice.vocab, 8192);
  EXPECT_EQ(twice.classes, 0);
  // an image model's spec too
  ModelSpec img;
  img.name = "net.pt";
  const ModelSpec a = resolve_model_spec(img), b = resolve_model_spec(a);
  EXPECT_EQ(a.input_shape, b.input_shape);
  EXPECT_EQ(a.classes, b.classes);
}

TEST(TorchScriptTest, SeqLenOrVocabOnAScriptedFileImpliesTokensWithTheDefaults) {
  ModelSpec s;
  s.name = "lm.pt";
  s.seq_len = 64;
  const ModelSpec r = resolve_model_spec(resolve_model_spec(s));
  EXPECT_TRUE(r.tokens);
  EXPECT_EQ(r.seq_len, 64);
  EXPECT_EQ(r.vocab, 8192);
  EXPECT_TRUE(r.input_shape.empty());
  ModelSpec v;
  v.name = "lm.pt";
  v.vocab = 500;
  const ModelSpec rv = resolve_model_spec(v);
  EXPECT_TRUE(rv.tokens);
  EXPECT_EQ(rv.seq_len, 128);
  EXPECT_EQ(rv.vocab, 500);
}

TEST(TorchScriptTest, TokenFlagsThatContradictTheModelAreUsageErrorsNamingTheFlag) {
  ModelSpec s;
  s.name = "lm.pt";
  s.seq_len = 64;
  s.input_shape = {1, 8, 8};
  ASSERT_THROWS_WITH(resolve_model_spec(s), UsageError, "`seq_len` 64: token models take [batch, seq-len] ids");
  ModelSpec c;
  c.name = "lm.pt";
  c.tokens = true;
  c.classes = 10;
  ASSERT_THROWS_WITH(resolve_model_spec(c), UsageError, "`classes` 10: lm.pt predicts tokens");
  ModelSpec m;
  m.name = "mlp";
  m.vocab = 100;
  ASSERT_THROWS_WITH(resolve_model_spec(m), UsageError, "`vocab`: mlp takes images, not token ids");
}

TEST(TorchScriptTest, AScriptedTokenModelBuiltFromSeqLenAloneTakesTokenIdsOfTheDefaultVocabulary) {
  const std::string dir = saturate::testing::temp_dir("torchscript_lm");
  const std::string path = dir + "/lm.pt";
  std::string out;
  ASSERT_EQ(saturate::testing::run_command(std::string(SATURATE_PYTHON) + " " + SATURATE_SOURCE_DIR +
                                               "/tests/cli/data/export_token_lm.py " + path,
                                           &out),
            0)
      << out;
  ModelSpec s;
  s.name = path;
  s.seq_len = 32;
  BuiltModel b = build_model(resolve_model_spec(s));
  EXPECT_EQ(b.input_kind, InputKind::kTokens);
  EXPECT_EQ(b.sample_shape, std::vector<int64_t>{32});
  EXPECT_EQ(b.classes, 8192);
  Workload w(std::move(b), torch::kCPU, OptimizerKind::kAdam);
  auto meter = make_memory_meter(torch::kCPU);
  Probe probe(w, *meter);
  const Trial t = probe.run(2, {1, 1, 0});
  EXPECT_EQ(t.status, TrialStatus::kOk) << t.error;
}
