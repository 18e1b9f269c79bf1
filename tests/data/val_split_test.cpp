// The val split of images: and wds: data (--val-fraction): held out by a hash of each sample's
// key, so train and val are disjoint and cover the data, the val share is the fraction, and the
// choice depends neither on the order files or shards are listed in nor on the seed. Datasets
// with a test split refuse --val-fraction; folders and shards have no "test" split.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <random>
#include <set>

#include "data/data_fixtures.h"
#include "data/formats.h"
#include "saturate/data/dataset.h"
#include "support/support.h"

using namespace saturate;
using namespace saturate::testing;

namespace {

DatasetOptions split_options(const std::string& split, double fraction, uint64_t seed = 0) {
  DatasetOptions o;
  o.split = split;
  o.val_fraction = fraction;
  o.seed = seed;
  return o;
}

/// Every sample of `ds` by where it lives: the file of a folder, the member of a shard.
std::set<std::string> sample_names(const Dataset& ds) {
  std::set<std::string> names;
  for (int64_t i = 0; i < ds.size(); ++i) {
    std::string where = ds.locate(i);
    const size_t member = where.find("member '");
    if (member != std::string::npos) where = where.substr(member, where.find('\'', member + 8) - member);
    names.insert(where);
  }
  return names;
}

/// classes c0..c3, n_per_class PNGs each: "<dir>/cK/img-NNN.png".
std::string make_folder(const std::string& dir, int n_per_class) {
  for (int c = 0; c < 4; ++c) {
    std::filesystem::create_directories(dir + "/c" + std::to_string(c));
    for (int i = 0; i < n_per_class; ++i)
      write_bytes(dir + "/c" + std::to_string(c) + "/img-" + std::to_string(100 + i) + ".png",
                  encode_png(pattern_image(4, 4, 1, c * 1000 + i)));
  }
  return dir;
}

/// A shard of samples "s/<key>" for the given keys (label key % 3).
Bytes shard_of(const std::vector<int>& keys) {
  std::vector<std::pair<std::string, Bytes>> m;
  for (int k : keys) {
    const std::string key = "s/" + std::to_string(10000 + k);
    m.emplace_back(key + ".png", encode_png(pattern_image(4, 5, 3, k)));
    m.emplace_back(key + ".cls", text(std::to_string(k % 3)));
  }
  return make_tar(m);
}

std::set<std::string> intersection(const std::set<std::string>& a, const std::set<std::string>& b) {
  std::set<std::string> both;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::inserter(both, both.begin()));
  return both;
}

}  // namespace

TEST(ValSplitTest, ImageFolderTrainAndValAreDisjointAndTogetherCoverEveryImage) {
  const std::string dir = make_folder(temp_dir("val_split_images"), 25);
  const auto all = open_dataset("images:" + dir, {});
  const auto train = open_dataset("images:" + dir, split_options("train", 0.2));
  const auto val = open_dataset("images:" + dir, split_options("val", 0.2));
  ASSERT_EQ(all->size(), 100);
  EXPECT_EQ(train->size() + val->size(), 100);
  EXPECT_EQ(val->size(), 20);  // round(0.2 x 100)
  const std::set<std::string> t = sample_names(*train), v = sample_names(*val);
  EXPECT_TRUE(intersection(t, v).empty()) << *intersection(t, v).begin();
  std::set<std::string> both = t;
  both.insert(v.begin(), v.end());
  EXPECT_EQ(both, sample_names(*all));
  // both splits keep every class's label (the folder names), and say which split they are
  EXPECT_EQ(train->classes(), 4);
  EXPECT_EQ(val->classes(), 4);
  EXPECT_NE(train->name().find("(train, val-fraction 0.2)"), std::string::npos) << train->name();
  EXPECT_NE(val->name().find("(val, val-fraction 0.2)"), std::string::npos) << val->name();
  // a val image decodes with its folder's label
  Image img;
  for (int64_t i = 0; i < val->size(); ++i) {
    const std::string path = val->locate(i);
    const int64_t cls = path[path.find("/c", dir.size()) + 2] - '0';
    EXPECT_EQ(val->get(i, 0, img), cls) << path;
  }
}

