// The training loop on CPU: accumulation is exact, back-off keeps the global batch, resume
// continues bit for bit, checkpointing trades memory for recomputation with equal gradients.
#include "saturate/train/trainer.h"

#include <fstream>
#include <functional>
#include <sstream>

#include <torch/torch.h>

#include "saturate/core/cpu_budget_allocator.h"
#include "saturate/core/errors.h"
#include "train/checkpoint_file.h"
#include "support/support.h"

using namespace saturate;

namespace {

struct TrainerRig {
  explicit TrainerRig(const std::string& model = "mlp", int64_t width = 64, int64_t layers = 2, bool as_double = false,
               OptimizerKind opt = OptimizerKind::kSgd, double lr = 0.05, int64_t samples = 512) {
    ModelSpec s;
    s.name = model;
    s.width = width;
    s.layers = layers;
    s.seed = 7;
    meter = make_memory_meter(torch::kCPU);
    workload = std::make_unique<Workload>(build_model(s), torch::kCPU, opt, lr);
    if (as_double) workload->model().module()->to(torch::kDouble);
    torch::manual_seed(123);
    const auto dtype = as_double ? torch::kDouble : torch::kFloat;
    inputs = torch::randn({samples, 1, 28, 28}, dtype);
    targets = torch::randint(10, {samples});
  }
  TrainResult train(TrainOptions o, int64_t global = 64) {
    TensorTrainData data(inputs, targets, global);
    Trainer t(*workload, *meter, data, nullptr, std::move(o));
    return t.run();
  }
  std::unique_ptr<MemoryMeter> meter;
  std::unique_ptr<Workload> workload;
  torch::Tensor inputs, targets;
};

std::vector<torch::Tensor> grads_of(Model& m) {
  std::vector<torch::Tensor> g;
  for (auto& p : m.parameters()) g.push_back(p.grad().clone());
  return g;
}

std::vector<torch::Tensor> params_of(Model& m) {
  std::vector<torch::Tensor> out;
  for (auto& p : m.parameters()) out.push_back(p.detach().clone());
  return out;
}

}  // namespace

TEST(TrainerTest, AccumulatedMicroBatchesGiveTheGradientOfTheGlobalBatch) {
  std::vector<std::vector<torch::Tensor>> grads, params;
  for (auto [micro, accumulation] : {std::pair{64, 1}, {32, 2}, {16, 4}}) {
    TrainerRig rig("mlp", 64, 2, /*as_double=*/true);
    TrainOptions o;
    o.micro_batch = micro;
    o.accumulation = accumulation;
    o.max_steps = 1;
    o.schedule.peak_lr = 0.1;
    const TrainResult r = rig.train(o);
    EXPECT_EQ(r.global_batch, 64);
    grads.push_back(grads_of(rig.workload->model()));
    params.push_back(params_of(rig.workload->model()));
  }
  for (size_t split = 1; split < grads.size(); ++split)
    for (size_t i = 0; i < grads[0].size(); ++i) {
      EXPECT_TRUE(torch::allclose(grads[0][i], grads[split][i], 1e-12, 1e-14)) << "split " << split << " param " << i;
      EXPECT_TRUE(torch::allclose(params[0][i], params[split][i], 1e-12, 1e-14));
    }
}

namespace {

/// Token batches for a small gpt; sequences get longer from step `long_from` on.
class TokenData final : public TrainData {
 public:
  TokenData(int64_t global, int64_t short_len, int64_t long_len, int64_t long_from, int64_t vocab)
      : global_(global), short_(short_len), long_(long_len), long_from_(long_from), vocab_(vocab) {}
  std::string name() const override { return "tokens"; }
  int64_t steps_per_epoch() const override { return 1000; }
  Batch batch_for_step(int64_t step) override {
    torch::manual_seed(1000 + step);
    const int64_t t = step >= long_from_ ? long_ : short_;
    return {torch::randint(vocab_, {global_, t}), torch::randint(vocab_, {global_, t})};
  }

