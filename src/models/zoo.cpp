#include "saturate/models/zoo.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/utils.h>

#include "models/builders.h"
#include "saturate/core/errors.h"
#include "saturate/core/units.h"

namespace saturate {

const std::vector<std::string>& zoo_model_names() {
  static const std::vector<std::string> names = {"mlp", "convnet", "resnet18", "resnet50", "gpt"};
  return names;
}

bool is_model_file(const std::string& name) {
  const auto ends = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return name.find('/') != std::string::npos || ends(".pt") || ends(".pth") || ends(".zip") || ends(".ts");
}

namespace {

void positive(int64_t v, const char* flag) {
  if (v < 0) throw UsageError(fmt::format("{}: {} is negative; it must be a positive integer", flag, v));
}

}  // namespace

ModelSpec resolve_model_spec(ModelSpec s) {
  const auto& names = zoo_model_names();
  const bool file = is_model_file(s.name);
  if (!file && std::find(names.begin(), names.end(), s.name) == names.end())
    throw UsageError("model", fmt::format("unknown model '{}' (expected {}, or a TorchScript file such as "
                                 "model.pt)",
                                 s.name, fmt::join(names, ", ")));
  for (auto [v, flag] : {std::pair{s.classes, "`classes`"}, {s.layers, "`layers`"}, {s.width, "`width`"},
                         {s.heads, "`heads`"}, {s.seq_len, "`seq_len`"}, {s.vocab, "`vocab`"}})
    positive(v, flag);
  const bool gpt = s.name == "gpt";
  const char* const token_flag = s.seq_len ? "`seq_len`" : "`vocab`";
  if (!gpt && !file && (s.tokens || s.seq_len || s.vocab))
    throw UsageError(fmt::format("{}: {} takes images, not token ids; `tokens`, `seq_len` and `vocab` are for gpt "
                                 "and TorchScript files (drop {})",
                                 s.tokens ? "`tokens`" : token_flag, s.name, s.tokens ? "`tokens`" : token_flag));
  if (file && !s.tokens && (s.seq_len || s.vocab)) {
    // --seq-len or --vocab on a TorchScript file says it takes token ids, as --tokens does.
    if (!s.input_shape.empty())
      throw UsageError(fmt::format("{} {}: token models take [batch, seq-len] ids, but {} was also given the "
                                   "sample shape {} (`input` or `data`); drop {} and `vocab` for an image model, "
                                   "or drop `input`/`data` for a token model",
                                   token_flag, s.seq_len ? s.seq_len : s.vocab, s.name,
                                   format_shape(s.input_shape), token_flag));
    s.tokens = true;
  }
  if (gpt || (file && s.tokens)) {
    if (!s.input_shape.empty())
      throw UsageError(fmt::format("`input` {}: {} takes token ids, set their number with `seq_len` instead",
                                   format_shape(s.input_shape), s.name));
    if (!s.seq_len) s.seq_len = 128;
    if (!s.vocab) s.vocab = 8192;
  }
  if (file && s.tokens) {
    // the vocabulary is the number of classes of a token model; nothing else to fill in, so that
    // resolving twice (the CLI checks flags before loading, build_model resolves again) is a no-op.
    if (s.classes)
      throw UsageError(fmt::format("`classes` {}: {} predicts tokens; set the vocabulary with `vocab`", s.classes,
                                   s.name));
    return s;
  }
  if (gpt) {
    if (!s.layers) s.layers = 4;
    if (!s.width) s.width = 256;
    if (!s.heads) s.heads = 4;
    if (s.width % s.heads != 0)
      throw UsageError(fmt::format("`width` {} is not divisible by `heads` {}; pick a width that is a multiple "
                                   "of the head count",
                                   s.width, s.heads));
    if (s.classes) throw UsageError("`classes`: gpt predicts tokens; set the vocabulary with `vocab`");
    return s;
  }
  if (s.name == "mlp") {
    if (!s.layers) s.layers = 3;
    if (!s.width) s.width = 1024;
  }
  if (s.input_shape.empty())
    s.input_shape = (s.name.rfind("resnet", 0) == 0) ? std::vector<int64_t>{3, 224, 224} : std::vector<int64_t>{1, 28, 28};
  if (!s.classes) s.classes = (s.name.rfind("resnet", 0) == 0) ? 1000 : 10;
  if ((s.name == "convnet" || s.name.rfind("resnet", 0) == 0) && s.input_shape.size() != 3)
    throw UsageError(fmt::format("`input` {}: {} takes images, give CxHxW such as 3x224x224",
                                 format_shape(s.input_shape), s.name));
  if (s.name.rfind("resnet", 0) == 0 && (s.input_shape[1] < 32 || s.input_shape[2] < 32))
    throw UsageError(fmt::format("`input` {}: {} downsamples 32x, images must be at least 32x32",
                                 format_shape(s.input_shape), s.name));
  return s;
}

BuiltModel build_model(const ModelSpec& raw) {
  BuiltModel b;
  b.spec = resolve_model_spec(raw);
  const ModelSpec& s = b.spec;
  torch::manual_seed(s.seed);
  if (is_model_file(s.name)) {
    b.model = load_torchscript_model(s.name);
  } else if (s.name == "mlp") {
    int64_t features = 1;
    for (int64_t d : s.input_shape) features *= d;
    b.model = wrap_block_model(s.name, make_mlp(features, s.width, s.layers, s.classes));
  } else if (s.name == "convnet") {
    b.model = wrap_block_model(s.name, make_convnet(s.input_shape[0], s.classes));
  } else if (s.name == "resnet18" || s.name == "resnet50") {
    b.model = wrap_block_model(s.name, make_resnet(s.name == "resnet18" ? 18 : 50, s.input_shape[0], s.classes));
  } else {
    b.model = wrap_block_model(s.name, make_gpt(s.layers, s.width, s.heads, s.seq_len, s.vocab));
  }
  if (s.seq_len) {
    b.input_kind = InputKind::kTokens;
    b.sample_shape = {s.seq_len};
    b.classes = s.vocab;
  } else {
    b.input_kind = InputKind::kFeatures;
    b.sample_shape = s.input_shape;
    b.classes = s.classes;
  }
  return b;
}

}  // namespace saturate
