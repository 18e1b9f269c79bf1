#include "saturate/core/units.h"

#include "saturate/core/errors.h"
#include "support/support.h"

using namespace saturate;

TEST(UnitsTest, ParsesBinaryAndDecimalUnits) {
  EXPECT_EQ(parse_memory_size("512MiB").bytes, 512LL * 1024 * 1024);
  EXPECT_EQ(parse_memory_size("2GiB").bytes, 2LL * 1024 * 1024 * 1024);
  EXPECT_EQ(parse_memory_size("1.5GB").bytes, 1500000000LL);
  EXPECT_EQ(parse_memory_size("1000000").bytes, 1000000LL);
  EXPECT_EQ(parse_memory_size("100kB").bytes, 100000LL);
  EXPECT_EQ(parse_memory_size("3KiB").bytes, 3072LL);
  EXPECT_EQ(parse_memory_size("2gib").bytes, 2LL << 30);
  EXPECT_EQ(parse_memory_size("7B").bytes, 7);
}

TEST(UnitsTest, ValueBelowOneIsAFractionOfTheDevice) {
  const MemorySize s = parse_memory_size("0.9");
  ASSERT_TRUE(s.is_fraction());
  EXPECT_DOUBLE_EQ(s.fraction, 0.9);
  EXPECT_EQ(s.resolve(1000), 900);
  EXPECT_EQ(parse_memory_size("2GiB").resolve(1000), 2LL << 30);
}

TEST(UnitsTest, RejectsMalformedSizesNamingValueAndFix) {
  for (const char* bad : {"", "GiB", "12XB", "-1GiB", "1.2.3MB", "0", "1.5", "abc", "0.0"}) {
    ASSERT_THROWS_WITH(parse_memory_size(bad, "--memory-budget"), UsageError, "--memory-budget: invalid size");
  }
  ASSERT_THROWS_WITH(parse_memory_size("12XB", "--memory-budget"), UsageError, "e.g. 512MiB");
}

TEST(UnitsTest, FormatsBytesReadably) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(3LL << 20), "3.0 MiB");
  EXPECT_EQ(format_bytes(3LL << 29), "1.50 GiB");
}

TEST(UnitsTest, ParsesShapes) {
  EXPECT_EQ(parse_shape("3x224x224"), (std::vector<int64_t>{3, 224, 224}));
  EXPECT_EQ(parse_shape("784"), (std::vector<int64_t>{784}));
  EXPECT_EQ(parse_shape("1X28X28"), (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(format_shape({3, 32, 32}), "3x32x32");
}

TEST(UnitsTest, RejectsMalformedShapes) {
  for (const char* bad : {"", "x", "3x", "x3", "3x0x224", "3x-1", "3xax3", "1x2x3x4x5", "99999999999"}) {
    ASSERT_THROWS_WITH(parse_shape(bad, "--input"), UsageError, "--input: invalid shape");
  }
}