TEST(ValSplitTest, ValShareIsTheFractionOfTheSamplesToWithinOneSample) {
  std::vector<std::string> keys;
  for (int i = 0; i < 997; ++i) keys.push_back("class-" + std::to_string(i % 7) + "/img_" + std::to_string(i) + ".jpg");
  for (double f : {0.01, 0.1, 0.25, 0.5, 0.9}) {
    const std::vector<bool> held = held_out_keys(keys, f, "test keys");
    const auto n_val = std::count(held.begin(), held.end(), true);
    EXPECT_LE(std::abs(static_cast<double>(n_val) - f * 997), 1.0) << "fraction " << f << ": " << n_val << " held out";
  }
  const std::vector<bool> none = held_out_keys(keys, 0, "test keys");
  EXPECT_EQ(std::count(none.begin(), none.end(), true), 0);
  // the held-out keys are spread over the classes, not the first ones in sorted order
  const std::vector<bool> held = held_out_keys(keys, 0.25, "test keys");
  std::set<std::string> classes;
  for (size_t i = 0; i < keys.size(); ++i)
    if (held[i]) classes.insert(keys[i].substr(0, 7));
  EXPECT_EQ(classes.size(), 7u);
}

TEST(ValSplitTest, HeldOutKeysDoNotDependOnTheOrderTheyAreListedIn) {
  std::vector<std::string> keys;
  for (int i = 0; i < 300; ++i) keys.push_back("k/" + std::to_string(i * 7919 % 1000));
  keys.push_back(keys[5]);  // a duplicate key: both copies on the same side, whatever the order
  const auto held_set = [](const std::vector<std::string>& ks) {
    const std::vector<bool> held = held_out_keys(ks, 0.3, "test keys");
    std::multiset<std::string> s;
    for (size_t i = 0; i < ks.size(); ++i)
      if (held[i]) s.insert(ks[i]);
    return s;
  };
  const auto reference = held_set(keys);
  EXPECT_GE(reference.size(), 90u);
  std::mt19937 rng(7);
  for (int round = 0; round < 5; ++round) {
    std::vector<std::string> shuffled = keys;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    EXPECT_EQ(held_set(shuffled), reference) << "round " << round;
  }
  std::vector<std::string> reversed(keys.rbegin(), keys.rend());
  EXPECT_EQ(held_set(reversed), reference);
  EXPECT_EQ(reference.count(keys[5]) % 2, 0u);  // 0 or both copies
}

TEST(ValSplitTest, ImageFolderValSplitIsTheSameWhateverTheSeedAndInAFreshCopyOfTheFolder) {
  const std::string dir = make_folder(temp_dir("val_split_seed"), 10);
  const auto reference = sample_names(*open_dataset("images:" + dir, split_options("val", 0.3, 0)));
  ASSERT_EQ(reference.size(), 12u);
  for (uint64_t seed : {1ull, 42ull, 123456789ull})
    EXPECT_EQ(sample_names(*open_dataset("images:" + dir, split_options("val", 0.3, seed))), reference) << seed;
  // another folder holding the same files (written in reverse order): the same relative paths held out
  const std::string copy = temp_dir("val_split_copy");
  for (int c = 3; c >= 0; --c) {
    std::filesystem::create_directories(copy + "/c" + std::to_string(c));
    for (int i = 9; i >= 0; --i)
      write_bytes(copy + "/c" + std::to_string(c) + "/img-" + std::to_string(100 + i) + ".png",
                  encode_png(pattern_image(4, 4, 1, c * 1000 + i)));
  }
  std::set<std::string> relative;
  for (const auto& p : sample_names(*open_dataset("images:" + copy, split_options("val", 0.3, 5))))
    relative.insert(p.substr(copy.size()));
  std::set<std::string> expected;
  for (const auto& p : reference) expected.insert(p.substr(dir.size()));
  EXPECT_EQ(relative, expected);
}

