// Rendezvous from the environment: torchrun, mpirun, MPICH and SLURM, and the errors.
#include <map>

#include "saturate/core/errors.h"
#include "saturate/dist/env.h"
#include "support/support.h"

namespace saturate {
namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(DistEnvTest, NoLauncherVariablesMeansOneProcess) {
  const DistEnv e = read_dist_env(env_of({{"HOME", "/root"}}));
  EXPECT_EQ(e.launcher, Launcher::kNone);
  EXPECT_EQ(e.world_size, 1);
  EXPECT_EQ(e.rank, 0);
  EXPECT_FALSE(e.distributed());
  EXPECT_EQ(e.master_addr, "127.0.0.1");
}

TEST(DistEnvTest, TorchrunVariablesAreReadAsTorchrunSetsThem) {
  const DistEnv e = read_dist_env(env_of({{"RANK", "5"},
                                          {"WORLD_SIZE", "8"},
                                          {"LOCAL_RANK", "1"},
                                          {"LOCAL_WORLD_SIZE", "4"},
                                          {"GROUP_RANK", "1"},
                                          {"MASTER_ADDR", "10.0.0.7"},
                                          {"MASTER_PORT", "29511"}}));
  EXPECT_EQ(e.launcher, Launcher::kTorchrun);
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 4);
  EXPECT_EQ(e.node_rank, 1);
  EXPECT_EQ(e.master_addr, "10.0.0.7");
  EXPECT_EQ(e.master_port, 29511);
  EXPECT_TRUE(e.distributed());
  EXPECT_NE(e.describe().find("rank 5/8 (local 1/4, node 1) via torchrun, rendezvous 10.0.0.7:29511"),
            std::string::npos);
}

TEST(DistEnvTest, TorchrunsAgentStoreIsUsedWhenItSaysSo) {
  auto vars = std::map<std::string, std::string>{
      {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1234"}};
  EXPECT_FALSE(read_dist_env(env_of(vars)).agent_store);
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  EXPECT_TRUE(read_dist_env(env_of(vars)).agent_store);
}

TEST(DistEnvTest, TorchrunWithoutLocalVariablesTreatsTheJobAsOneNode) {
  const DistEnv e = read_dist_env(
      env_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1234"}}));
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_EQ(e.node_rank, 0);
}

TEST(DistEnvTest, RankNotBelowWorldSizeIsAUsageErrorWithTheFix) {
  ASSERT_THROWS_WITH(read_dist_env(env_of({{"RANK", "4"},
                                           {"WORLD_SIZE", "4"},
                                           {"MASTER_ADDR", "127.0.0.1"},
                                           {"MASTER_PORT", "1234"}})),
                     UsageError, "RANK=4: not below WORLD_SIZE=4 (expected 0..3)");
}

TEST(DistEnvTest, MissingRankOrWorldSizeIsAUsageError) {
  ASSERT_THROWS_WITH(read_dist_env(env_of({{"WORLD_SIZE", "2"}})), UsageError, "RANK is not set but");
  ASSERT_THROWS_WITH(read_dist_env(env_of({{"RANK", "0"}})), UsageError, "WORLD_SIZE is not set but");
  ASSERT_THROWS_WITH(read_dist_env(env_of({{"LOCAL_RANK", "0"}})), UsageError, "saturate launch");
}

TEST(DistEnvTest, MalformedNumbersNameTheVariableAndValue) {
  ASSERT_THROWS_WITH(read_dist_env(env_of({{"RANK", "one"}, {"WORLD_SIZE", "2"}})), UsageError,
                     "RANK='one': not an integer (expected 0..1)");
  ASSERT_THROWS_WITH(read_dist_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "0"}})), UsageError,
                     "WORLD_SIZE=0: out of range (expected a positive count");
  ASSERT_THROWS_WITH(read_dist_env(env_of({{"RANK", "-1"}, {"WORLD_SIZE", "2"}})), UsageError, "RANK=-1: out of range");
  ASSERT_THROWS_WITH(read_dist_env(env_of({{"RANK", "0"},
                                           {"WORLD_SIZE", "2"},
                                           {"MASTER_ADDR", "h"},
                                           {"MASTER_PORT", "70000"}})),
                     UsageError, "MASTER_PORT=70000: out of range (expected a TCP port in 1..65535)");
}

TEST(DistEnvTest, InconsistentLocalValuesAreUsageErrors) {
  ASSERT_THROWS_WITH(read_dist_env(env_of({{"RANK", "0"},
                                           {"WORLD_SIZE", "2"},
                                           {"LOCAL_RANK", "2"},
                                           {"LOCAL_WORLD_SIZE", "2"},
                                           {"MASTER_ADDR", "h"},
                                           {"MASTER_PORT", "1"}})),
                     UsageError, "LOCAL_RANK=2: not below LOCAL_WORLD_SIZE=2");
  ASSERT_THROWS_WITH(read_dist_env(env_of({{"RANK", "0"},
                                           {"WORLD_SIZE", "2"},
                                           {"LOCAL_RANK", "0"},
                                           {"LOCAL_WORLD_SIZE", "3"},
                                           {"MASTER_ADDR", "h"},
                                           {"MASTER_PORT", "1"}})),
                     UsageError, "LOCAL_WORLD_SIZE=3: larger than WORLD_SIZE=2");
}

