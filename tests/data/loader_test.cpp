// The loader: the same batches whatever the worker count, every sample once per epoch and a
// new order each epoch, disjoint covering rank shards, drop-last, a bounded prefetch window,
// measured waits, worker errors on the consumer's thread with file and sample; and the fused
// augmentation (crop with padding, flip, normalize) it runs.
#include "saturate/data/loader.h"

#include <atomic>
#include <set>

#include <torch/torch.h>

#include "data/data_fixtures.h"
#include "saturate/core/errors.h"
#include "saturate/data/augment.h"
#include "saturate/data/sampler.h"
#include "support/support.h"

using namespace saturate;
using namespace saturate::testing;

namespace {

std::vector<LoadedBatch> take(Loader& loader, int64_t n) {
  std::vector<LoadedBatch> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(loader.next());
  return out;
}

LoaderOptions options(int64_t batch, int workers) {
  LoaderOptions o;
  o.batch_size = batch;
  o.workers = workers;
  o.seed = 7;
  o.shape = {1, 4, 4};
  return o;
}

}  // namespace

TEST(LoaderTest, GivesTheSameBatchesWhateverTheWorkerCount) {
  auto ds = std::make_shared<StubDataset>(53);
  Loader reference(ds, options(8, 0));
  const auto expected = take(reference, 2 * reference.batches_per_epoch() + 1);  // into a third epoch
  for (int workers : {1, 2, 5}) {
    Loader loader(ds, options(8, workers));
    const auto got = take(loader, static_cast<int64_t>(expected.size()));
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(got[i].indices, expected[i].indices) << workers << " workers, batch " << i;
      EXPECT_TRUE(torch::equal(got[i].inputs, expected[i].inputs)) << workers << " workers, batch " << i;
      EXPECT_TRUE(torch::equal(got[i].targets, expected[i].targets));
    }
  }
}

TEST(LoaderTest, VisitsEverySampleOncePerEpochInANewOrderEachEpoch) {
  auto ds = std::make_shared<StubDataset>(103);
  Loader loader(ds, options(10, 2));
  ASSERT_EQ(loader.batches_per_epoch(), 11);
  std::vector<std::vector<int64_t>> epochs(3);
  for (int64_t b = 0; b < 3 * loader.batches_per_epoch(); ++b) {
    const LoadedBatch batch = loader.next();
    EXPECT_EQ(batch.epoch, b / 11);
    EXPECT_EQ(batch.inputs.size(0), b % 11 == 10 ? 3 : 10);  // the last batch is partial
    EXPECT_EQ(batch.targets.size(0), batch.inputs.size(0));
    auto& e = epochs[static_cast<size_t>(batch.epoch)];
    e.insert(e.end(), batch.indices.begin(), batch.indices.end());
  }
  for (const auto& e : epochs) {
    ASSERT_EQ(e.size(), 103u);
    EXPECT_EQ(std::set<int64_t>(e.begin(), e.end()).size(), 103u);
  }
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_NE(epochs[1], epochs[2]);
}

TEST(LoaderTest, DropLastDropsThePartialBatch) {
  auto ds = std::make_shared<StubDataset>(25);
  LoaderOptions o = options(10, 1);
  o.drop_last = true;
  Loader loader(ds, o);
  EXPECT_EQ(loader.batches_per_epoch(), 2);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(loader.next().inputs.size(0), 10);
  o.batch_size = 30;
  ASSERT_THROWS_WITH(Loader(ds, o), UsageError, "`drop_last` with batch 30 leaves no batch");
}

TEST(LoaderTest, RankShardsAreDisjointAndCoverTheEpoch) {
  for (int64_t n : {100, 101, 7}) {
    for (int world : {1, 3, 4}) {
      std::multiset<int64_t> all;
      for (int rank = 0; rank < world; ++rank) {
        ShardOptions s;
        s.rank = rank;
        s.world_size = world;
        const auto mine = epoch_order(n, 3, 1, s);
        EXPECT_LE(static_cast<int64_t>(mine.size()), (n + world - 1) / world);
        EXPECT_GE(static_cast<int64_t>(mine.size()), n / world);
        all.insert(mine.begin(), mine.end());
      }
      ASSERT_EQ(static_cast<int64_t>(all.size()), n) << n << " samples on " << world << " ranks";
      EXPECT_EQ(static_cast<int64_t>(std::set<int64_t>(all.begin(), all.end()).size()), n) << "shards overlap";
    }
  }
  // padded (DistributedSampler's equal shards): every rank gets ceil(n / world), still covering.
  std::set<int64_t> seen;
  for (int rank = 0; rank < 3; ++rank) {
    ShardOptions s{true, rank, 3, true, {}};
    const auto mine = epoch_order(100, 3, 0, s);
    EXPECT_EQ(mine.size(), 34u);
    seen.insert(mine.begin(), mine.end());
  }
  EXPECT_EQ(seen.size(), 100u);
  ShardOptions bad{true, 3, 3, false, {}};
  ASSERT_THROWS_WITH(epoch_order(10, 0, 0, bad), UsageError, "rank 3 of world size 3");
}

