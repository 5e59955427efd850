// The cluster's messages as a peer may send them: the first byte picks the
// decoder (task, contribution, current, hello, counted, need, the tree's
// partial, a confirmation's ids), the rest is the payload. Any bytes decode or throw one
// InputError.
#include <span>

#include "accel/error.hpp"
#include "protocol.hpp"
#include "tree.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::span<const std::byte> p(reinterpret_cast<const std::byte*>(data) + 1, size - 1);
  const accel::cluster::Limits limits;
  try {
    switch (data[0] % 8) {
      case 0: (void)accel::cluster::decode_task(p, limits); break;
      case 1: (void)accel::cluster::decode_contribution(p, limits); break;
      case 2: (void)accel::cluster::decode_current(p, limits); break;
      case 3: {
        bool resume = false;
        std::int64_t it = 0;
        accel::cluster::Ticket t{};
        accel::cluster::decode_hello(p, resume, it, t);
        break;
      }
      case 4: (void)accel::cluster::decode_counted(p, limits); break;
      case 6: (void)accel::cluster::decode_partial(p, limits); break;
      case 7: (void)accel::cluster::decode_ids(p, limits); break;
      default: (void)accel::cluster::decode_u32(p); break;
    }
  } catch (const accel::InputError&) {
  }
  return 0;
}
