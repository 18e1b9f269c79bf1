// IDX files (MNIST family): read back exactly, plain and gzipped; bad magic, truncation, labels
// out of range and mismatched counts named by file and offset, or skipped and counted; and the
// real Fashion-MNIST when Debian's dataset-fashion-mnist is installed.
#include "data/data_fixtures.h"
#include "data/formats.h"
#include "saturate/data/dataset.h"
#include "support/fashion.h"
#include "support/support.h"

using namespace saturate;
using namespace saturate::testing;

namespace {

std::string write_pair(const std::string& dir, const Bytes& images, const Bytes& labels, bool gz = false) {
  write_bytes(dir + "/train-images-idx3-ubyte" + (gz ? ".gz" : ""), gz ? gzip_bytes(images) : images);
  write_bytes(dir + "/train-labels-idx1-ubyte" + (gz ? ".gz" : ""), gz ? gzip_bytes(labels) : labels);
  return dir;
}

void expect_samples_read_back(const Dataset& ds, int64_t n, const std::vector<uint8_t>& labels) {
  ASSERT_EQ(ds.size(), n);
  EXPECT_EQ(to_string(ds.shape()), "1x3x4");
  EXPECT_EQ(ds.classes(), 10);
  Image img;
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(ds.get(i, 0, img), labels[static_cast<size_t>(i)]);
    ASSERT_EQ(img.pixels.size(), 12u);
    for (int64_t y = 0; y < 3; ++y)
      for (int64_t x = 0; x < 4; ++x) EXPECT_EQ(img.pixels[static_cast<size_t>(y * 4 + x)], pixel(i, y, x));
  }
}

}  // namespace

TEST(IdxTest, ReadsPlainImagesAndLabelsBackExactly) {
  const std::vector<uint8_t> labels{3, 1, 4, 1, 5};
  const std::string dir = write_pair(temp_dir("idx"), idx_images(5, 3, 4), idx_labels(labels));
  expect_samples_read_back(*open_dataset("idx:" + dir, {}), 5, labels);
}

TEST(IdxTest, ReadsGzippedFilesBackExactly) {
  const std::vector<uint8_t> labels{9, 2, 6, 5, 3, 5, 8};
  const std::string dir = write_pair(temp_dir("idx"), idx_images(7, 3, 4), idx_labels(labels), /*gz=*/true);
  expect_samples_read_back(*open_dataset("idx:" + dir, {}), 7, labels);
}

TEST(IdxTest, BadMagicNamesTheFileAndOffsetInBothModes) {
  Bytes images = idx_images(2, 3, 4);
  images[0] = 0x1f;  // not two zero bytes
  const std::string dir = write_pair(temp_dir("idx"), images, idx_labels({1, 2}));
  for (bool skip : {false, true}) {
    DatasetOptions o;
    o.skip_bad_samples = skip;  // a file with no valid header has nothing to skip to
    ASSERT_THROWS_WITH(open_dataset("idx:" + dir, o), DataError,
                       dir + "/train-images-idx3-ubyte at byte 0: bad IDX magic 0x1f000803");
  }
}

TEST(IdxTest, TruncatedImagesStopWithTheOffsetOrAreSkippedAndCounted) {
  Bytes images = idx_images(5, 3, 4);
  images.resize(images.size() - 7);  // the fifth image loses 7 of its 12 bytes
  const std::string dir = write_pair(temp_dir("idx"), images, idx_labels({1, 2, 3, 4, 5}));
  ASSERT_THROWS_WITH(open_dataset("idx:" + dir, {}), DataError,
                     "train-images-idx3-ubyte at byte 64: truncated: the header declares 5 images of 12 bytes but the "
                     "file ends after 4 (7 bytes short)");
  DatasetOptions skip;
  skip.skip_bad_samples = true;
  const auto ds = open_dataset("idx:" + dir, skip);
  EXPECT_EQ(ds->size(), 4);
  EXPECT_EQ(ds->open_skips().count, 1);
  ASSERT_EQ(ds->open_skips().reasons.size(), 1u);
  EXPECT_NE(ds->open_skips().reasons[0].find("1 samples missing"), std::string::npos);
}

TEST(IdxTest, TruncatedGzipStreamStopsOrKeepsTheCompleteSamples) {
  Bytes gz = gzip_bytes(idx_images(50, 3, 4));
  gz.resize(gz.size() / 2);
  const std::string dir = temp_dir("idx");
  write_bytes(dir + "/train-images-idx3-ubyte.gz", gz);
  write_bytes(dir + "/train-labels-idx1-ubyte", idx_labels(std::vector<uint8_t>(50, 1)));
  ASSERT_THROWS_WITH(open_dataset("idx:" + dir, {}), DataError, "truncated gzip stream");
  DatasetOptions skip;
  skip.skip_bad_samples = true;
  const auto ds = open_dataset("idx:" + dir, skip);
  EXPECT_LT(ds->size(), 50);
  EXPECT_EQ(ds->size() + ds->open_skips().count, 50);
}

