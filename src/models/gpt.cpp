// gpt: a decoder-only transformer (GPT-2 layout: pre-norm blocks of causal self-attention and a
// 4x GELU MLP, learned positions, final LayerNorm, linear head). Input: token ids [B, T];
// output: logits [B, T, vocab]. Each transformer block is one checkpointable block.
#include "models/builders.h"

namespace saturate {
namespace {

namespace nn = torch::nn;

struct EmbeddingImpl : nn::Module {
  EmbeddingImpl(int64_t vocab, int64_t seq_len, int64_t width)
      : tokens(register_module("tokens", nn::Embedding(vocab, width))),
        positions(register_module("positions", nn::Embedding(seq_len, width))) {}
  torch::Tensor forward(torch::Tensor ids) {
    const int64_t t = ids.size(1);
    auto pos = torch::arange(t, torch::TensorOptions().dtype(torch::kLong).device(ids.device()));
    return tokens->forward(ids) + positions->forward(pos).unsqueeze(0);
  }
  nn::Embedding tokens, positions;
};
TORCH_MODULE(Embedding);

struct TransformerBlockImpl : nn::Module {
  TransformerBlockImpl(int64_t width, int64_t heads)
      : heads(heads),
        ln1(register_module("ln1", nn::LayerNorm(nn::LayerNormOptions({width})))),
        qkv(register_module("qkv", nn::Linear(width, 3 * width))),
        proj(register_module("proj", nn::Linear(width, width))),
        ln2(register_module("ln2", nn::LayerNorm(nn::LayerNormOptions({width})))),
        fc(register_module("fc", nn::Linear(width, 4 * width))),
        out(register_module("out", nn::Linear(4 * width, width))) {}
  torch::Tensor forward(torch::Tensor x) {
    const int64_t b = x.size(0), t = x.size(1), c = x.size(2);
    auto parts = qkv->forward(ln1->forward(x)).view({b, t, 3, heads, c / heads}).permute({2, 0, 3, 1, 4});
    auto y = at::scaled_dot_product_attention(parts[0], parts[1], parts[2], {}, 0.0, /*is_causal=*/true);
    x = x + proj->forward(y.transpose(1, 2).reshape({b, t, c}));
    return x + out->forward(torch::gelu(fc->forward(ln2->forward(x)), "tanh"));
  }
  int64_t heads;
  nn::LayerNorm ln1;
  nn::Linear qkv, proj;
  nn::LayerNorm ln2;
  nn::Linear fc, out;
};
TORCH_MODULE(TransformerBlock);

}  // namespace

BlockModel make_gpt(int64_t layers, int64_t width, int64_t heads, int64_t seq_len, int64_t vocab) {
  std::vector<nn::AnyModule> blocks;
  for (int64_t i = 0; i < layers; ++i) blocks.emplace_back(TransformerBlock(width, heads));
  Chain head(nn::LayerNorm(nn::LayerNormOptions({width})),
                      nn::Linear(nn::LinearOptions(width, vocab).bias(false)));
  return BlockModel(nn::AnyModule(Embedding(vocab, seq_len, width)), std::move(blocks), nn::AnyModule(head));
}

}  // namespace saturate
