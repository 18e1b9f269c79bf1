// Implements: --precision fp32|tf32|bf16|fp16 and the autocast scope of a forward pass.
// bf16/fp16 run the forward pass under autocast (CPU autocast supports bf16; fp16 is for CUDA);
// parameters stay fp32 (master weights). tf32 lets CUDA matmuls use TensorFloat-32.
#pragma once
#include <string>

#include <c10/core/Device.h>

namespace saturate {

enum class Precision { kFp32, kTf32, kBf16, kFp16 };
std::string to_string(Precision p);
/// Throws UsageError for anything but fp32, tf32, bf16, fp16.
Precision parse_precision(const std::string& text);

/// Sets process-wide switches a precision needs (tf32 matmuls); call once before training.
void apply_precision_settings(Precision p);

/// Autocast on for its lifetime when the precision asks for it (bf16/fp16), as
/// torch.autocast(device_type, dtype) does; restores the previous state.
class AutocastScope {
 public:
  AutocastScope(Precision p, const c10::Device& device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  c10::DeviceType device_type_;
  bool was_enabled_ = false;
  c10::ScalarType was_dtype_;
};

}  // namespace saturate
