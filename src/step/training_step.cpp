#include "saturate/step/training_step.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>
#include <torch/nn/utils/clip_grad.h>

#include "saturate/core/errors.h"

namespace saturate {
namespace {

GradScalerOptions scaler_options(Precision p) {
  GradScalerOptions o;
  o.enabled = p == Precision::kFp16;
  return o;
}

/// Tells the observer (if any) that a phase runs for the scope's lifetime. An exception leaves
/// the phase without an end: observers know a failed step may do that.
class PhaseMark {
 public:
  PhaseMark(PhaseObserver* o, Phase p) : o_(o), p_(p) {
    if (o_) o_->phase_begin(p_);
  }
  void end() {
    if (o_) o_->phase_end(p_);
    o_ = nullptr;
  }
  ~PhaseMark() = default;

 private:
  PhaseObserver* o_;
  Phase p_;
};

/// Rows [start, start + n) of the batch on the device (its own phase when a copy; channels_last
/// for 4-d inputs when asked).
std::pair<torch::Tensor, torch::Tensor> micro_batch_on(const Batch& batch, int64_t start, int64_t n,
                                                       const torch::Device& device, bool channels_last,
                                                       PhaseObserver* obs) {
  PhaseMark h2d(obs, Phase::kHostToDevice);
  torch::Tensor x = batch.inputs.slice(0, start, start + n).to(device, /*non_blocking=*/true);
  if (channels_last && x.dim() == 4) x = x.contiguous(torch::MemoryFormat::ChannelsLast);
  torch::Tensor y = batch.targets.slice(0, start, start + n).to(device, /*non_blocking=*/true);
  h2d.end();  // (an exception leaves the phase open: the mark ends only here)
  return {x, y};
}

/// The all-reduce the backward waited for after computing the gradients: its own phase.
void move_exposed_allreduce(PhaseObserver& obs, StepSync& sync) {
  const double exposed_ms = sync.exposed_allreduce_ms();
  if (exposed_ms > 0) obs.phase_moved(Phase::kAllreduce, Phase::kBackward, exposed_ms);
}

/// Padded token targets (-100 is ignored by the loss): {the real tokens when some are padding
/// (0: none are), the real tokens}. A micro-batch's mean is then over its real tokens, so its
/// share of the step's mean is its share of the real tokens, not of the rows.
std::pair<double, double> token_counts(const torch::Tensor& targets) {
  if (targets.dim() < 2 || targets.scalar_type() != torch::kLong) return {0, 0};
  const int64_t real = targets.ne(-100).sum().item<int64_t>();
  const auto step_tokens = static_cast<double>(real);
  return {real > 0 && real < targets.numel() ? step_tokens : 0.0, step_tokens};
}

/// The optimizer phase: gradients clipped to `clip` (unscaled first; 0: not clipped), the
/// scaler's step (false: skipped, fp16's non-finite gradients) and update.
bool clip_and_step(GradScaler& scaler, torch::optim::Optimizer& optimizer, const std::vector<torch::Tensor>& parameters,
                   double clip, PhaseObserver* obs) {
  PhaseMark opt(obs, Phase::kOptimizer);
  if (clip > 0) {
    scaler.unscale(optimizer);
    std::vector<torch::Tensor> params;
    for (const auto& p : parameters)
      if (p.grad().defined()) params.push_back(p);
    torch::nn::utils::clip_grad_norm_(params, clip);
  }
  const bool stepped = scaler.step(optimizer);
  scaler.update();
  opt.end();
  return stepped;
}

}  // namespace

void check_step_options(Workload& workload, Precision precision, const CheckpointPolicy& checkpointing) {
  if (precision == Precision::kFp16 && workload.device().is_cpu())
    throw UsageError("precision", "fp16: CPU autocast has no fp16; use bf16 on CPU (fp16 with loss scaling is for CUDA)");
  if (checkpointing.enabled() && !as_block_model(workload.model()))
    throw UsageError("checkpointing", fmt::format("{}: {} has no blocks to checkpoint (a TorchScript model); use no "
                                                  "checkpointing, or a built-in model",
                                                  to_string(checkpointing), workload.model().name()));
}

TrainingStep::TrainingStep(Workload& workload, StepOptions options)
    : workload_(workload), options_(options), scaler_(scaler_options(options.precision)) {
  if (options_.micro_batch < 0)
    throw UsageError("micro_batch", fmt::format("{} is not a positive number of samples", options_.micro_batch));
  check_step_options(workload_, options_.precision, options_.checkpointing);
  if (options_.checkpointing.enabled()) blocks_ = as_block_model(workload_.model());
  // the model's layout follows the switch both ways (a trial without it after one with it)
  std::vector<torch::Tensor> tensors;
  for (auto& [name, t] : workload_.model().named_tensors()) tensors.push_back(t);
  set_memory_format(tensors, options_.fast_paths.channels_last ? torch::MemoryFormat::ChannelsLast
                                                               : torch::MemoryFormat::Contiguous);
  const FastPaths& fp = options_.fast_paths;
  if (fp.cuda_graphs) {
    std::string why;
    if (!workload_.device().is_cuda()) why = "needs a CUDA device";
    else if (options_.precision == Precision::kFp16) why = "cannot hold fp16 loss scaling (its skipped steps are host decisions); use bf16";
    else if (options_.clip_grad_norm > 0) why = "cannot hold gradient clipping (it reads the norm back); drop `clip_grad_norm`";
    else if (options_.checkpointing.enabled()) why = "is not combined with activation checkpointing";
    else if (options_.retain_graph) why = "cannot keep each step's autograd graph";
    else if (options_.sync) why = "does not capture steps that synchronize with other ranks";
    if (!why.empty()) throw UsageError("fast_paths", "cuda_graphs " + why);
  }
  set_noise(options_.noise);
  optimizer_ = workload_.make_optimizer(fp.fused_optimizer || fp.cuda_graphs);
  if (fp.cuda_graphs) make_graph();
}

TrainingStep::~TrainingStep() = default;

void TrainingStep::make_graph() {
  auto* capturable = dynamic_cast<CapturableOptimizer*>(optimizer_.get());
  if (!capturable) throw RuntimeFailure("cuda_graphs: the optimizer is not capturable");  // make_optimizer made it
  graph_ = std::make_unique<GraphedStep>([this](const Batch& b) { return run_eager(b); }, *capturable,
                                         workload_.device());
}

void TrainingStep::set_noise(GradientNoiseScale* noise) {
  if (noise && options_.fast_paths.cuda_graphs)
    throw UsageError("noise_scale", "the gradient noise scale is not measured inside a CUDA graph; drop cuda_graphs "
                                    "from `fast_paths`");
  if (noise && options_.sync && !options_.sync->communicates())
    throw UsageError("noise_scale", "the gradient noise scale is not measured with `parallel` dp; use one process "
                                    "per GPU (saturate launch)");
  options_.noise = noise;
}

void TrainingStep::set_micro_batch(int64_t micro_batch) {
  if (micro_batch < 0)
    throw UsageError("micro_batch", fmt::format("{} is not a positive number of samples", micro_batch));
  if (graph_ && micro_batch != options_.micro_batch) make_graph();  // a graph holds one split of the batch
  options_.micro_batch = micro_batch;
}

torch::Tensor TrainingStep::forward(const torch::Tensor& inputs) {
  AutocastScope autocast(options_.precision, workload_.device());
  if (blocks_) return forward_with_checkpointing(*blocks_, inputs, options_.checkpointing);
  return workload_.model().forward(inputs);
}

void TrainingStep::release_gradients() {
  for (auto& p : workload_.model().parameters()) p.mutable_grad() = torch::Tensor();
}

StepResult TrainingStep::run(const Batch& batch) {
  if (graph_) return graph_->run(batch);
  return run_eager(batch);
}

StepResult TrainingStep::run_eager(const Batch& batch) {
  // timing events may not be recorded into a graph being captured
  const auto* capturable = dynamic_cast<const CapturableOptimizer*>(optimizer_.get());
  PhaseObserver* const obs = capturable && capturable->capturing() ? nullptr : options_.observer;
  StepSync* const sync = options_.sync;
  const bool has_peers = sync && sync->communicates();
  const torch::Device device = workload_.device();
  const int64_t global = batch.inputs.size(0);
  GradientNoiseScale* const noise = capturable && capturable->capturing() ? nullptr : options_.noise;
  int64_t micro = options_.micro_batch > 0 ? options_.micro_batch : global;
  // the noise scale compares the first micro-batch's gradient with the step's: it needs two
  if (noise && micro >= global && global >= 2) micro = (global + 1) / 2;
  double first_sq_norm = 0;
  int64_t first_samples = 0;
  agreed_ = false;
  StepResult result;
  optimizer_->zero_grad(/*set_to_none=*/true);
  // one micro-batch in one process: the loss is the step's loss, nothing more is allocated (the
  // trial of a plain step holds exactly what a hand-written step holds)
  const bool summed = micro < global || has_peers;
  torch::Tensor total;
  if (summed) total = torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(device));
  // padded token targets (-100 is ignored by the loss): a micro-batch's mean is over its real
  // tokens, so its share of the step's mean is its share of the real tokens, not of the rows
  // (across ranks likewise: a rank's share of the global batch's mean is its share of the tokens)
  const auto [real_tokens, step_tokens] =
      micro < global || has_peers ? token_counts(batch.targets) : std::pair<double, double>{0, 0};
  // batches already on the device (CPU training, synthetic trial batches) need no copy phase
  const bool copies = batch.inputs.device() != device || batch.targets.device() != device;
  for (int64_t start = 0; start < global; start += micro) {
    const int64_t n = std::min(micro, global - start);
    const auto [x, y] = micro_batch_on(batch, start, n, device, options_.fast_paths.channels_last,
                                       copies ? obs : nullptr);
    // each micro-batch's mean loss weighted by its share: the sum is the batch's mean loss.
    const bool last = start + n >= global;
    if (sync) sync->before_forward(last);
    PhaseMark fwd(obs, Phase::kForward);
    torch::Tensor loss = workload_.loss(forward(x), y);
    if (loss.scalar_type() != torch::kDouble) loss = loss.to(torch::kFloat);  // autocast may give bf16
    if (real_tokens > 0 && micro < global)
      loss = loss * (static_cast<double>(y.ne(-100).sum().item<int64_t>()) / real_tokens);
    else if (n != global) loss = loss * (static_cast<double>(n) / static_cast<double>(global));
    fwd.end();
    if (summed) total += loss.detach().to(torch::kDouble);
    else total = loss.detach();
    if (has_peers && last) {
      // every rank got this far without running out of memory (else all back off together);
      // the step's loss becomes the mean over the ranks, the loss of the whole global batch
      double mean = total.item<double>();
      if (sync->agree(false, mean, step_tokens, real_tokens > 0)) throw PeerOutOfMemory();
      agreed_ = true;
      total.fill_(mean);
    }
    PhaseMark bwd(obs, Phase::kBackward);
    if (sync) {
      sync->backward(scaler_.scale(loss), last);
    } else {
      scaler_.scale(loss).backward({}, /*retain_graph=*/options_.retain_graph);
    }
    bwd.end();
    // the all-reduce the backward waited for after computing the gradients is its own phase
    if (obs && sync) move_exposed_allreduce(*obs, *sync);
    if (options_.retain_graph && last) result.graph_loss = loss;
    if (noise && start == 0 && !last) {
      // the buffers hold (n/global) x this micro-batch's mean gradient (x the fp16 loss scale)
      const double share = static_cast<double>(n) / static_cast<double>(global);
      first_sq_norm = gradient_sq_norm(workload_.model().parameters(), scaler_.scale_value()) / (share * share);
      first_samples = n;
    }
  }
  if (first_samples > 0) {
    // the big batch is every rank's together (with unequal shares not this rank's times the ranks)
    noise->add(first_samples, first_sq_norm, has_peers ? sync->global_samples(global) : global,
               gradient_sq_norm(workload_.model().parameters(), scaler_.scale_value()));
  }
  result.stepped = clip_and_step(scaler_, *optimizer_, workload_.model().parameters(), options_.clip_grad_norm, obs);
  result.loss = total;
  return result;
}

}  // namespace saturate
