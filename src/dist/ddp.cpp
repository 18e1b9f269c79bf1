// DDP on c10d's Reducer (see dist/ddp.h). The only file that touches the Reducer.
#include "saturate/dist/ddp.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <utility>

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include "saturate/core/errors.h"

namespace saturate {
namespace ddp_detail {  // named, not anonymous: DistributedDataParallel::Impl holds a CommLog

using Clock = std::chrono::steady_clock;

/// What the hook records of one synced backward: when each bucket left and came back.
struct CommLog {
  std::mutex mu;
  std::vector<std::pair<Clock::time_point, Clock::time_point>> intervals;  // [launch, done]
  Clock::time_point last_launch{};
  int64_t bytes = 0;
  int64_t last_bytes = 0;  // the last launched bucket's
  double step_weight = 0;  // > 0: this step's weight of the rank's gradient (set_step_weight)
  double share_weight = 0;  // > 0: this rank's share of every global batch (unequal shares)
};

/// Average = divide by the world size, then sum-all-reduce (as c10d's AllReduceCommHook), timed.
/// With `compress_bf16` (PyTorch's bf16_compress_hook): the averaged bucket is rounded to bf16,
/// all-reduced in bf16 (half the bytes on the wire), and copied back into the float32 bucket, so
/// the gradients the optimizer sees (and their accumulation) stay float32.
class TimedAllReduceHook final : public c10d::CommHookInterface {
 public:
  TimedAllReduceHook(c10::intrusive_ptr<c10d::ProcessGroup> group, std::shared_ptr<CommLog> log, bool compress_bf16)
      : group_(std::move(group)), log_(std::move(log)), compress_bf16_(compress_bf16) {}

  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    at::Tensor& buffer = bucket.getBufferRef();
    double step_weight = 0, share_weight = 0;
    {
      std::lock_guard<std::mutex> lock(log_->mu);
      step_weight = log_->step_weight;
      share_weight = log_->share_weight;
    }
    if (step_weight > 0) buffer.mul_(step_weight);        // padded documents: this rank's part of the tokens
    else if (share_weight > 0) buffer.mul_(share_weight);  // unequal shares: this rank's share of the batch
    else buffer.div_(group_->getSize());
    const bool compress = compress_bf16_ && buffer.scalar_type() == at::kFloat;
    at::Tensor wire = compress ? buffer.to(at::kBFloat16) : buffer;
    const auto launched = Clock::now();
    size_t slot;
    {
      std::lock_guard<std::mutex> lock(log_->mu);
      slot = log_->intervals.size();
      log_->intervals.push_back({launched, launched});
      log_->last_launch = launched;
      log_->bytes += static_cast<int64_t>(wire.numel() * wire.element_size());
      log_->last_bytes = static_cast<int64_t>(wire.numel() * wire.element_size());
    }
    std::vector<at::Tensor> tensors{wire};
    auto fut = group_->allreduce(tensors)->getFuture();
    auto log = log_;
    fut->addCallback([log, slot](c10::ivalue::Future&) {
      std::lock_guard<std::mutex> lock(log->mu);
      if (slot < log->intervals.size()) log->intervals[slot].second = Clock::now();
    });
    if (!compress) return fut;
    return fut->then(
        [buffer, wire](c10::ivalue::Future& done) -> c10::IValue {
          if (done.hasError()) std::rethrow_exception(done.exception_ptr());
          buffer.copy_(wire);
          return c10::IValue(std::vector<at::Tensor>{buffer});
        },
        c10::ListType::ofTensors());
  }

  at::Tensor parseHookResult(const c10::IValue& result) override {
    return c10d::detail::parseCppCommHookResult(result);
  }

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::shared_ptr<CommLog> log_;
  bool compress_bf16_;
};

}  // namespace ddp_detail

namespace {
using ddp_detail::Clock;
double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }
}  // namespace