 private:
  int64_t global_, short_, long_, long_from_, vocab_;
};

struct GptRig {
  GptRig() {
    ModelSpec s;
    s.name = "gpt";
    s.layers = 2;
    s.width = 128;
    s.heads = 4;
    s.seq_len = 128;
    s.vocab = 512;
    s.seed = 3;
    meter = make_memory_meter(torch::kCPU);
    workload = std::make_unique<Workload>(build_model(s), torch::kCPU, OptimizerKind::kSgd, 0.05);
  }
  TrainResult train(TrainOptions o, TrainData& data) {
    Trainer t(*workload, *meter, data, nullptr, std::move(o));
    return t.run();
  }
  std::unique_ptr<MemoryMeter> meter;
  std::unique_ptr<Workload> workload;
};

/// Peak bytes above what was live before, over `steps` steps of sequences of `len`.
int64_t gpt_peak_bytes(int64_t micro, int64_t len, const char* checkpointing = "none", int steps = 2,
                       std::vector<torch::Tensor>* grads = nullptr) {
  GptRig rig;
  TokenData data(micro, len, len, 0, 512);
  TrainOptions o;
  o.micro_batch = micro;
  o.max_steps = steps;
  o.checkpointing = parse_checkpointing(checkpointing);
  rig.meter->reset_peak();
  const int64_t before = rig.meter->stats().allocated_bytes;
  rig.train(o, data);
  if (grads) *grads = grads_of(rig.workload->model());
  return rig.meter->stats().peak_allocated_bytes - before;
}

}  // namespace

TEST(TrainerTest, CheckpointedBlocksGiveEqualGradientsWithLessPeakMemory) {
  std::vector<torch::Tensor> plain_grads, ckpt_grads;
  const int64_t plain = gpt_peak_bytes(16, 128, "none", 1, &plain_grads);
  const int64_t ckpt = gpt_peak_bytes(16, 128, "blocks", 1, &ckpt_grads);
  ASSERT_EQ(plain_grads.size(), ckpt_grads.size());
  for (size_t i = 0; i < plain_grads.size(); ++i)
    EXPECT_TRUE(torch::allclose(plain_grads[i], ckpt_grads[i], 1e-5, 1e-6)) << "param " << i;
  // a transformer block keeps ~10 activations of its input's size (norms, q/k/v, attention,
  // the 4x MLP); checkpointed, only its input is kept.
  EXPECT_LT(ckpt, plain * 3 / 4) << "with " << ckpt << " without " << plain;
}

TEST(TrainerTest, OomMidTrainingHalvesTheMicroBatchAndKeepsTheGlobalBatch) {
  // the budget fits 16 sequences of 32 tokens and 8 of 128, but not 16 of 128: when the
  // sequences grow at step 3, the step runs out of memory.
  const int64_t short16 = gpt_peak_bytes(16, 32), long16 = gpt_peak_bytes(16, 128), long8 = gpt_peak_bytes(8, 128);
  ASSERT_LT(long8, long16);
  ASSERT_LT(short16, (long8 + long16) / 2);
  TrainOptions o;
  o.micro_batch = 16;
  o.max_steps = 6;
  TokenData data(16, 32, 128, 3, 512);
  GptRig reference;
  const TrainResult plain = reference.train(o, data);

  GptRig rig;
  rig.meter->set_budget_bytes(rig.meter->stats().allocated_bytes + (long8 + long16) / 2);
  std::vector<int64_t> logged;
  TrainOptions b = o;
  b.on_backoff = [&](int64_t step, int64_t old_micro, int64_t new_micro) { logged = {step, old_micro, new_micro}; };
  const TrainResult r = rig.train(b, data);
  set_cpu_budget_bytes(0);
  ASSERT_EQ(r.oom_backoffs.size(), 1u);
  EXPECT_EQ(r.oom_backoffs[0].step, 3);
  EXPECT_EQ(r.oom_backoffs[0].old_micro_batch, 16);
  EXPECT_EQ(r.oom_backoffs[0].new_micro_batch, 8);
  EXPECT_EQ(logged, (std::vector<int64_t>{3, 16, 8}));
  EXPECT_EQ(r.micro_batch, 8);
  EXPECT_EQ(r.accumulation, 2);
  EXPECT_EQ(r.global_batch, 16);
  EXPECT_EQ(r.steps, 6);
  EXPECT_EQ(r.samples_seen, 6 * 16);
  // the same samples in the same steps: the curve matches the run that never backed off.
  ASSERT_EQ(r.losses.size(), plain.losses.size());
  for (size_t i = 0; i < r.losses.size(); ++i) EXPECT_NEAR(r.losses[i], plain.losses[i], 1e-5) << "step " << i;
}