TEST(DistEnvTest, TorchrunWithoutMasterAddressOrPortIsAUsageError) {
  ASSERT_THROWS_WITH(read_dist_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}})), UsageError,
                     "MASTER_ADDR is not set but WORLD_SIZE=2");
  ASSERT_THROWS_WITH(read_dist_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}})), UsageError,
                     "MASTER_PORT is not set but WORLD_SIZE=2");
  // one process needs no rendezvous
  EXPECT_EQ(read_dist_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}})).world_size, 1);
}

TEST(DistEnvTest, OpenMpiVariablesOnOneNodeUseLoopback) {
  const DistEnv e = read_dist_env(env_of({{"OMPI_COMM_WORLD_RANK", "2"},
                                          {"OMPI_COMM_WORLD_SIZE", "4"},
                                          {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}));
  EXPECT_EQ(e.launcher, Launcher::kMpi);
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_rank, 2);
  EXPECT_EQ(e.local_world_size, 4);
  EXPECT_EQ(e.master_addr, "127.0.0.1");
  EXPECT_EQ(e.master_port, 29500);
}

TEST(DistEnvTest, OpenMpiAcrossNodesNeedsMasterAddress) {
  ASSERT_THROWS_WITH(read_dist_env(env_of({{"OMPI_COMM_WORLD_RANK", "0"},
                                           {"OMPI_COMM_WORLD_SIZE", "4"},
                                           {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                           {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}})),
                     UsageError, "export MASTER_ADDR=<rank 0's host>");
  const DistEnv e = read_dist_env(env_of({{"OMPI_COMM_WORLD_RANK", "3"},
                                          {"OMPI_COMM_WORLD_SIZE", "4"},
                                          {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                          {"MASTER_ADDR", "node0"},
                                          {"MASTER_PORT", "4000"}}));
  EXPECT_EQ(e.node_rank, 1);
  EXPECT_EQ(e.master_addr, "node0");
  EXPECT_EQ(e.master_port, 4000);
}

TEST(DistEnvTest, OpenMpiRankNotBelowSizeIsAUsageError) {
  ASSERT_THROWS_WITH(read_dist_env(env_of({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "2"}})),
                     UsageError, "OMPI_COMM_WORLD_RANK=2: not below OMPI_COMM_WORLD_SIZE=2");
}

TEST(DistEnvTest, MpichPmiVariablesAreRead) {
  const DistEnv e = read_dist_env(env_of({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}}));
  EXPECT_EQ(e.launcher, Launcher::kMpi);
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.world_size, 2);
}

TEST(DistEnvTest, SlurmVariablesGiveRanksAndTheFirstNodeAsMaster) {
  const DistEnv e = read_dist_env(env_of({{"SLURM_PROCID", "5"},
                                          {"SLURM_NTASKS", "8"},
                                          {"SLURM_LOCALID", "1"},
                                          {"SLURM_NODEID", "1"},
                                          {"SLURM_TASKS_PER_NODE", "4(x2)"},
                                          {"SLURM_JOB_NODELIST", "gpu[07-08]"}}));
  EXPECT_EQ(e.launcher, Launcher::kSlurm);
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 4);
  EXPECT_EQ(e.node_rank, 1);
  EXPECT_EQ(e.master_addr, "gpu07");
  EXPECT_EQ(e.master_port, 29500);
}

TEST(DistEnvTest, SlurmMissingTaskCountAndBadLocalIdAreUsageErrors) {
  ASSERT_THROWS_WITH(read_dist_env(env_of({{"SLURM_PROCID", "0"}})), UsageError, "SLURM_NTASKS is not set");
  ASSERT_THROWS_WITH(read_dist_env(env_of({{"SLURM_PROCID", "1"},
                                           {"SLURM_NTASKS", "2"},
                                           {"SLURM_NTASKS_PER_NODE", "2"},
                                           {"SLURM_LOCALID", "7"}})),
                     UsageError, "SLURM_LOCALID=7: not below SLURM_TASKS_PER_NODE=2 (expected 0..1)");
  ASSERT_THROWS_WITH(read_dist_env(env_of({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "2"}})), UsageError,
                     "SLURM_PROCID=3: not below SLURM_NTASKS=2");
}

TEST(DistEnvTest, TorchrunInsideSlurmWins) {
  const DistEnv e = read_dist_env(env_of({{"SLURM_PROCID", "0"},
                                          {"SLURM_NTASKS", "1"},
                                          {"RANK", "1"},
                                          {"WORLD_SIZE", "2"},
                                          {"MASTER_ADDR", "127.0.0.1"},
                                          {"MASTER_PORT", "29400"}}));
  EXPECT_EQ(e.launcher, Launcher::kTorchrun);
  EXPECT_EQ(e.rank, 1);
}

TEST(DistEnvTest, SlurmNodeListsAndLoopbackAddressesAreRecognised) {
  EXPECT_EQ(first_slurm_host("node[03-05,9]"), "node03");
  EXPECT_EQ(first_slurm_host("a,b"), "a");
  EXPECT_EQ(first_slurm_host("rack1-n[2,4]x"), "rack1-n2x");
  EXPECT_EQ(first_slurm_host("single"), "single");
  EXPECT_TRUE(is_loopback_address("127.0.0.1"));
  EXPECT_TRUE(is_loopback_address("localhost"));
  EXPECT_TRUE(is_loopback_address("::1"));
  EXPECT_FALSE(is_loopback_address("10.1.2.3"));
}

}  // namespace
}  // namespace saturate
