#include "saturate/step/precision.h"

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <fmt/format.h>

#include "saturate/core/errors.h"

namespace saturate {

std::string to_string(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kTf32: return "tf32";
    case Precision::kBf16: return "bf16";
    case Precision::kFp16: return "fp16";
  }
  return "fp32";
}

Precision parse_precision(const std::string& text) {
  if (text == "fp32") return Precision::kFp32;
  if (text == "tf32") return Precision::kTf32;
  if (text == "bf16") return Precision::kBf16;
  if (text == "fp16") return Precision::kFp16;
  throw UsageError("precision", fmt::format("unknown value '{}' (expected fp32, tf32, bf16, fp16)", text));
}

void apply_precision_settings(Precision p) {
  at::globalContext().setFloat32MatmulPrecision(p == Precision::kTf32 ? "high" : "highest");
}

AutocastScope::AutocastScope(Precision p, const c10::Device& device) : device_type_(device.type()) {
  if (p != Precision::kBf16 && p != Precision::kFp16) return;
  active_ = true;
  was_enabled_ = at::autocast::is_autocast_enabled(device_type_);
  was_dtype_ = at::autocast::get_autocast_dtype(device_type_);
  at::autocast::set_autocast_enabled(device_type_, true);
  at::autocast::set_autocast_dtype(device_type_, p == Precision::kBf16 ? at::kBFloat16 : at::kHalf);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // the cast cache lives while any autocast scope is open, as in torch.autocast's __exit__.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_type_, was_enabled_);
  at::autocast::set_autocast_dtype(device_type_, was_dtype_);
}

}  // namespace saturate