TEST(TrainerTest, ResumedRunContinuesTheLossCurveBitForBit) {
  const std::string dir = saturate::testing::temp_dir("resume");
  TrainOptions o;
  o.micro_batch = 32;
  o.accumulation = 2;
  o.max_steps = 10;
  o.schedule.peak_lr = 0.01;
  o.schedule.warmup_steps = 3;
  o.schedule.decay = LrDecay::kCosine;
  o.schedule.total_steps = 10;
  TrainerRig whole("mlp", 64, 2, false, OptimizerKind::kAdam, 0.01);
  const TrainResult uninterrupted = whole.train(o);

  o.checkpoint_dir = dir;
  o.checkpoint_every = 1;
  TrainerRig first("mlp", 64, 2, false, OptimizerKind::kAdam, 0.01);
  TrainOptions part = o;
  part.max_steps = 4;
  first.train(part);
  TrainerRig second("mlp", 64, 2, false, OptimizerKind::kAdam, 0.01);
  TrainOptions rest = o;
  rest.resume = true;
  const TrainResult resumed = second.train(rest);
  ASSERT_TRUE(resumed.resumed_from.has_value());
  EXPECT_EQ(*resumed.resumed_from, 4);
  ASSERT_EQ(resumed.losses.size(), uninterrupted.losses.size());
  for (size_t i = 0; i < resumed.losses.size(); ++i)
    EXPECT_EQ(resumed.losses[i], uninterrupted.losses[i]) << "step " << i;  // bit for bit
}

TEST(TrainerTest, ResumeRejectsAnotherModelsCheckpointAndCorruptFiles) {
  const std::string dir = saturate::testing::temp_dir("resume_bad");
  TrainOptions o;
  o.micro_batch = 64;
  o.max_steps = 1;
  o.checkpoint_dir = dir;
  TrainerRig a("mlp", 64);
  a.train(o);
  TrainerRig other("mlp", 32);
  o.resume = true;
  ASSERT_THROWS_WITH(other.train(o), UsageError, "written for another model");
  // flip one byte of the payload: the checksum catches it, the file is left as it was
  const std::string path = checkpoint_path(dir);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[bytes.size() / 2] ^= 0x5a;
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  TrainerRig b("mlp", 64);
  ASSERT_THROWS_WITH(b.train(o), UsageError, "corrupt (checksum mismatch)");
  std::ifstream again(path, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(again), {}), bytes);
}

TEST(TrainerTest, ResumeRefusesANewerFormatVersionAndAKeyItDoesNotKnowNamingThem) {
  const std::string dir = saturate::testing::temp_dir("resume_format");
  TrainOptions o;
  o.micro_batch = 64;
  o.max_steps = 1;
  o.checkpoint_dir = dir;
  TrainerRig a("mlp", 16);
  a.train(o);  // a version-2 checkpoint, then replaced by hand-made ones below
  o.resume = true;
  const auto write = [&](const std::function<void(torch::serialize::OutputArchive&)>& fill) {
    torch::serialize::OutputArchive archive;
    fill(archive);
    std::ostringstream out;
    archive.save_to(out);
    write_checkpoint_file(dir, out.str());
  };
  write([](torch::serialize::OutputArchive& archive) {
    archive.write("format", c10::IValue(std::string("saturate training checkpoint")));
    archive.write("format_version", torch::tensor(int64_t{3}));
  });
  TrainerRig b("mlp", 16);
  ASSERT_THROWS_WITH(b.train(o), UsageError, "the checkpoint is format version 3, and this saturate reads versions 1 to 2");
  write([](torch::serialize::OutputArchive& archive) {
    archive.write("format_version", torch::tensor(int64_t{2}));
    archive.write("signature_hash", torch::tensor(int64_t{0}));
    archive.write("learning_rate_v3", torch::tensor(1.0));
  });
  ASSERT_THROWS_WITH(b.train(o), UsageError, "has a key this saturate does not know, 'learning_rate_v3'");
}

