// A transport control frame as it arrives off the wire: decoded, or
// refused with an error (never a throw, never a read past the frame).
#include <span>

#include "accel/transport/control_message.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const accel::transport::ControlLimits limits{1, 1u << 20};
  (void)accel::transport::decode_control(std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size),
                                         limits);
  return 0;
}
