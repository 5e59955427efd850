// Control messages sealed by their sender: a MAC over the header and the
// payload, keyed by a secret the two ends share, so a receiver knows who
// sent a message from the key it verifies with, never from the header's
// sender field alone. The cluster engine hands the keys out (bootstrap.hpp):
// anyone else, even holding the job token, cannot make a message that
// verifies.
//
// The MAC is GMAC (AES-128-GCM over the message as associated data, nothing
// encrypted) with a random 96-bit nonce per message: fast enough for
// megabyte-sized k-means contributions every round, where an HMAC-SHA256
// of each would cost a noticeable share of a round per peer.
#pragma once

#include <array>
#include <cstddef>
#include <span>

#include "accel/transport/control_message.hpp"

namespace accel::transport {

using MacKey = std::array<std::byte, 16>;

// The trailer of a sealed frame (kControlSealBytes): nonce, then tag.
ControlSeal seal_control(const MacKey& key, std::span<const std::byte> header, std::span<const std::byte> payload);
// Whether m is sealed and its seal verifies under `key` (constant time).
bool verify_control(const ControlMessage& m, const MacKey& key);

}  // namespace accel::transport
