// The interface a rank advertises (dist/net_interface.h) on this machine's own interfaces; the
// several-host cases run in network namespaces (tests/dist/two_hosts.py).
#include "saturate/dist/net_interface.h"

#include <gtest/gtest.h>

#include "saturate/core/errors.h"

namespace saturate {
namespace {

std::string failure_of(const std::string& master, const std::string& ifname, bool one_host) {
  try {
    rank_interface(master, ifname, "GLOO_SOCKET_IFNAME", one_host);
  } catch (const RuntimeFailure& e) {
    return e.what();
  }
  return "";
}

TEST(NetInterface, LoopbackIsFoundByNameAndServesEveryRankOnThisHost) {
  const auto lo = interface_named("lo");
  ASSERT_TRUE(lo);
  EXPECT_TRUE(lo->loopback);
  EXPECT_EQ(lo->address, "127.0.0.1");
  EXPECT_FALSE(interface_named("no-such-if0"));
  EXPECT_FALSE(rank_interface("127.0.0.1", "", "GLOO_SOCKET_IFNAME", false));  // every rank here
  const auto towards_self = interface_towards("127.0.0.1");
  ASSERT_TRUE(towards_self);
  EXPECT_TRUE(towards_self->loopback);
  // a host name that resolves to this host's loopback serves ranks that are all on this host
  EXPECT_FALSE(rank_interface("localhost", "", "GLOO_SOCKET_IFNAME", true));
}

TEST(NetInterface, AWrongInterfaceVariableIsRefusedNamingItAndTheWayOut) {
  // loopback named while rank 0 is elsewhere and ranks span hosts: peers could not reach this one
  const std::string lo = failure_of("192.0.2.7", "lo", /*one_host=*/false);
  EXPECT_NE(lo.find("GLOO_SOCKET_IFNAME=lo: a loopback interface (127.0.0.1), but MASTER_ADDR 192.0.2.7 is not on "
                    "loopback"),
            std::string::npos)
      << lo;
  EXPECT_NE(lo.find("unset GLOO_SOCKET_IFNAME"), std::string::npos) << lo;
  EXPECT_EQ(failure_of("192.0.2.7", "lo", /*one_host=*/true), "");  // all ranks here: loopback reaches them
  const std::string missing = failure_of("127.0.0.1", "no-such-if0", true);
  EXPECT_NE(missing.find("GLOO_SOCKET_IFNAME=no-such-if0: this host has no interface of that name"), std::string::npos)
      << missing;
}

}  // namespace
}  // namespace saturate
