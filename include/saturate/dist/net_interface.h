// Implements: which of this host's network interfaces the other ranks reach it by. A rank
// advertises one address to its peers (Gloo's device, NCCL's socket); the right one is the
// interface the kernel routes to MASTER_ADDR from. Without it Gloo takes the address the host
// name resolves to, often 127.0.1.1 on a workstation, and peers on other hosts are refused.
#pragma once
#include <optional>
#include <string>

namespace saturate {

struct NetInterface {
  std::string name;     ///< "eth0", "veth1", ...
  std::string address;  ///< its IPv4 address, dotted
  bool loopback = false;
};

/// The interface this host sends from to reach `host` (a name or an IPv4 address): the kernel's
/// route (a UDP socket connected there; nothing is sent). None when `host` does not resolve or no
/// interface holds the route's source address.
std::optional<NetInterface> interface_towards(const std::string& host);

/// The interface named `name` (its first IPv4 address); none when this host has no such
/// interface with an IPv4 address.
std::optional<NetInterface> interface_named(const std::string& name);

/// Where this rank's peers reach it when rank 0 is at `master_addr`: the interface that
/// `socket_ifname` names (GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME; "" when unset), else the one
/// that routes to `master_addr`. None (127.0.0.1 serves) when `master_addr` is loopback, or when
/// every rank is on this host (`one_host`) and the route is loopback (a host name that resolves
/// to 127.0.1.1). For ranks on several hosts, a RuntimeFailure before any connection is tried
/// when the interface would be loopback (peers on other hosts could not reach it); and for any
/// run when a named interface does not exist: naming the variable and the way out.
std::optional<NetInterface> rank_interface(const std::string& master_addr, const std::string& socket_ifname,
                                           const std::string& variable, bool one_host);

}  // namespace saturate
