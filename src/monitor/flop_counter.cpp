#include "saturate/monitor/flop_counter.h"

#include <atomic>
#include <cstring>
#include <string_view>

#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>

#include "saturate/core/errors.h"
#include "saturate/step/activation_checkpoint.h"

namespace saturate {
namespace {

std::atomic<FlopCounter*> g_active{nullptr};

double numel(c10::IntArrayRef sizes) {
  double n = 1;
  for (int64_t s : sizes) n *= static_cast<double>(s);
  return n;
}

c10::IntArrayRef sizes_of(const c10::IValue& v) { return v.toTensor().sizes(); }

bool tensor_at(c10::ArrayRef<const c10::IValue> in, size_t i) { return in.size() > i && in[i].isTensor(); }

/// [.., n, k] x [.., k, m]: 2 * batch * n * k * m.
double matmul_flops(c10::IntArrayRef a, c10::IntArrayRef b) {
  if (a.size() < 2 || b.size() < 2) return 0;
  double batch = 1;
  for (size_t i = 0; i + 2 < a.size(); ++i) batch *= static_cast<double>(a[i]);
  return 2 * batch * static_cast<double>(a[a.size() - 2]) * static_cast<double>(a.back()) * static_cast<double>(b.back());
}

std::vector<int64_t> int_list(const c10::IValue& v) {
  if (v.isIntList()) return v.toIntVector();
  return {};
}

int64_t at_or(const std::vector<int64_t>& v, size_t i, int64_t fallback) {
  if (v.empty()) return fallback;
  return i < v.size() ? v[i] : v.back();
}

/// Multiply-adds per output element (forward) of a convolution with this weight: in/groups x kernel.
double conv_macs_per_element(c10::IntArrayRef weight) {
  double k = 1;
  for (size_t i = 1; i < weight.size(); ++i) k *= static_cast<double>(weight[i]);
  return k;  // weight[1] is in/groups (transposed: out/groups), times the kernel's extent
}

/// aten::_convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups,
/// ...): what aten::convolution calls, and what a traced TorchScript graph calls directly.
double convolution_flops(c10::ArrayRef<const c10::IValue> in) {
  if (!tensor_at(in, 0) || !tensor_at(in, 1) || in.size() < 7) return 0;
  const auto x = sizes_of(in[0]);
  const auto w = sizes_of(in[1]);
  if (x.size() < 3 || w.size() != x.size()) return 0;
  const bool transposed = in[6].isBool() && in[6].toBool();
  if (transposed) return 2 * numel(x) * conv_macs_per_element(w);  // each input element spreads over the kernel
  const auto stride = int_list(in[3]), padding = int_list(in[4]), dilation = int_list(in[5]);
  double out = static_cast<double>(x[0]) * static_cast<double>(w[0]);
  for (size_t d = 2; d < x.size(); ++d) {
    const int64_t k = w[d], s = at_or(stride, d - 2, 1), p = at_or(padding, d - 2, 0), dil = at_or(dilation, d - 2, 1);
    out *= static_cast<double>((x[d] + 2 * p - dil * (k - 1) - 1) / s + 1);
  }
  return 2 * out * conv_macs_per_element(w);
}

/// aten::convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
/// transposed, output_padding, groups, output_mask): the forward's FLOPs for each gradient asked.
double convolution_backward_flops(c10::ArrayRef<const c10::IValue> in) {
  if (!tensor_at(in, 0) || !tensor_at(in, 1) || !tensor_at(in, 2) || in.size() < 11) return 0;
  const bool transposed = in[7].isBool() && in[7].toBool();
  const auto w = sizes_of(in[2]);
  const double forward = 2 * numel(transposed ? sizes_of(in[1]) : sizes_of(in[0])) * conv_macs_per_element(w);
  double grads = 0;
  if (in[10].isBoolList()) {
    const auto mask = in[10].toBoolList();
    if (mask.size() > 0 && mask.get(0)) grads += 1;  // input gradient
    if (mask.size() > 1 && mask.get(1)) grads += 1;  // weight gradient
  }
  return forward * grads;
}

/// Fused attention: q [.., L, E] k [.., S, E] v [.., S, Ev] from `first`: q k^T and p v.
double attention_flops(c10::ArrayRef<const c10::IValue> in, size_t first) {
  if (!tensor_at(in, first) || !tensor_at(in, first + 1) || !tensor_at(in, first + 2)) return 0;
  const auto q = sizes_of(in[first]), k = sizes_of(in[first + 1]), v = sizes_of(in[first + 2]);
  if (q.size() < 2 || k.size() < 2 || v.size() < 2) return 0;
  const double batch = numel(q) / (static_cast<double>(q[q.size() - 2]) * static_cast<double>(q.back()));
  const double l = static_cast<double>(q[q.size() - 2]), s = static_cast<double>(k[k.size() - 2]);
  return 2 * batch * l * s * (static_cast<double>(q.back()) + static_cast<double>(v.back()));
}

double flops_of(std::string_view op, c10::ArrayRef<const c10::IValue> in) {
  if (op == "aten::mm" || op == "aten::bmm") {
    if (!tensor_at(in, 0) || !tensor_at(in, 1)) return 0;
    return matmul_flops(sizes_of(in[0]), sizes_of(in[1]));
  }
  if (op == "aten::addmm" || op == "aten::baddbmm" || op == "aten::_addmm_activation") {
    if (!tensor_at(in, 1) || !tensor_at(in, 2)) return 0;
    return matmul_flops(sizes_of(in[1]), sizes_of(in[2]));
  }
  if (op == "aten::_convolution") return convolution_flops(in);
  if (op == "aten::convolution_backward") return convolution_backward_flops(in);
  if (op.find("aten::_scaled_dot_product_") == 0 && op.find("attention") != std::string_view::npos) {
    // backward: (grad_out, query, key, value, ...), twice the forward (dq, dk, dv and dp)
    const bool backward = op.size() > 9 && op.substr(op.size() - 9) == "_backward";
    return backward ? 2 * attention_flops(in, 1) : attention_flops(in, 0);
  }
  return 0;
}

/// The operator's own arguments. The TorchScript interpreter records an operator it calls with
/// its whole stack (the arguments are the top, i.e. the tail) and the dispatcher then records
/// nothing more; the dispatcher records exactly the arguments.
c10::ArrayRef<const c10::IValue> arguments_of(const at::RecordFunction& fn) {
  const auto in = fn.inputs();
  if (const auto schema = fn.operator_schema()) {
    const size_t n = schema->arguments().size();
    if (in.size() > n) return in.slice(in.size() - n);
  }
  return in;
}

/// The dtype of the operator's first tensor argument, as the GEMM peak names it ("" when none).
const char* dtype_of(c10::ArrayRef<const c10::IValue> in) {
  for (const c10::IValue& v : in) {
    if (!v.isTensor()) continue;
    switch (v.toTensor().scalar_type()) {
      case c10::ScalarType::Float: return "fp32";
      case c10::ScalarType::BFloat16: return "bf16";
      case c10::ScalarType::Half: return "fp16";
      case c10::ScalarType::Double: return "fp64";
      default: return "other";
    }
  }
  return "";
}

/// Marks an operator that was counted, so that the operators it dispatches itself are not.
struct Counted final : at::ObserverContext {};

/// How many counted operators this thread is inside: an operator's FLOPs are its own, so a
/// counted one that another counted one calls (a bf16 addmm on a CPU that runs as mm + add, the
/// math attention's bmm) adds nothing; counted twice, bf16 steps showed more FLOPs than fp32 ones.
thread_local int t_inside_counted = 0;

std::unique_ptr<at::ObserverContext> on_op(const at::RecordFunction& fn) {
  FlopCounter* counter = g_active.load(std::memory_order_acquire);
  if (!counter) return nullptr;
  const char* name = fn.name();
  if (!name || std::strncmp(name, "aten::", 6) != 0) return nullptr;
  const auto args = arguments_of(fn);
  const double flops = flops_of(name, args);
  if (flops <= 0) return nullptr;
  if (t_inside_counted == 0) counter->add(name, flops, recomputing_checkpoint(), dtype_of(args));
  ++t_inside_counted;
  return std::make_unique<Counted>();
}

void on_op_end(const at::RecordFunction&, at::ObserverContext* ctx) {
  if (ctx) --t_inside_counted;
}

}  // namespace

FlopCounter::FlopCounter() {
  FlopCounter* expected = nullptr;
  if (!g_active.compare_exchange_strong(expected, this))
    throw RuntimeFailure("a FLOP counter is already counting in this process; count one step at a time");
  t_inside_counted = 0;  // a counter removed inside an operator never saw it end
  handle_ = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&on_op, &on_op_end).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
}

FlopCounter::~FlopCounter() {
  at::removeCallback(handle_);
  g_active.store(nullptr, std::memory_order_release);
}

void FlopCounter::add(const char* op, double flops, bool recompute, const char* dtype) {
  std::lock_guard<std::mutex> lock(mu_);
  if (recompute) {
    recompute_ += flops;
    return;
  }
  by_op_[op] += flops;
  if (dtype && *dtype) by_dtype_[dtype] += flops;
  total_ += flops;
}

std::map<std::string, double> FlopCounter::flops_by_dtype() const {
  std::lock_guard<std::mutex> lock(mu_);
  return by_dtype_;
}

std::string FlopCounter::dominant_dtype() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string best;
  double most = 0;
  for (const auto& [dtype, flops] : by_dtype_)
    if (flops > most) {
      most = flops;
      best = dtype;
    }
  return best;
}

double FlopCounter::recompute_flops() const {
  std::lock_guard<std::mutex> lock(mu_);
  return recompute_;
}

double FlopCounter::total_flops() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_;
}

std::map<std::string, double> FlopCounter::flops_by_operator() const {
  std::lock_guard<std::mutex> lock(mu_);
  return by_op_;
}

}  // namespace saturate
