// save_model (--save): the archive torch::load reads, written through core/output_file.h.
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <torch/torch.h>

#include "saturate/core/errors.h"
#include "saturate/models/zoo.h"
#include "saturate/train/trainer.h"
#include "support/support.h"

using namespace saturate;

namespace {

BuiltModel small_mlp(uint64_t seed) {
  ModelSpec spec;
  spec.name = "mlp";
  spec.width = 16;
  spec.layers = 1;
  spec.seed = seed;
  return build_model(resolve_model_spec(spec));
}

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

}  // namespace

TEST(SaveModelTest, WritesTheArchiveTorchLoadReadsBackAndNoTemporary) {
  const std::string dir = saturate::testing::temp_dir("save_model");
  BuiltModel saved = small_mlp(1);
  save_model(*saved.model, dir + "/model.pt");
  BuiltModel loaded = small_mlp(2);
  torch::serialize::InputArchive archive;
  archive.load_from(dir + "/model.pt");
  loaded.model->module()->load(archive);
  const auto a = saved.model->named_tensors(), b = loaded.model->named_tensors();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i].second, b[i].second)) << a[i].first;
  EXPECT_EQ(names_in(dir), std::set<std::string>{"model.pt"});
}

TEST(SaveModelTest, TheFileSizeLimitIsAnErrorNamingItAndThePreviousFileStays) {
  // LibTorch's file writer aborted the process here ("terminate called ... unexpected pos")
  const std::string dir = saturate::testing::temp_dir("save_model_fsize");
  const std::string path = dir + "/model.pt";
  std::ofstream(path) << "previous";
  BuiltModel m = small_mlp(1);
  std::string message;
  {
    const saturate::testing::FileSizeLimit limit(4096);
  try {
    save_model(*m.model, path);
  } catch (const RuntimeFailure& e) {
    message = e.what();
  }
  }  // the limit and SIGXFSZ are back
  EXPECT_NE(message.find("`save` " + path + ": writing failed: the file size limit (ulimit -f) was reached"),
            std::string::npos)
      << message;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "previous");
  EXPECT_EQ(names_in(dir), std::set<std::string>{"model.pt"});
}

TEST(SaveModelTest, AFolderIsRefusedNamingAFilePath) {
  const std::string dir = saturate::testing::temp_dir("save_model_folder");
  BuiltModel m = small_mlp(1);
  ASSERT_THROWS_WITH(save_model(*m.model, dir), RuntimeFailure,
                     "`save` " + dir + ": is a folder, not a file; give a file path such as " + dir + "/model.pt");
  EXPECT_TRUE(names_in(dir).empty());
}