namespace {
std::pair<std::vector<std::vector<size_t>>, std::vector<int64_t>> bucket_assignment(
    const std::vector<at::Tensor>& params, const DdpOptions& options) {
  const std::vector<bool> sparse(params.size(), false);
  auto [buckets, limits] = c10d::compute_bucket_assignment_by_size(
      params, {static_cast<size_t>(options.first_bucket_bytes), static_cast<size_t>(options.bucket_bytes)}, sparse);
  // gradients become ready roughly in reverse order of the parameters: so do the buckets
  std::reverse(buckets.begin(), buckets.end());
  return {std::move(buckets), std::vector<int64_t>(limits.rbegin(), limits.rend())};
}
}  // namespace

std::vector<std::vector<size_t>> ddp_bucket_assignment(const std::vector<torch::Tensor>& parameters,
                                                       const DdpOptions& options) {
  std::vector<at::Tensor> params;
  for (const auto& p : parameters)
    if (p.requires_grad()) params.push_back(p);
  if (params.empty()) return {};
  return bucket_assignment(params, options).first;
}

struct DistributedDataParallel::Impl {
  std::vector<at::Tensor> states;
  DistGroup& group;
  std::vector<at::Tensor> params;
  std::unique_ptr<c10d::Reducer> reducer;
  std::shared_ptr<ddp_detail::CommLog> log = std::make_shared<ddp_detail::CommLog>();
  DdpStats stats;
  bool step_open = false;  // a synced backward whose intervals are not yet counted
  double weight = 0;       // this rank's share of every global batch
  bool weighted = false;   // given (unequal shares), not 1 / world size

  explicit Impl(DistGroup& g) : group(g) {}

  void close_step() {
    if (!step_open) return;
    step_open = false;
    std::lock_guard<std::mutex> lock(log->mu);
    auto iv = log->intervals;
    log->intervals.clear();
    if (iv.empty()) return;
    std::sort(iv.begin(), iv.end());
    // union of the in-flight intervals, and its part before the last bucket was launched
    // (the last gradient became ready then: backward's computation was over)
    double total = 0, overlapped = 0;
    Clock::time_point start = iv[0].first, end = iv[0].second;
    auto account = [&](Clock::time_point a, Clock::time_point b) {
      if (b <= a) return;
      total += ms(b - a);
      const auto cut = std::min(b, log->last_launch);
      if (cut > a) overlapped += ms(cut - a);
    };
    for (size_t i = 1; i < iv.size(); ++i) {
      if (iv[i].first <= end) {
        end = std::max(end, iv[i].second);
      } else {
        account(start, end);
        start = iv[i].first;
        end = iv[i].second;
      }
    }
    account(start, end);
    stats.allreduce_ms += total;
    stats.overlapped_ms += overlapped;
    if (log->last_launch > iv[0].first) stats.backward_beside_ms += ms(log->last_launch - iv[0].first);
    stats.step_allreduce_ms.push_back(total);
    stats.buckets = static_cast<int64_t>(iv.size());
    stats.gradient_bytes = log->bytes;
    stats.last_bucket_bytes = log->last_bytes;
    log->bytes = 0;
  }
};

namespace {
std::vector<at::Tensor> module_states(torch::nn::Module& m) {
  std::vector<at::Tensor> s = m.parameters();
  for (const auto& b : m.buffers()) s.push_back(b);
  return s;
}
}  // namespace

DistributedDataParallel::DistributedDataParallel(torch::nn::Module& module, DistGroup& group, DdpOptions options)
    : DistributedDataParallel(module.parameters(), module_states(module), group, options) {}