TEST(TrainerTest, ResumeRefusesChangedSettingsNamingTheCheckpointedAndTheNewValue) {
  const std::string dir = saturate::testing::temp_dir("resume_settings");
  TrainOptions o;
  o.micro_batch = 32;
  o.accumulation = 2;
  o.max_steps = 2;
  o.checkpoint_dir = dir;
  o.resume_settings = {{"--seed", "5"}};
  TrainerRig(/*model=*/"mlp", 64, 2, false, OptimizerKind::kAdam, 1e-3).train(o);
  TrainOptions r = o;
  r.resume = true;
  r.max_steps = 4;
  {
    TrainerRig other("mlp", 64, 2, false, OptimizerKind::kSgd, 1e-3);
    ASSERT_THROWS_WITH(other.train(r), UsageError,
                       "written with `optimizer` adam and this run has `optimizer` sgd; an exact resume needs the "
                       "same: give `optimizer` adam");
  }
  {
    TrainerRig rig("mlp", 64, 2, false, OptimizerKind::kAdam, 1e-3);
    TrainOptions b = r;
    b.accumulation = 1;  // micro 32 x 1: global batch 32
    ASSERT_THROWS_WITH(rig.train(b, 32), UsageError, "written with global batch 64 and this run has global batch 32");
  }
  {
    TrainerRig rig("mlp", 64, 2, false, OptimizerKind::kAdam, 1e-3);
    TrainOptions p = r;
    p.precision = Precision::kBf16;
    ASSERT_THROWS_WITH(rig.train(p), UsageError, "written with `precision` fp32 and this run has `precision` bf16");
  }
  {
    TrainerRig rig("mlp", 64, 2, false, OptimizerKind::kAdam, 1e-3);
    TensorTrainData other_data(rig.inputs, rig.targets, 64, "other-data");
    Trainer t(*rig.workload, *rig.meter, other_data, nullptr, r);
    ASSERT_THROWS_WITH(t.run(), UsageError, "written with `data` tensors and this run has `data` other-data");
  }
  {
    TrainerRig rig("mlp", 64, 2, false, OptimizerKind::kAdam, 1e-3);
    TrainOptions seed = r;
    seed.resume_settings = {{"--seed", "6"}};
    ASSERT_THROWS_WITH(rig.train(seed), UsageError, "written with --seed 5 and this run has --seed 6");
  }
  {
    TrainerRig rig("mlp", 64, 2, false, OptimizerKind::kAdam, 1e-3);
    TrainOptions lr = r;
    lr.schedule.peak_lr = 0.5;
    ASSERT_THROWS_WITH(rig.train(lr), UsageError, "and this run has `lr` 0.5");
  }
  // the same global batch in another split resumes, in the split asked for
  TrainerRig rig("mlp", 64, 2, false, OptimizerKind::kAdam, 1e-3);
  TrainOptions split = r;
  split.micro_batch = 16;
  split.accumulation = 4;
  const TrainResult done = rig.train(split);
  EXPECT_EQ(done.steps, 4);
  EXPECT_EQ(done.micro_batch, 16);
  EXPECT_EQ(done.global_batch, 64);
}

