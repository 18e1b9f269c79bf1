// `saturate train` as a library call (session/train_session.h): options refused by name before
// any work, a searched micro-batch that trains from the same weights as one given by hand (the
// search's trials leave no trace), the progress events, and the ranks' keys in the JSON.
#include "saturate/session/train_session.h"

#include <torch/torch.h>

#include "saturate/core/errors.h"
#include "support/support.h"

using namespace saturate;

namespace {

using saturate::testing::kMiB;

/// A small GPT on synthetic tokens under a CPU budget its activations fill at a few dozen
/// samples, as `saturate train --model gpt --data synthetic --memory-budget 96MiB`.
struct SessionRig {
  explicit SessionRig(int64_t budget_bytes = 96 * kMiB) {
    ModelSpec s;
    s.name = "gpt";
    s.width = 32;
    s.layers = 1;
    s.heads = 2;
    s.seq_len = 128;
    s.vocab = 512;
    s.seed = 3;
    meter = make_memory_meter(torch::kCPU);
    workload = std::make_unique<Workload>(build_model(s), torch::kCPU, OptimizerKind::kSgd, 0.05, 3);
    meter->set_budget_bytes(budget_bytes);
    data.tokens = true;  // synthetic tokens: no corpus
  }
  ~SessionRig() { meter->set_budget_bytes(0); }
  TrainSessionResult train(TrainSessionOptions o, const TrainEvents& events = {}) {
    TrainRanks one_process;
    return run_train_session(*workload, *meter, RunContext{}, data, o, one_process, events);
  }
  std::unique_ptr<MemoryMeter> meter;
  std::unique_ptr<Workload> workload;
  TrainSessionData data;
};

TrainSessionOptions steps(int64_t n) {
  TrainSessionOptions o;
  o.max_steps = n;
  o.global_batch = 256;
  return o;
}

}  // namespace

TEST(TrainSessionTest, OptionsAreRefusedNamingTheOptionBeforeAnyWork) {
  TrainSessionOptions o = steps(1);
  o.objective.objective = Objective::kGoodput;  // with a micro-batch given
  ASSERT_USAGE_ERROR_ABOUT(o.check(), "", "`micro_batch` auto");
  o = steps(1);
  o.adaptive_max = 0;
  ASSERT_USAGE_ERROR_ABOUT(o.check(), "adaptive_max", "1..1024");
  o = steps(1);
  o.adaptive = true;  // with a global batch
  ASSERT_USAGE_ERROR_ABOUT(o.check(), "", "drop `accumulation` and `global_batch`");
  o = steps(0);
  o.epochs = 0;
  ASSERT_USAGE_ERROR_ABOUT(o.check(), "", "`max_steps`");
  o = steps(1);
  o.loss_every = 0;
  ASSERT_USAGE_ERROR_ABOUT(o.check(), "loss_every", "0 is outside 1..1e+12");
}

TEST(TrainSessionTest, ASearchedMicroBatchTrainsFromTheWeightsAGivenOneDoes) {
  // the search's trials take optimizer steps on random labels; training must not inherit them
  TrainSessionOptions searched = steps(4);
  searched.micro_batch = CountOrAuto::automatic();
  searched.loss_every = 1;
  SessionRig a;
  const TrainSessionResult found = a.train(searched);
  const int64_t micro = found.summary.result.micro_batch;
  ASSERT_GT(micro, 0);
  ASSERT_LT(micro, 256) << "the budget should force accumulation, so the search decides something";

  TrainSessionOptions given = searched;
  given.micro_batch = CountOrAuto::of(micro);
  SessionRig b;
  const TrainSessionResult direct = b.train(given);
  ASSERT_EQ(found.summary.result.losses.size(), 4u);
  ASSERT_EQ(direct.summary.result.losses.size(), 4u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NEAR(found.summary.result.losses[i], direct.summary.result.losses[i], 1e-5) << "step " << i;
}

TEST(TrainSessionTest, EveryStepIsReportedAndTheJsonHasTheRanksKeys) {
  SessionRig rig;
  TrainSessionOptions o = steps(3);
  o.micro_batch = CountOrAuto::of(64);
  o.loss_every = 2;
  std::vector<int64_t> seen;
  int64_t total = 0;
  TrainEvents events;
  events.on_start = [&](const TrainStart& s) { total = s.total_steps; };
  events.on_step = [&](const TrainProgress& p) { seen.push_back(p.step); };
  const TrainSessionResult r = rig.train(o, events);
  EXPECT_EQ(total, 3);
  EXPECT_EQ(seen, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(r.to_json().at("world_size"), 1);
  EXPECT_EQ(r.to_json().at("parallel"), "none");
  EXPECT_EQ(r.to_json().at("micro_batch"), 64);
  EXPECT_EQ(r.to_json().at("accumulation"), 4);
  EXPECT_EQ(r.to_json().at("steps"), 3);
}

TEST(TrainSessionOptionsAsWritten, AutoZeroAndACountAreThreeDifferentSettingsNotThreeNumbers) {
  // eval_batch: auto searches the evaluation's batch, 0 is the default rule, N is N
  EXPECT_TRUE(parse_eval_batch("auto").has_value() && parse_eval_batch("auto")->is_auto());
  EXPECT_FALSE(parse_eval_batch("0").has_value());
  EXPECT_EQ(parse_eval_batch("48"), CountOrAuto::of(48));
  // max_tokens: auto sizes the budget from the micro-batch, 0 is fixed batches, N is N
  EXPECT_TRUE(parse_max_tokens("auto")->is_auto());
  EXPECT_FALSE(parse_max_tokens("0").has_value());
  EXPECT_EQ(parse_max_tokens("4096")->given(), std::optional<int64_t>(4096));
  EXPECT_TRUE(parse_micro_batch("auto").is_auto());
  EXPECT_EQ(parse_micro_batch("7").to_string(), "7");
  EXPECT_THROW(parse_micro_batch("0"), UsageError);
  // the options refuse what the parser would: a count below 1 given directly
  TrainSessionOptions o;
  o.eval_batch = CountOrAuto::of(0);
  EXPECT_THROW(o.check(), UsageError);
  o.eval_batch.reset();
  o.max_tokens = CountOrAuto::of(-1);
  EXPECT_THROW(o.check(), UsageError);
  o.max_tokens = CountOrAuto::automatic();
  EXPECT_NO_THROW(o.check());
}
