#include "saturate/models/zoo.h"

#include <torch/torch.h>

#include "saturate/core/errors.h"
#include "support/support.h"

using namespace saturate;

namespace {
BuiltModel build(const std::string& name, std::vector<int64_t> input = {}, int64_t classes = 0) {
  ModelSpec s;
  s.name = name;
  s.input_shape = std::move(input);
  s.classes = classes;
  return build_model(s);
}
}  // namespace

TEST(ZooTest, ResnetsHaveTorchvisionsParameterCounts) {
  // torchvision.models.resnet18() / resnet50(): 11,689,512 and 25,557,032 parameters.
  EXPECT_EQ(build("resnet18").model->parameter_count(), 11689512);
  EXPECT_EQ(build("resnet50").model->parameter_count(), 25557032);
}

TEST(ZooTest, ResnetClassifiesSmallImages) {
  auto b = build("resnet18", {3, 32, 32}, 10);
  b.model->train(false);
  torch::NoGradGuard g;
  EXPECT_EQ(b.model->forward(torch::randn({2, 3, 32, 32})).sizes(), torch::IntArrayRef({2, 10}));
}

TEST(ZooTest, GptMapsTokensToLogitsPerPosition) {
  ModelSpec s;
  s.name = "gpt";
  s.layers = 2;
  s.width = 64;
  s.heads = 4;
  s.seq_len = 16;
  s.vocab = 100;
  auto b = build_model(s);
  EXPECT_EQ(b.input_kind, InputKind::kTokens);
  auto logits = b.model->forward(torch::randint(100, {3, 16}));
  EXPECT_EQ(logits.sizes(), torch::IntArrayRef({3, 16, 100}));
  // 2 blocks of 12*w^2 + 13*w, embeddings (vocab+seq)*w, final LayerNorm 2w, head w*vocab
  const int64_t w = 64;
  EXPECT_EQ(b.model->parameter_count(), 2 * (12 * w * w + 13 * w) + (100 + 16) * w + 2 * w + w * 100);
  ASSERT_NE(as_block_model(*b.model), nullptr);
  EXPECT_EQ(as_block_model(*b.model)->blocks.size(), 2u);
}

TEST(ZooTest, GptIsCausal) {
  ModelSpec s;
  s.name = "gpt";
  s.layers = 1;
  s.width = 32;
  s.heads = 2;
  s.seq_len = 8;
  s.vocab = 50;
  auto b = build_model(s);
  b.model->train(false);
  torch::NoGradGuard g;
  auto ids = torch::randint(50, {1, 8});
  auto changed = ids.clone();
  changed[0][7] = (ids[0][7].item<int64_t>() + 1) % 50;
  auto a = b.model->forward(ids), c = b.model->forward(changed);
  EXPECT_TRUE(torch::allclose(a.slice(1, 0, 7), c.slice(1, 0, 7)));  // earlier positions unaffected
  EXPECT_FALSE(torch::allclose(a.slice(1, 7, 8), c.slice(1, 7, 8)));
}

TEST(ZooTest, MlpAndConvnetDefaultToFashionMnistShapes) {
  auto mlp = build("mlp");
  EXPECT_EQ(mlp.sample_shape, (std::vector<int64_t>{1, 28, 28}));
  // 784*1024+1024 + 2*(1024*1024+1024) + 1024*10+10
  EXPECT_EQ(mlp.model->parameter_count(), 784 * 1024 + 1024 + 2 * (1024 * 1024 + 1024) + 1024 * 10 + 10);
  auto conv = build("convnet");
  EXPECT_EQ(conv.model->forward(torch::randn({4, 1, 28, 28})).sizes(), torch::IntArrayRef({4, 10}));
}

TEST(ZooTest, RejectsUnknownModelsAndBadShapesWithTheFix) {
  ASSERT_USAGE_ERROR_ABOUT(build("vgg"), "model", "unknown model 'vgg' (expected mlp, convnet, resnet18");
  ASSERT_THROWS_WITH(build("convnet", {784}), UsageError, "give CxHxW");
  ASSERT_THROWS_WITH(build("resnet18", {3, 16, 16}), UsageError, "at least 32x32");
  ModelSpec s;
  s.name = "gpt";
  s.width = 100;
  s.heads = 3;
  ASSERT_THROWS_WITH(build_model(s), UsageError, "`width` 100 is not divisible by `heads` 3");
}