TEST(TrainerTest, NanLossStopsWithTheStepAndAHint) {
  TrainerRig rig;
  TrainOptions o;
  o.micro_batch = 64;
  o.max_steps = 3;
  rig.inputs[100][0][0][0] = std::numeric_limits<float>::quiet_NaN();  // in the second global batch
  ASSERT_THROWS_WITH(rig.train(o), RuntimeFailure, "became nan at step 1; lower `lr`");
}

TEST(TrainerTest, Bf16AutocastTrainsOnCpu) {
  TrainerRig rig("convnet");
  TrainOptions o;
  o.micro_batch = 32;
  o.max_steps = 8;
  o.precision = Precision::kBf16;
  o.schedule.peak_lr = 0.05;
  const TrainResult r = rig.train(o, 32);
  EXPECT_EQ(r.steps, 8);
  for (double l : r.losses) EXPECT_TRUE(std::isfinite(l));
  for (auto& p : rig.workload->model().parameters()) EXPECT_EQ(p.scalar_type(), torch::kFloat);  // fp32 master weights
  // the same steps in fp32 from the same weights and batches: under bf16 the products round, so
  // the first loss differs (a run that ignored the precision would match it exactly), by little
  TrainerRig fp32("convnet");
  o.precision = Precision::kFp32;
  const TrainResult f = fp32.train(o, 32);
  ASSERT_EQ(f.losses.size(), r.losses.size());
  EXPECT_NE(r.losses[0], f.losses[0]);
  EXPECT_NEAR(r.losses[0], f.losses[0], 0.02 * std::abs(f.losses[0]));
}

TEST(TrainerTest, ReadingTheLossEveryFewStepsKeepsEveryStepsLossInOrder) {
  std::vector<std::vector<double>> losses;
  std::vector<std::vector<int64_t>> told;
  for (int64_t every : {1, 3, 100}) {
    TrainOptions o;
    o.micro_batch = 64;
    o.max_steps = 7;
    o.loss_every = every;
    told.emplace_back();
    o.on_step = [&told](int64_t step, double, double) { told.back().push_back(step); };
    TrainerRig rig;
    losses.push_back(rig.train(o).losses);
  }
  ASSERT_EQ(losses[0].size(), 7u);
  EXPECT_EQ(losses[1], losses[0]);  // the same steps, read later: bit for bit
  EXPECT_EQ(losses[2], losses[0]);
  for (const auto& steps : told) EXPECT_EQ(steps, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
}

TEST(TrainerTest, ANanLossReadLaterStillNamesItsStep) {
  TrainerRig rig;
  TrainOptions o;
  o.micro_batch = 64;
  o.max_steps = 5;
  o.loss_every = 4;
  rig.inputs[100][0][0][0] = std::numeric_limits<float>::quiet_NaN();  // in the second global batch
  ASSERT_THROWS_WITH(rig.train(o), RuntimeFailure, "became nan at step 1; lower `lr`");
}

TEST(TrainerTest, ANonPositiveLossIntervalIsRefused) {
  TrainerRig rig;
  TrainOptions o;
  o.micro_batch = 64;
  o.max_steps = 1;
  o.loss_every = 0;
  ASSERT_THROWS_WITH(rig.train(o), UsageError, "0 is not a positive number of steps");
}

TEST(TrainerTest, TheFirstStepsFlopsAreCountedWhenAsked) {
  TrainerRig rig;
  TrainOptions o;
  o.micro_batch = 32;
  o.accumulation = 2;
  o.max_steps = 2;
  o.count_flops = true;
  const TrainResult r = rig.train(o);
  EXPECT_EQ(r.flops_counted_batch, 64);
  // mlp 784 -> 64 -> 64 -> 10: forward 2 x (784x64 + 64x64 + 64x10) per sample; the backward
  // adds the weight gradients of every layer and the input gradients of all but the first
  const double fwd = 2.0 * (784 * 64 + 64 * 64 + 64 * 10);
  const double bwd = fwd + 2.0 * (64 * 64 + 64 * 10);
  EXPECT_DOUBLE_EQ(r.flops_per_step, 64 * (fwd + bwd));
}
