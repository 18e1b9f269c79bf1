// Implements: the framework switches that make a step faster without changing what it computes
// (seed B7), as one value the search tries (search/fast_path_choice.h) and training applies:
//  - cudnn_benchmark: cuDNN times its convolution algorithms per shape and keeps the fastest
//  - tf32: fp32 matrix products and convolutions on TF32 tensor cores (CUDA; precision fp32)
//  - channels_last: 4-D weights and inputs in NHWC, the layout tensor cores and oneDNN prefer
//  - fused_optimizer: one fused kernel for the optimizer step (step/fused_optimizer.h)
//  - cuda_graphs: the whole step captured once as a CUDA graph and replayed (step/graphed_step.h)
//  - threads: CPU intra-op threads (0: as the process has them)
//  - compress_bf16: several ranks all-reduce their float32 gradients in bf16 (dist/ddp.h)
// Process-wide switches (cudnn_benchmark, tf32, threads) are set by ProcessSwitches; the others
// are the step's (TrainingStep applies them to the model, inputs and optimizer it makes).
#pragma once
#include <string>
#include <vector>

#include <torch/types.h>

namespace saturate {

struct FastPaths {
  bool cudnn_benchmark = false;
  bool tf32 = false;
  bool channels_last = false;
  bool fused_optimizer = false;
  bool cuda_graphs = false;  ///< implies a capturable fused optimizer
  int threads = 0;
  bool compress_bf16 = false;  ///< DDP's gradient all-reduce in bf16 (training on several ranks)

  bool operator==(const FastPaths& o) const {
    return cudnn_benchmark == o.cudnn_benchmark && tf32 == o.tf32 && channels_last == o.channels_last &&
           fused_optimizer == o.fused_optimizer && cuda_graphs == o.cuda_graphs && threads == o.threads &&
           compress_bf16 == o.compress_bf16;
  }
  /// "channels_last,fused_optimizer,threads=1"; "none" when nothing is on.
  std::string to_string() const;
  /// The switches that are on, by name ("threads=1" for a thread count).
  std::vector<std::string> names() const;
};

/// The switch names parse_fast_paths accepts.
const std::vector<std::string>& fast_path_names();
/// "none", or a comma-separated list of fast_path_names() ("threads=N" for a thread count).
/// Throws UsageError (option "fast_paths") naming the unknown entry and the allowed names.
FastPaths parse_fast_paths(const std::string& text);

/// Turns on the process-wide switches of `paths` (cudnn_benchmark, tf32, threads=N) for good:
/// what a user keeps after the trials put them back (Python's FastPaths.apply()).
void set_process_switches(const FastPaths& paths);

/// Sets the process-wide switches of `paths` for its lifetime and puts the previous ones back.
class ProcessSwitches {
 public:
  explicit ProcessSwitches(const FastPaths& paths);
  ~ProcessSwitches();
  ProcessSwitches(const ProcessSwitches&) = delete;
  ProcessSwitches& operator=(const ProcessSwitches&) = delete;

 private:
  bool cudnn_benchmark_;
  bool tf32_cublas_;
  bool tf32_cudnn_;
  int threads_;
};

/// Puts the 4-D tensors among `tensors` (a model's parameters and buffers) in `format`
/// (ChannelsLast or Contiguous), in place: the model's own tensors change.
void set_memory_format(const std::vector<torch::Tensor>& tensors, torch::MemoryFormat format);
/// Whether any of `tensors` is 4-D (convolution weights), where channels_last can matter.
bool has_4d(const std::vector<torch::Tensor>& tensors);

}  // namespace saturate
