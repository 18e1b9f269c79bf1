// WebDataset tar shards: members grouped by key across shards (plain and gzipped; folder and
// glob), labels from .cls or .txt; broken members, damaged headers and samples without an
// image or label named by shard and offset, or skipped and counted.
#include "data/data_fixtures.h"
#include "data/formats.h"
#include "saturate/data/dataset.h"
#include "support/support.h"

using namespace saturate;
using namespace saturate::testing;

namespace {

std::vector<std::pair<std::string, Bytes>> shard_members(int first, int count) {
  std::vector<std::pair<std::string, Bytes>> m;
  for (int i = first; i < first + count; ++i) {
    const std::string key = "part/" + std::to_string(1000 + i);
    m.emplace_back(key + ".png", encode_png(pattern_image(4, 6, 3, i)));
    if (i % 2) m.emplace_back(key + ".cls", text(std::to_string(i % 5) + "\n"));
    else m.emplace_back(key + ".txt", text(std::to_string(i % 5)));
    m.emplace_back(key + ".json", text("{}"));
  }
  return m;
}

}  // namespace

TEST(WebDatasetTest, GroupsMembersByKeyAcrossShardsFromAFolderOrAGlob) {
  const std::string dir = temp_dir("wds");
  write_bytes(dir + "/shard-000.tar", make_tar(shard_members(0, 3)));
  write_bytes(dir + "/shard-001.tar.gz", make_tar(shard_members(3, 2), /*gzip=*/true));
  for (const std::string& spec : {"wds:" + dir, "wds:" + dir + "/shard-*"}) {
    const auto ds = open_dataset(spec, {});
    ASSERT_EQ(ds->size(), 5) << spec;
    EXPECT_EQ(ds->classes(), 5);
    EXPECT_EQ(to_string(ds->shape()), "3x4x6");
    Image img;
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(ds->get(i, 0, img), i % 5);
      EXPECT_EQ(img.pixels, pattern_image(4, 6, 3, i).pixels);
    }
    EXPECT_NE(ds->locate(4).find("shard-001.tar.gz member 'part/1004.png'"), std::string::npos) << ds->locate(4);
  }
}

TEST(WebDatasetTest, BrokenMemberStopsWithShardAndOffsetOrKeepsTheSamplesBefore) {
  const std::string dir = temp_dir("wds");
  Bytes tar = make_tar(shard_members(0, 4));
  tar.resize(tar.size() / 2 + 100);  // cut inside a member
  write_bytes(dir + "/s.tar", tar);
  write_bytes(dir + "/t.tar", make_tar(shard_members(10, 2)));
  ASSERT_THROWS_WITH(open_dataset("wds:" + dir, {}), DataError, dir + "/s.tar at byte ");
  try {
    open_dataset("wds:" + dir, {});
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("broken tar"), std::string::npos) << e.what();
  }
  DatasetOptions skip;
  skip.skip_bad_samples = true;
  const auto ds = open_dataset("wds:" + dir, skip);
  EXPECT_GE(ds->size(), 3);  // some of s.tar, all of t.tar
  EXPECT_LT(ds->size(), 6);
  EXPECT_GE(ds->open_skips().count, 1);
}

TEST(WebDatasetTest, DamagedHeaderIsNamedWithItsOffset) {
  Bytes tar = make_tar(shard_members(0, 2));
  tar[1024 + 148] ^= 0x55;  // the second member's header checksum
  ASSERT_THROWS_WITH(data::read_wds_shard(tar.data(), tar.size(), "x.tar", nullptr), DataError,
                     "x.tar at byte 1024: broken tar header");
  SkipReport skips;
  EXPECT_EQ(data::read_wds_shard(tar.data(), tar.size(), "x.tar", &skips).size(), 1u);  // 1001 survives
  EXPECT_GE(skips.count, 2);  // the damaged header(s), and sample 1000 that lost its label with it
  // a damaged first header: not recognisable as a tar at all, in either mode
  Bytes first = make_tar(shard_members(0, 1));
  first[148] ^= 0x55;
  ASSERT_THROWS_WITH(data::read_wds_shard(first.data(), first.size(), "y.tar", &skips), DataError,
                     "y.tar at byte 0: not a tar shard");
}

TEST(WebDatasetTest, SamplesWithoutImageOrLabelAreReported) {
  const std::string dir = temp_dir("wds");
  write_bytes(dir + "/a.tar", make_tar({{"k1.png", encode_png(pattern_image(4, 4, 3, 1))},
                                        {"k1.cls", text("2")},
                                        {"k2.png", encode_png(pattern_image(4, 4, 3, 2))},
                                        {"k2.cls", text("two")},
                                        {"k3.cls", text("1")}}));
  ASSERT_THROWS_WITH(open_dataset("wds:" + dir, {}), DataError, "sample 'k2' has no integer label");
  DatasetOptions skip;
  skip.skip_bad_samples = true;
  const auto ds = open_dataset("wds:" + dir, skip);
  EXPECT_EQ(ds->size(), 1);
  EXPECT_EQ(ds->open_skips().count, 2);
}

TEST(WebDatasetTest, UndecodableImageInAShardNamesTheMember) {
  const std::string dir = temp_dir("wds");
  write_bytes(dir + "/a.tar", make_tar({{"k1.png", encode_png(pattern_image(4, 4, 3, 1))},
                                        {"k1.cls", text("0")},
                                        {"k2.jpg", text("\xff\xd8\xff not really")},
                                        {"k2.cls", text("0")}}));
  const auto ds = open_dataset("wds:" + dir + "/*.tar", {});
  Image img;
  ASSERT_THROWS_WITH(ds->get(1, 3, img), DataError, "a.tar member 'k2.jpg' (header at byte 2048): undecodable JPEG");
}

TEST(WebDatasetTest, NoShardsIsAUsageErrorAndLabelTextIsStrict) {
  ASSERT_THROWS_WITH(open_dataset("wds:" + temp_dir("wds"), {}), UsageError, "no tar shards");
  const auto label = [](const std::string& s) { return data::parse_label_text(reinterpret_cast<const uint8_t*>(s.data()), s.size()); };
  EXPECT_EQ(label(" 7\n"), 7);
  EXPECT_EQ(label("-1"), -1);
  EXPECT_EQ(label("3 cats"), -1);
  EXPECT_EQ(label(""), -1);
}
