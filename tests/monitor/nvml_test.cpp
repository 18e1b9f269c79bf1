// The NVML loader's real dlopen path against a fake libnvidia-ml built by the tests, and the
// graceful "NVML unavailable" outcomes.
#include <stdlib.h>
#include <unistd.h>

#include <cmath>

#include "monitor_test_paths.h"
#include "saturate/monitor/nvml.h"
#include "saturate/monitor/sampler.h"
#include "support/support.h"

namespace saturate {
namespace {

/// Sets an environment variable for one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() { had_ ? setenv(name_, old_.c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(NvmlTest, LoaderReadsEveryValueFromALibraryWithNvmlsSymbols) {
  std::string why;
  auto nvml = Nvml::load(SATURATE_FAKE_NVML, &why);
  ASSERT_TRUE(nvml) << why;
  EXPECT_EQ(nvml->device_count(), 2);
  EXPECT_EQ(nvml->device_name(0), "Fake GPU 0");
  const NvmlReading r = nvml->read(0, {static_cast<int>(getpid())});
  EXPECT_EQ(r.gpu_util_percent, 42);
  EXPECT_EQ(r.mem_util_percent, 17);
  EXPECT_EQ(r.mem_total_bytes, static_cast<double>(80ULL << 30));
  EXPECT_EQ(r.mem_used_bytes, static_cast<double>(10ULL << 30));
  EXPECT_DOUBLE_EQ(r.power_w, 250.5);
  EXPECT_EQ(r.sm_clock_mhz, 1980);
  EXPECT_EQ(r.temperature_c, 55);
  // only this process's memory, found after the "insufficient size" retry
  EXPECT_EQ(r.process_gpu_mem_bytes, static_cast<double>(1ULL << 30));
}

TEST(NvmlTest, ProcessesNotListedOnAGpuUseNoGpuMemory) {
  auto nvml = Nvml::load(SATURATE_FAKE_NVML, nullptr);
  ASSERT_TRUE(nvml);
  EXPECT_EQ(nvml->read(1, {static_cast<int>(getpid())}).process_gpu_mem_bytes, 0.0);
  EXPECT_EQ(nvml->read(0, {static_cast<int>(getpid()), 1}).process_gpu_mem_bytes, static_cast<double>(3ULL << 30));
  EXPECT_TRUE(std::isnan(nvml->read(5, {}).gpu_util_percent));  // no such GPU: nothing read
}

TEST(NvmlTest, EnvironmentVariableOverridesTheLibraryPath) {
  ScopedEnv env("SATURATE_NVML_LIBRARY", SATURATE_FAKE_NVML);
  EXPECT_EQ(Nvml::library_path(), SATURATE_FAKE_NVML);
  EXPECT_EQ(Nvml::library_path("/x/libnvidia-ml.so.1"), "/x/libnvidia-ml.so.1");
  std::string why;
  EXPECT_TRUE(Nvml::load("", &why)) << why;
}

TEST(NvmlTest, DefaultLibraryIsTheDriversSoname) {
  unsetenv("SATURATE_NVML_LIBRARY");
  EXPECT_EQ(Nvml::library_path(), "libnvidia-ml.so.1");
}

TEST(NvmlTest, MissingLibraryIsReportedAsUnavailableNotAnError) {
  std::string why;
  EXPECT_FALSE(Nvml::load("/nonexistent/libnvidia-ml.so.1", &why));
  EXPECT_NE(why.find("NVML unavailable: cannot load /nonexistent/libnvidia-ml.so.1"), std::string::npos) << why;
}

TEST(NvmlTest, LibraryWithoutNvmlSymbolsIsUnavailable) {
  std::string why;
  EXPECT_FALSE(Nvml::load("libm.so.6", &why));
  EXPECT_NE(why.find("has no symbol nvmlInit_v2"), std::string::npos) << why;
}

TEST(NvmlTest, FailedInitIsUnavailableWithNvmlsMessage) {
  ScopedEnv env("FAKE_NVML_INIT_RESULT", "9");
  std::string why;
  EXPECT_FALSE(Nvml::load(SATURATE_FAKE_NVML, &why));
  EXPECT_NE(why.find("nvmlInit_v2 failed: Driver Not Loaded (code 9)"), std::string::npos) << why;
}

TEST(NvmlTest, SamplerUsesNvmlWhenItLoads) {
  SamplerOptions o;
  o.sample_hz = 0;
  o.nvml_path = SATURATE_FAKE_NVML;
  Sampler sampler(o);
  EXPECT_EQ(sampler.source(), "nvml");
  EXPECT_EQ(sampler.gpu_name(), "Fake GPU 0");
  sampler.sample_now();
  sampler.sample_now();
  const nlohmann::json j = summarize_samples(sampler.samples(), sampler.source(), 0);
  EXPECT_EQ(j["source"], "nvml");
  EXPECT_EQ(j["samples"], 2);
  EXPECT_EQ(j["gpu_util_percent"]["mean"], 42.0);
  EXPECT_EQ(j["process_gpu_mem_bytes"]["max"], static_cast<double>(1ULL << 30));
  EXPECT_TRUE(j.contains("rss_bytes"));  // /proc values come along
}

TEST(NvmlTest, SamplerFallsBackToProcWhenNvmlIsUnavailable) {
  SamplerOptions o;
  o.sample_hz = 0;
  o.nvml_path = "/nonexistent/libnvidia-ml.so.1";
  Sampler sampler(o);
  EXPECT_EQ(sampler.source(), "proc");
  EXPECT_NE(sampler.nvml_note().find("NVML unavailable"), std::string::npos);
  sampler.sample_now();
  const nlohmann::json j = summarize_samples(sampler.samples(), sampler.source(), 0);
  EXPECT_EQ(j["source"], "proc");
  EXPECT_FALSE(j.contains("gpu_util_percent"));
  EXPECT_GT(j["rss_bytes"]["min"].get<double>(), 0);
}

TEST(NvmlTest, SamplerRefusesAGpuNvmlDoesNotList) {
  SamplerOptions o;
  o.sample_hz = 0;
  o.nvml_path = SATURATE_FAKE_NVML;
  o.gpu_index = 3;
  Sampler sampler(o);
  EXPECT_EQ(sampler.source(), "proc");
  EXPECT_NE(sampler.nvml_note().find("no GPU 3"), std::string::npos) << sampler.nvml_note();
}

}  // namespace
}  // namespace saturate
