#include "saturate/dist/net_interface.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "saturate/core/errors.h"
#include "saturate/dist/env.h"

namespace saturate {
namespace {

std::string dotted(const in_addr& a) {
  char text[INET_ADDRSTRLEN] = {};
  return inet_ntop(AF_INET, &a, text, sizeof text) ? text : "";
}

/// The first interface whose IPv4 address is `address` (any address when empty) and whose name is
/// `name` (any name when empty).
std::optional<NetInterface> find_interface(const std::string& name, const std::string& address) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return std::nullopt;
  std::optional<NetInterface> found;
  for (const ifaddrs* i = list; i && !found; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !i->ifa_name) continue;
    const std::string a = dotted(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr);
    if ((!name.empty() && name != i->ifa_name) || (!address.empty() && address != a)) continue;
    found = NetInterface{i->ifa_name, a, (i->ifa_flags & IFF_LOOPBACK) != 0 || a.rfind("127.", 0) == 0};
  }
  freeifaddrs(list);
  return found;
}

}  // namespace

std::optional<NetInterface> interface_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || !res) return std::nullopt;
  std::optional<NetInterface> found;
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    sockaddr_in local{};
    socklen_t len = sizeof local;
    // connecting a UDP socket sends nothing: it only asks the kernel for the route's source
    if (connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0)
      found = find_interface("", dotted(local.sin_addr));
    close(fd);
  }
  freeaddrinfo(res);
  return found;
}

std::optional<NetInterface> interface_named(const std::string& name) { return find_interface(name, ""); }

std::optional<NetInterface> rank_interface(const std::string& master_addr, const std::string& socket_ifname,
                                           const std::string& variable, bool one_host) {
  const bool loopback_master = is_loopback_address(master_addr);
  if (loopback_master && socket_ifname.empty()) return std::nullopt;
  const std::optional<NetInterface> route = loopback_master ? std::nullopt : interface_towards(master_addr);
  const std::string towards =
      route ? fmt::format("{} ({}) routes to {}", route->name, route->address, master_addr)
            : fmt::format("no interface of this host routes to {}", master_addr);
  if (!socket_ifname.empty()) {
    const std::optional<NetInterface> named = interface_named(socket_ifname);
    if (!named)
      throw RuntimeFailure(fmt::format("{}={}: this host has no interface of that name with an IPv4 address; {}: "
                                       "unset {} (saturate uses the interface that routes to MASTER_ADDR) or name "
                                       "one of this host's interfaces",
                                       variable, socket_ifname, towards, variable));
    if (named->loopback && !one_host && !loopback_master)
      throw RuntimeFailure(fmt::format("{}={}: a loopback interface ({}), but MASTER_ADDR {} is not on loopback: the "
                                       "ranks on other hosts could not reach this one; {}: unset {} or name that "
                                       "interface",
                                       variable, socket_ifname, named->address, master_addr, towards, variable));
    return named;
  }
  if (one_host && (!route || route->loopback)) return std::nullopt;
  if (!route)
    throw RuntimeFailure(fmt::format("MASTER_ADDR {}: {}, so the other ranks could not be told an address of this "
                                     "rank; check the address, or set {} to the interface that reaches it",
                                     master_addr, towards, variable));
  if (route->loopback)
    throw RuntimeFailure(fmt::format("MASTER_ADDR {} is reached over loopback ({}) from this host, so the ranks "
                                     "on other hosts could not reach this one; give node 0's address on the network "
                                     "as MASTER_ADDR, or set {} to the interface the other hosts reach",
                                     master_addr, route->name, variable));
  return route;
}

}  // namespace saturate