TEST(LoaderTest, UnequalSharesGiveEachRankItsPartOfEveryGlobalBatchAndEqualStepCounts) {
  // 3 ranks taking 5, 2 and 1 of every 8 samples; 61 samples: 7 whole global batches, 5 left out
  const std::vector<int64_t> shares{5, 2, 1};
  ShardOptions one;  // the one-process order the global batches are cut from
  const auto whole = epoch_order(61, 9, 2, one);
  std::vector<std::vector<int64_t>> mine;
  for (int rank = 0; rank < 3; ++rank) {
    ShardOptions s;
    s.rank = rank;
    s.world_size = 3;
    s.shares = shares;
    mine.push_back(epoch_order(61, 9, 2, s));
    EXPECT_EQ(mine.back().size(), static_cast<size_t>(7 * shares[static_cast<size_t>(rank)])) << "rank " << rank;
  }
  // global batch k of one process = rank 0's k-th 5, then rank 1's k-th 2, then rank 2's k-th 1
  for (size_t k = 0; k < 7; ++k) {
    std::vector<int64_t> joined;
    for (size_t rank = 0; rank < 3; ++rank) {
      const auto n = static_cast<size_t>(shares[rank]);
      joined.insert(joined.end(), mine[rank].begin() + static_cast<std::ptrdiff_t>(k * n),
                    mine[rank].begin() + static_cast<std::ptrdiff_t>((k + 1) * n));
    }
    EXPECT_EQ(joined, std::vector<int64_t>(whole.begin() + static_cast<std::ptrdiff_t>(k * 8),
                                           whole.begin() + static_cast<std::ptrdiff_t>((k + 1) * 8)))
        << "global batch " << k;
  }
  ShardOptions bad;
  bad.world_size = 2;
  bad.shares = {5, 2, 1};
  ASSERT_THROWS_WITH(epoch_order(10, 0, 0, bad), UsageError, "3 values for 2 ranks");
  bad.shares = {5, 0};
  ASSERT_THROWS_WITH(epoch_order(10, 0, 0, bad), UsageError, "rank 1's share is 0");
}

TEST(LoaderTest, ShardsThroughTheLoaderAreDisjoint) {
  auto ds = std::make_shared<StubDataset>(40);
  std::set<int64_t> seen;
  for (int rank = 0; rank < 2; ++rank) {
    LoaderOptions o = options(5, 2);
    o.shard.rank = rank;
    o.shard.world_size = 2;
    Loader loader(ds, o);
    EXPECT_EQ(loader.samples_per_epoch(), 20);
    for (const auto& b : take(loader, loader.batches_per_epoch()))
      for (int64_t i : b.indices) EXPECT_TRUE(seen.insert(i).second) << "sample " << i << " on two ranks";
  }
  EXPECT_EQ(seen.size(), 40u);
}

TEST(LoaderTest, WorkerErrorReachesTheConsumerWithFileAndSample) {
  auto ds = std::make_shared<StubDataset>(30);
  ds->on_get = [](int64_t i) {
    if (i == 17) throw DataError("stub-file-17", 1234, "checksum mismatch");
  };
  for (int workers : {0, 1, 3}) {
    LoaderOptions o = options(30, workers);
    o.shard.shuffle = false;
    Loader loader(ds, o);
    ASSERT_THROWS_WITH(loader.next(), DataError, "stub-file-17 at byte 1234: sample 17 of stub: checksum mismatch");
    o.skip_bad_samples = true;
    Loader skipping(ds, o);
    const LoadedBatch b = skipping.next();
    EXPECT_EQ(b.inputs.size(0), 29);
    EXPECT_EQ(std::count(b.indices.begin(), b.indices.end(), 17), 0);
    EXPECT_EQ(skipping.stats().skipped.count, 1);
  }
}