TEST(IdxTest, LabelOutOfRangeStopsWithTheOffsetOrIsSkipped) {
  const std::string dir = write_pair(temp_dir("idx"), idx_images(4, 3, 4), idx_labels({1, 12, 3, 4}));
  ASSERT_THROWS_WITH(open_dataset("idx:" + dir, {}), DataError,
                     "train-labels-idx1-ubyte at byte 9: label 12 of sample 1 is out of range [0, 10)");
  DatasetOptions skip;
  skip.skip_bad_samples = true;
  const auto ds = open_dataset("idx:" + dir, skip);
  ASSERT_EQ(ds->size(), 3);
  EXPECT_EQ(ds->open_skips().count, 1);
  Image img;
  EXPECT_EQ(ds->get(1, 0, img), 3);  // sample 1 was left out: the next one moved up
  EXPECT_EQ(img.pixels[0], pixel(2, 0, 0));
}

TEST(IdxTest, ImagesAndLabelsOfDifferentCountsAreReported) {
  const std::string dir = write_pair(temp_dir("idx"), idx_images(4, 3, 4), idx_labels({1, 2, 3}));
  ASSERT_THROWS_WITH(open_dataset("idx:" + dir, {}), DataError, "3 labels for 4 images");
  DatasetOptions skip;
  skip.skip_bad_samples = true;
  EXPECT_EQ(open_dataset("idx:" + dir, skip)->size(), 3);
}

TEST(IdxTest, SwappedImagesAndLabelsAreNamed) {
  const std::string dir = temp_dir("idx");
  write_bytes(dir + "/train-images-idx3-ubyte", idx_labels({1, 2}));
  write_bytes(dir + "/train-labels-idx1-ubyte", idx_labels({1, 2}));
  ASSERT_THROWS_WITH(open_dataset("idx:" + dir, {}), DataError, "an IDX image file has 3 dimensions");
}

TEST(IdxTest, MissingFolderAndUnknownSpecAreUsageErrors) {
  ASSERT_THROWS_WITH(open_dataset("idx:/nonexistent/mnist", {}), UsageError, "idx:/nonexistent/mnist: no such folder");
  ASSERT_THROWS_WITH(open_dataset("imagenet", {}), UsageError,
                     "`data`: unknown value 'imagenet' (expected fashion-mnist, idx:DIR");
  ASSERT_THROWS_WITH(open_dataset("idx:", {}), UsageError, "give a folder of IDX files");
}

TEST(IdxTest, HeaderParserRejectsImplausibleDimensions) {
  Bytes b{0, 0, 8, 3};
  append_be32(b, 1);
  append_be32(b, 0);  // zero rows
  append_be32(b, 4);
  ASSERT_THROWS_WITH(data::parse_idx(b.data(), b.size(), "f"), DataError, "f at byte 8: implausible IDX dimension 0");
  Bytes t{0, 0, 0x0d, 1};  // float data
  append_be32(t, 1);
  ASSERT_THROWS_WITH(data::parse_idx(t.data(), t.size(), "f"), DataError, "type code 0x0d is not supported");
}

// The real data, read independently with Python's gzip module: the first ten labels of each
// split and the pixel sum of the first image.
TEST(FashionMnistTest, RealTrainAndTestSetsHaveTheirKnownSizesAndFirstSamples) {
  const std::string dir = saturate::testing::kFashionMnistDir;
  saturate::testing::require_fashion_mnist();
  struct Split {
    std::string name;
    int64_t size;
    std::vector<int64_t> labels;
    int64_t first_pixel_sum;
  };
  for (const Split& s : {Split{"train", 60000, {9, 0, 0, 3, 0, 2, 7, 2, 5, 5}, 76247},
                         Split{"test", 10000, {9, 2, 1, 1, 6, 1, 4, 6, 5, 7}, 33456}}) {
    DatasetOptions o;
    o.split = s.name;
    const auto ds = open_dataset("fashion-mnist", o);
    ASSERT_EQ(ds->size(), s.size) << s.name;
    EXPECT_EQ(to_string(ds->shape()), "1x28x28");
    Image img;
    for (size_t i = 0; i < s.labels.size(); ++i) EXPECT_EQ(ds->get(static_cast<int64_t>(i), 0, img), s.labels[i]);
    ds->get(0, 0, img);
    int64_t sum = 0;
    for (uint8_t p : img.pixels) sum += p;
    EXPECT_EQ(sum, s.first_pixel_sum) << s.name;
  }
}