DistributedDataParallel::DistributedDataParallel(std::vector<torch::Tensor> parameters,
                                                 std::vector<torch::Tensor> states, DistGroup& group,
                                                 DdpOptions options)
    : impl_(std::make_unique<Impl>(group)) {
  impl_->states = std::move(states);
  for (const auto& p : parameters)
    if (p.requires_grad()) impl_->params.push_back(p);
  if (impl_->params.empty()) throw UsageError("DDP: the model has no trainable parameters");
  const auto& pg = group.c10d_group();
  try {
    c10d::verify_params_across_processes(pg, impl_->params, std::nullopt);
  } catch (const c10::Error& e) {
    throw RuntimeFailure(fmt::format("rank {}: the ranks' models differ (same `model` and sizes on every rank?): {}",
                                     group.rank(), e.what_without_backtrace()));
  }
  const std::vector<bool> sparse(impl_->params.size(), false);
  auto [buckets, caps] = bucket_assignment(impl_->params, options);
  impl_->reducer = std::make_unique<c10d::Reducer>(
      impl_->params, std::move(buckets), pg, sparse, options.bucket_bytes, /*find_unused_parameters=*/false,
      /*gradient_as_bucket_view=*/false, std::unordered_map<size_t, std::string>{}, options.first_bucket_bytes,
      /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false, std::move(caps));
  impl_->log->share_weight = options.gradient_weight;
  impl_->reducer->register_comm_hook(
      std::make_unique<ddp_detail::TimedAllReduceHook>(pg, impl_->log, options.compress_bf16));
  impl_->weighted = options.gradient_weight > 0;
  impl_->weight = options.gradient_weight > 0 ? options.gradient_weight : 1.0 / group.world_size();
}

DistributedDataParallel::~DistributedDataParallel() = default;

void DistributedDataParallel::broadcast_from_rank0() {
  std::vector<at::Tensor> states;
  for (const auto& t : impl_->states) states.push_back(t.detach());
  if (states.empty()) return;
  torch::NoGradGuard no_grad;
  try {
    c10d::broadcast_coalesced(impl_->group.c10d_group(), states, size_t{256} << 20, 0);
  } catch (const std::exception& e) {
    throw impl_->group.failure("broadcasting the parameters from rank 0", e.what());
  }
}

void DistributedDataParallel::prepare_for_forward() { impl_->reducer->prepare_for_forward(); }

void DistributedDataParallel::prepare_for_backward(const torch::Tensor& loss) {
  impl_->close_step();
  impl_->reducer->prepare_for_backward({loss});
  impl_->step_open = true;
  ++impl_->stats.synced_steps;
}

void DistributedDataParallel::backward(const torch::Tensor& loss, bool sync) {
  if (sync) prepare_for_backward(loss);
  try {
    loss.backward();
  } catch (const RuntimeFailure&) {
    throw;
  } catch (const std::exception& e) {
    if (!sync) throw;  // a local backward: nothing was communicated
    throw failure(e);
  }
}

RuntimeFailure DistributedDataParallel::failure(const std::exception& e) const {
  const auto* c10 = dynamic_cast<const c10::Error*>(&e);
  return impl_->group.failure("gradient all-reduce", c10 ? c10->what_without_backtrace() : e.what());
}

int DistributedDataParallel::world_size() const { return impl_->group.world_size(); }

double DistributedDataParallel::gradient_weight() const { return impl_->weight; }

bool DistributedDataParallel::weighted() const { return impl_->weighted; }

void DistributedDataParallel::set_step_weight(double weight) {
  std::lock_guard<std::mutex> lock(impl_->log->mu);
  impl_->log->step_weight = weight;
}

void DistributedDataParallel::set_gradient_weight(double weight) {
  if (!impl_->weighted || !(weight > 0) || weight > 1)
    throw InternalError(fmt::format("gradient weight {} for a rank of {}", weight,
                                    impl_->weighted ? "weighted shares" : "equal shares"));
  std::lock_guard<std::mutex> lock(impl_->log->mu);
  impl_->log->share_weight = weight;
  impl_->weight = weight;
}
DistGroup& DistributedDataParallel::group() { return impl_->group; }

DdpStats DistributedDataParallel::stats() {
  impl_->close_step();
  return impl_->stats;
}

}  // namespace saturate