TEST(LoaderTest, OtherWorkerFailuresBecomeRuntimeFailuresNamingTheBatch) {
  auto ds = std::make_shared<StubDataset>(8);
  ds->on_get = [](int64_t i) {
    if (i == 3) throw std::logic_error("boom");
  };
  LoaderOptions o = options(4, 2);
  o.shard.shuffle = false;
  o.skip_bad_samples = true;  // not a data error: never skipped
  Loader loader(ds, o);
  ASSERT_THROWS_WITH(loader.next(), RuntimeFailure, "data loader, batch 0 of epoch 0 of stub: boom");
}

TEST(LoaderTest, LabelsOutsideTheModelsClassesAreErrors) {
  auto ds = std::make_shared<StubDataset>(8, 10);
  LoaderOptions o = options(8, 1);
  o.classes = 5;
  o.shard.shuffle = false;
  Loader loader(ds, o);
  ASSERT_THROWS_WITH(loader.next(), DataError, "stub-file-5: sample 5 of stub: label 5 is out of range [0, 5)");
}

TEST(LoaderTest, PrefetchWindowBoundsTheBatchesLoadedAhead) {
  auto ds = std::make_shared<StubDataset>(1000);
  std::atomic<int64_t> loaded{0};
  ds->on_get = [&](int64_t) { ++loaded; };
  LoaderOptions o = options(10, 2);
  o.prefetch = 3;
  Loader loader(ds, o);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(loaded.load(), 2 * 3 * 10);  // workers * prefetch batches, no more
  loader.next();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(loaded.load(), 7 * 10);
  EXPECT_TRUE(loader.ready());
}

TEST(LoaderTest, ABatchInPiecesIsTheWholeBatchJoinedInOrder) {
  auto ds = std::make_shared<StubDataset>(53);  // batches of 8: the epoch's last has 5 samples
  Loader whole(ds, options(8, 0));
  const auto expected = take(whole, 2 * whole.batches_per_epoch() + 2);  // into a third epoch
  for (int workers : {0, 3}) {
    LoaderOptions o = options(8, workers);
    o.parts = 3;  // pieces of 3, 3, 2 (the short batch: 2, 2, 1)
    Loader pieces(ds, o);
    EXPECT_EQ(pieces.batches_per_epoch(), whole.batches_per_epoch());
    for (size_t i = 0; i < expected.size(); ++i) {
      std::vector<int64_t> indices;
      std::vector<torch::Tensor> inputs;
      for (int64_t part = 0; part < 3; ++part) {
        const LoadedBatch p = pieces.next();
        EXPECT_EQ(p.part, part);
        EXPECT_EQ(p.batch_in_epoch, expected[i].batch_in_epoch);
        const int64_t rows = static_cast<int64_t>(expected[i].indices.size());
        EXPECT_EQ(p.inputs.size(0), rows / 3 + (part < rows % 3 ? 1 : 0)) << "batch " << i << " part " << part;
        indices.insert(indices.end(), p.indices.begin(), p.indices.end());
        inputs.push_back(p.inputs);
      }
      EXPECT_EQ(indices, expected[i].indices) << workers << " workers, batch " << i;
      EXPECT_TRUE(torch::equal(torch::cat(inputs), expected[i].inputs)) << "batch " << i;
    }
    EXPECT_EQ(pieces.stats().batches, static_cast<int64_t>(expected.size())) << "batches, not pieces";
  }
  LoaderOptions resumed = options(8, 2);
  resumed.parts = 2;
  resumed.first_batch = 7;  // the first batch of the second epoch
  Loader from_seven(ds, resumed);
  const LoadedBatch first = from_seven.next();
  EXPECT_EQ(first.epoch, 1);
  EXPECT_EQ(first.part, 0);
  EXPECT_EQ(first.indices, std::vector<int64_t>(expected[7].indices.begin(), expected[7].indices.begin() + 4));
  LoaderOptions too_many = options(8, 0);
  too_many.parts = 9;
  ASSERT_THROWS_WITH((void)Loader(ds, too_many), UsageError, "9 pieces of a batch of 8: give 1 to the batch size");
}