TEST(ValSplitTest, WdsTrainAndValAreDisjointCoverEverySampleAndIgnoreShardOrderAndSeed) {
  std::vector<int> first, second;
  for (int k = 0; k < 40; ++k) (k < 20 ? first : second).push_back(k);
  // the same 40 samples, shards listed in the opposite order (a.tar/b.tar swap their contents)
  const std::string one = temp_dir("val_split_wds1"), two = temp_dir("val_split_wds2");
  write_bytes(one + "/b.tar", shard_of(first));
  write_bytes(one + "/c.tar", shard_of(second));
  write_bytes(two + "/a.tar", shard_of(second));
  write_bytes(two + "/b.tar", shard_of(first));
  const auto all = open_dataset("wds:" + one, {});
  const auto train = open_dataset("wds:" + one, split_options("train", 0.25));
  const auto val = open_dataset("wds:" + one, split_options("val", 0.25));
  ASSERT_EQ(all->size(), 40);
  EXPECT_EQ(val->size(), 10);
  EXPECT_EQ(train->size(), 30);
  const std::set<std::string> t = sample_names(*train), v = sample_names(*val);
  EXPECT_TRUE(intersection(t, v).empty());
  std::set<std::string> both = t;
  both.insert(v.begin(), v.end());
  EXPECT_EQ(both, sample_names(*all));
  EXPECT_EQ(train->classes(), 3);
  EXPECT_EQ(val->classes(), 3);  // the classes of the whole set, not of the val samples
  for (uint64_t seed : {0ull, 9ull}) {
    EXPECT_EQ(sample_names(*open_dataset("wds:" + two, split_options("val", 0.25, seed))), v) << seed;
    EXPECT_EQ(sample_names(*open_dataset("wds:" + two + "/*.tar", split_options("train", 0.25, seed))), t) << seed;
  }
  // a val sample decodes with its own label
  Image img;
  for (int64_t i = 0; i < val->size(); ++i) {
    const std::string where = val->locate(i);
    const int key = std::stoi(where.substr(where.find("'s/") + 3, 5)) - 10000;
    EXPECT_EQ(val->get(i, 0, img), key % 3) << where;
    EXPECT_EQ(img.pixels, pattern_image(4, 5, 3, key).pixels) << where;
  }
}

TEST(ValSplitTest, FractionOutsideZeroToOneOrAnEmptySideIsAUsageErrorNamingTheFlag) {
  const std::string dir = make_folder(temp_dir("val_split_bad"), 2);  // 8 images
  const std::string spec = "images:" + dir;
  for (double f : {-0.1, 1.0, 1.5, std::nan("")})
    ASSERT_THROWS_WITH(open_dataset(spec, split_options("train", f)), UsageError, "must be at least 0 and below 1");
  ASSERT_THROWS_WITH(open_dataset(spec, split_options("train", 0.05)), UsageError,
                     "`val_fraction` 0.05 holds out no sample of the 8 in " + spec + " (0.05 x 8 rounds to 0); give at "
                     "least 0.0625");
  ASSERT_THROWS_WITH(open_dataset(spec, split_options("val", 0.95)), UsageError,
                     "`val_fraction` 0.95 leaves no training sample of the 8 in " + spec);
  ASSERT_THROWS_WITH(open_dataset(spec, split_options("val", 0)), UsageError, "the val split needs `val_fraction` F > 0");
}

TEST(ValSplitTest, DatasetsWithATestSplitRefuseValFractionAndFoldersAndShardsHaveNoTestSplit) {
  const std::string idx = temp_dir("val_split_idx");
  write_bytes(idx + "/train-images-idx3-ubyte", idx_images(4, 2, 2));
  write_bytes(idx + "/train-labels-idx1-ubyte", idx_labels({0, 1, 2, 3}));
  ASSERT_THROWS_WITH(open_dataset("idx:" + idx, split_options("train", 0.25)), UsageError,
                     "`val_fraction` 0.25: `data` idx:" + idx + " has its own test split");
  ASSERT_THROWS_WITH(open_dataset("cifar10:/nonexistent", split_options("train", 0.1)), UsageError,
                     "drop `val_fraction`");
  ASSERT_THROWS_WITH(open_dataset("synthetic", split_options("train", 0.1)), UsageError,
                     "`data` synthetic has no fixed samples to hold out");
  // synthetic sample i is the same in every split: no "test" split that is the training data
  ASSERT_THROWS_WITH(open_dataset("synthetic", split_options("test", 0)), UsageError, "no test split");
  const std::string dir = make_folder(temp_dir("val_split_notest"), 2);
  ASSERT_THROWS_WITH(open_dataset("images:" + dir, split_options("test", 0)), UsageError,
                     "has no test split; hold out a validation split with `val_fraction` F");
  ASSERT_THROWS_WITH(open_image_folder(dir, split_options("test", 0)), UsageError, "no test split");
  const std::string wds = temp_dir("val_split_wds_notest");
  write_bytes(wds + "/a.tar", shard_of({1, 2, 3}));
  ASSERT_THROWS_WITH(open_dataset("wds:" + wds, split_options("test", 0)), UsageError, "no test split");
  EXPECT_TRUE(can_hold_out("images:" + dir));
  EXPECT_TRUE(can_hold_out("wds:" + wds));
  EXPECT_FALSE(can_hold_out("fashion-mnist"));
  EXPECT_FALSE(can_hold_out("cifar10:" + dir));
}
