// CIFAR-10/100 binary batches: records read back (planar to interleaved), the split's files
// chosen, short records and labels out of range named by file and offset, or skipped.
#include "data/data_fixtures.h"
#include "saturate/data/dataset.h"
#include "support/support.h"

using namespace saturate;
using namespace saturate::testing;

namespace {

void expect_record(const Dataset& ds, int64_t index, int64_t label, int64_t pattern) {
  Image img;
  EXPECT_EQ(ds.get(index, 0, img), label);
  ASSERT_EQ(img.channels, 3);
  for (int64_t y : {0, 17, 31})
    for (int64_t x : {0, 9, 31})
      for (int64_t c = 0; c < 3; ++c)
        EXPECT_EQ(img.pixels[static_cast<size_t>((y * 32 + x) * 3 + c)], pixel(pattern, y, x, c));
}

}  // namespace

TEST(CifarTest, ReadsCifar10TrainBatchesBackInterleaved) {
  const std::string dir = temp_dir("cifar");
  write_bytes(dir + "/data_batch_1.bin", cifar_records(10, {6, 9, 9}, 0));
  write_bytes(dir + "/data_batch_2.bin", cifar_records(10, {4, 1}, 3));
  write_bytes(dir + "/test_batch.bin", cifar_records(10, {3}, 5));
  write_bytes(dir + "/batches.meta.txt", text("airplane\n"));
  const auto ds = open_dataset("cifar10:" + dir, {});
  ASSERT_EQ(ds->size(), 5);
  EXPECT_EQ(ds->classes(), 10);
  EXPECT_EQ(to_string(ds->shape()), "3x32x32");
  expect_record(*ds, 0, 6, 0);
  expect_record(*ds, 2, 9, 2);
  expect_record(*ds, 4, 1, 4);
  DatasetOptions test;
  test.split = "test";
  const auto t = open_dataset("cifar10:" + dir, test);
  ASSERT_EQ(t->size(), 1);
  expect_record(*t, 0, 3, 5);
}

TEST(CifarTest, ReadsCifar100FineLabels) {
  const std::string dir = temp_dir("cifar");
  write_bytes(dir + "/train.bin", cifar_records(100, {42, 99, 0}));
  const auto ds = open_dataset("cifar100:" + dir, {});
  ASSERT_EQ(ds->size(), 3);
  EXPECT_EQ(ds->classes(), 100);
  expect_record(*ds, 0, 42, 0);
  expect_record(*ds, 1, 99, 1);
}

TEST(CifarTest, ShortLastRecordStopsWithTheOffsetOrIsSkipped) {
  const std::string dir = temp_dir("cifar");
  Bytes b = cifar_records(10, {1, 2, 3});
  b.resize(b.size() - 100);
  write_bytes(dir + "/data_batch_1.bin", b);
  ASSERT_THROWS_WITH(open_dataset("cifar10:" + dir, {}), DataError,
                     "data_batch_1.bin at byte 6146: short CIFAR-10 record: 2973 of 3073 bytes");
  DatasetOptions skip;
  skip.skip_bad_samples = true;
  const auto ds = open_dataset("cifar10:" + dir, skip);
  EXPECT_EQ(ds->size(), 2);
  EXPECT_EQ(ds->open_skips().count, 1);
}

TEST(CifarTest, LabelOutOfRangeStopsWithTheOffsetOrIsSkipped) {
  const std::string dir = temp_dir("cifar");
  write_bytes(dir + "/data_batch_1.bin", cifar_records(10, {1, 10, 3}));  // a CIFAR-10 label of 10
  ASSERT_THROWS_WITH(open_dataset("cifar10:" + dir, {}), DataError,
                     "data_batch_1.bin at byte 3073: label 10 of record 1 is out of range [0, 10)");
  DatasetOptions skip;
  skip.skip_bad_samples = true;
  const auto ds = open_dataset("cifar10:" + dir, skip);
  ASSERT_EQ(ds->size(), 2);
  expect_record(*ds, 1, 3, 2);
}

TEST(CifarTest, UnreadableFileIsSkippedWholeInSkipMode) {
  const std::string dir = temp_dir("cifar");
  write_bytes(dir + "/data_batch_1.bin", cifar_records(10, {1, 2}));
  write_bytes(dir + "/data_batch_2.bin", Bytes{});
  ASSERT_THROWS_WITH(open_dataset("cifar10:" + dir, {}), DataError, "data_batch_2.bin at byte 0: empty file");
  DatasetOptions skip;
  skip.skip_bad_samples = true;
  const auto ds = open_dataset("cifar10:" + dir, skip);
  EXPECT_EQ(ds->size(), 2);
  ASSERT_EQ(ds->open_skips().reasons.size(), 1u);
  EXPECT_NE(ds->open_skips().reasons[0].find("(file skipped)"), std::string::npos);
}

TEST(CifarTest, FolderWithoutBatchesIsAUsageError) {
  const std::string dir = temp_dir("cifar");
  ASSERT_THROWS_WITH(open_dataset("cifar10:" + dir, {}), UsageError, "no CIFAR batch files");
  ASSERT_THROWS_WITH(open_dataset("cifar100:/nonexistent", {}), UsageError, "cifar100:/nonexistent: no such folder");
}
