// Image folders: PNG decoded exactly and JPEG closely, grey/RGB conversion, labels from sorted
// class folders; undecodable and truncated images and empty folders named, or skipped.
#include "data/data_fixtures.h"
#include "data/formats.h"
#include "saturate/data/dataset.h"
#include "saturate/data/loader.h"
#include "support/support.h"

using namespace saturate;
using namespace saturate::testing;

namespace {

double mean_abs_diff(const Image& a, const Image& b) {
  EXPECT_EQ(a.pixels.size(), b.pixels.size());
  double d = 0;
  for (size_t i = 0; i < a.pixels.size() && i < b.pixels.size(); ++i) d += std::abs(a.pixels[i] - b.pixels[i]);
  return d / static_cast<double>(a.pixels.size());
}

/// cats/ (2 PNG), dogs/ (1 JPEG, 1 PNG), a stray text file.
std::string make_folder(const std::string& dir) {
  std::filesystem::create_directories(dir + "/cats");
  std::filesystem::create_directories(dir + "/dogs");
  write_bytes(dir + "/cats/a.png", encode_png(pattern_image(6, 5, 3, 1)));
  write_bytes(dir + "/cats/b.PNG", encode_png(pattern_image(6, 5, 3, 2)));
  write_bytes(dir + "/dogs/c.jpg", encode_jpeg(smooth_image(16, 24, 3, 3)));
  write_bytes(dir + "/dogs/d.png", encode_png(pattern_image(6, 5, 1, 4)));
  write_bytes(dir + "/dogs/notes.txt", text("not an image"));
  return dir;
}

}  // namespace

TEST(ImageFolderTest, LabelsComeFromSortedClassFoldersAndPngDecodesExactly) {
  const auto ds = open_dataset("images:" + make_folder(temp_dir("images")), {});
  ASSERT_EQ(ds->size(), 4);
  EXPECT_EQ(ds->classes(), 2);
  EXPECT_EQ(to_string(ds->shape()), "3x6x5");
  Image img;
  EXPECT_EQ(ds->get(0, 0, img), 0);
  EXPECT_EQ(img.pixels, pattern_image(6, 5, 3, 1).pixels);
  EXPECT_EQ(ds->get(1, 0, img), 0);
  EXPECT_EQ(img.pixels, pattern_image(6, 5, 3, 2).pixels);
  EXPECT_EQ(ds->get(3, 0, img), 1);
  EXPECT_EQ(img.pixels, pattern_image(6, 5, 1, 4).pixels);
}

TEST(ImageFolderTest, JpegDecodesCloseToTheOriginalAndConvertsToGrey) {
  const auto ds = open_dataset("images:" + make_folder(temp_dir("images")), {});
  Image img;
  EXPECT_EQ(ds->get(2, 3, img), 1);
  ASSERT_EQ(img.height, 16);
  ASSERT_EQ(img.width, 24);
  EXPECT_LT(mean_abs_diff(img, smooth_image(16, 24, 3, 3)), 3.0);
  ds->get(2, 1, img);  // grey on request
  EXPECT_EQ(img.channels, 1);
  ds->get(3, 3, img);  // and a grey PNG as RGB
  EXPECT_EQ(img.channels, 3);
  EXPECT_EQ(img.pixels[3], img.pixels[4]);
}

TEST(ImageFolderTest, UndecodableAndTruncatedJpegsStopTheLoaderWithTheFileOrAreSkipped) {
  const std::string dir = make_folder(temp_dir("images"));
  write_bytes(dir + "/dogs/e.jpg", text("\xff\xd8\xff garbage that is no JPEG"));
  Bytes cut = encode_jpeg(smooth_image(32, 32, 3, 5));
  cut.resize(cut.size() / 2);
  write_bytes(dir + "/dogs/f.jpg", cut);
  const auto ds = std::shared_ptr<Dataset>(open_dataset("images:" + dir, {}));
  ASSERT_EQ(ds->size(), 6);
  for (int workers : {0, 2}) {
    LoaderOptions o;
    o.batch_size = 6;
    o.workers = workers;
    o.shape = {3, 6, 5};
    o.shard.shuffle = false;
    Loader strict(ds, o);
    ASSERT_THROWS_WITH(strict.next(), DataError, dir + "/dogs/e.jpg: sample 4 of images:" + dir + ": undecodable JPEG");
    o.skip_bad_samples = true;
    Loader skipping(ds, o);
    const LoadedBatch b = skipping.next();
    EXPECT_EQ(b.inputs.size(0), 4);
    EXPECT_EQ(b.skipped, 2);
    const LoaderStats s = skipping.stats();
    EXPECT_EQ(s.skipped.count, 2);
    ASSERT_EQ(s.skipped.reasons.size(), 2u);
    EXPECT_NE(s.skipped.reasons[1].find("f.jpg: undecodable JPEG"), std::string::npos) << s.skipped.reasons[1];
  }
}

TEST(ImageFolderTest, FilesThatAreNotImagesAreNamed) {
  Bytes data = text("GIF89a....");
  ASSERT_THROWS_WITH(data::image_shape(data.data(), data.size(), "x.png"), DataError,
                     "x.png at byte 0: neither a JPEG nor a PNG");
  Bytes png = encode_png(pattern_image(8, 8, 3, 1));
  png.resize(png.size() - 20);
  Image img;
  ASSERT_THROWS_WITH(data::decode_image(png.data(), png.size(), 3, "y.png", img), DataError, "y.png: undecodable PNG");
}

TEST(ImageFolderTest, EmptyFoldersAreReported) {
  const std::string root = temp_dir("images");
  ASSERT_THROWS_WITH(open_dataset("images:" + root, {}), DataError, root + ": no class sub-folders");
  std::filesystem::create_directories(root + "/a");
  ASSERT_THROWS_WITH(open_dataset("images:" + root, {}), DataError, "no .jpg/.jpeg/.png images in its 1 class folder");
  write_bytes(root + "/b.jpg", encode_jpeg(smooth_image(8, 8, 3, 1)));  // not in a class folder
  std::filesystem::create_directories(root + "/b");
  write_bytes(root + "/b/x.jpg", encode_jpeg(smooth_image(8, 8, 3, 1)));
  ASSERT_THROWS_WITH(open_dataset("images:" + root, {}), DataError, root + "/a: empty class folder");
  DatasetOptions skip;
  skip.skip_bad_samples = true;
  const auto ds = open_dataset("images:" + root, skip);
  EXPECT_EQ(ds->size(), 1);
  EXPECT_EQ(ds->classes(), 2);  // the empty class keeps its label
  EXPECT_EQ(ds->open_skips().reasons.size(), 1u);
}
