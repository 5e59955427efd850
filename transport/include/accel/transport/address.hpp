// An IPv4 ADDR and port as a socket address, for the transport's UCX
// listener and the cluster's front door alike.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <string>

namespace accel::transport {

// Throws InputError naming `ip` when it is not a dotted IPv4 address.
sockaddr_in ipv4_sockaddr(const std::string& ip, std::uint16_t port);

}  // namespace accel::transport