TEST(LoaderTest, WithPiecesTheWindowHoldsPiecesNotBatches) {
  auto ds = std::make_shared<StubDataset>(1000);
  std::atomic<int64_t> loaded{0};
  ds->on_get = [&](int64_t) { ++loaded; };
  LoaderOptions o = options(30, 2);
  o.prefetch = 3;
  o.parts = 3;
  Loader loader(ds, o);
  // waits for the window to fill (however slow the machine), then that it stays there
  const auto filled = [&](int64_t samples) {
    for (int i = 0; i < 2000 && loaded.load() < samples; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return loaded.load();
  };
  EXPECT_EQ(filled(2 * 3 * 10), 2 * 3 * 10);  // workers * prefetch pieces of 10, not batches of 30
  loader.next();
  EXPECT_EQ(filled(7 * 10), 7 * 10);
}

TEST(LoaderTest, MeasuresHowLongTheConsumerWaited) {
  auto ds = std::make_shared<StubDataset>(64);
  std::atomic<int64_t> loaded{0};
  ds->on_get = [&loaded](int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ++loaded;
  };
  Loader loader(ds, options(8, 1));
  const LoadedBatch first = loader.next();  // ~16 ms of loading, nothing ahead yet
  EXPECT_GT(first.wait_ms, 8.0);
  // the worker gets ahead: the second batch's 8 samples loaded (waited for, however slow the machine)
  for (int i = 0; i < 2000 && loaded.load() < 16; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_GE(loaded.load(), 16);
  const LoadedBatch second = loader.next();
  EXPECT_LT(second.wait_ms, first.wait_ms);
  EXPECT_GE(loader.stats().wait_ms_total, first.wait_ms + second.wait_ms - 1e-9);
}

TEST(AugmentTest, WithoutCropOrFlipItNormalizesToCHW) {
  const Image img = pattern_image(3, 4, 3, 1);
  AugmentOptions o;
  o.crop_padding = 0;
  o.horizontal_flip = false;
  o.mean = {0.5f, 0.25f, 0.f};
  o.std = {0.5f, 0.25f, 1.f};
  std::vector<float> out(36);
  augment_into(img, {3, 3, 4}, o, 1, out.data());
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t y = 0; y < 3; ++y)
      for (int64_t x = 0; x < 4; ++x)
        EXPECT_FLOAT_EQ(out[static_cast<size_t>((c * 3 + y) * 4 + x)],
                        (pixel(1, y, x, c) / 255.f - o.mean[c]) / o.std[c]);
}

TEST(AugmentTest, CropWithPaddingAndFlipGiveShiftedMirroredViewsOfTheImage) {
  const int64_t H = 6, W = 7, P = 2;
  const Image img = pattern_image(H, W, 1, 2);
  AugmentOptions o;
  o.crop_padding = P;
  o.mean = {0.f};
  o.std = {1.f};
  std::set<std::tuple<int64_t, int64_t, bool>> seen;
  std::vector<float> out(H * W);
  for (uint64_t seed = 0; seed < 300; ++seed) {
    augment_into(img, {1, H, W}, o, seed, out.data());
    bool found = false;
    for (int64_t dy = -P; dy <= P && !found; ++dy)
      for (int64_t dx = -P; dx <= P && !found; ++dx)
        for (bool flip : {false, true}) {
          bool same = true;
          for (int64_t y = 0; y < H && same; ++y)
            for (int64_t x = 0; x < W && same; ++x) {
              const int64_t sy = y + dy, sx = (flip ? W - 1 - x : x) + dx;
              const float want = sy < 0 || sy >= H || sx < 0 || sx >= W ? 0.f : pixel(2, sy, sx) / 255.f;
              same = out[static_cast<size_t>(y * W + x)] == want;
            }
          if (same) {
            found = true;
            seen.insert({dy, dx, flip});
            break;
          }
        }
    ASSERT_TRUE(found) << "seed " << seed << " gave no padded crop or flip of the image";
  }
  EXPECT_GE(seen.size(), 40u);  // of the 5 * 5 * 2 = 50 possible views
}

TEST(AugmentTest, ConvertsChannelsAndResizesToTheRequestedShape) {
  AugmentOptions o;
  o.crop_padding = 0;
  o.horizontal_flip = false;
  o.mean = {0.f};
  o.std = {1.f};
  Image grey = pattern_image(4, 4, 1, 3);
  std::vector<float> rgb(3 * 8 * 8);
  augment_into(grey, {3, 8, 8}, o, 0, rgb.data());  // grey -> RGB, 4x4 -> 8x8 (nearest)
  EXPECT_FLOAT_EQ(rgb[0], rgb[64]);
  EXPECT_FLOAT_EQ(rgb[2 * 8 + 3], pixel(3, 1, 1) / 255.f);
  Image colour;
  colour.resize(1, 1, 3);
  colour.pixels = {255, 0, 0};
  float g = 0;
  augment_into(colour, {1, 1, 1}, o, 0, &g);
  EXPECT_NEAR(g, 0.299f, 0.005f);
}
