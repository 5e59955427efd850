#include "accel/transport/address.hpp"

#include <arpa/inet.h>

#include "accel/error.hpp"

namespace accel::transport {

sockaddr_in ipv4_sockaddr(const std::string& ip, std::uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (inet_pton(AF_INET, ip.c_str(), &sa.sin_addr) != 1) throw InputError("not an IPv4 address: '" + ip + "'");
  return sa;
}

}  // namespace accel::transport
