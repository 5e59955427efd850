// The framed control message: what workers and the coordinator say to each
// other (hello, barrier notifications, partial results, bulk-transfer tickets).
// Everything read from the network goes through decode_control(), which checks
// every field and returns an error string instead of trusting the sender.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace accel::transport {

inline constexpr std::uint32_t kControlMagic = 0x4c434341;  // "ACCL" in memory order
inline constexpr std::uint16_t kControlVersion = 1;
inline constexpr std::size_t kControlHeaderBytes = 40;
// A sealed frame (message_mac.hpp) ends in a 12-byte nonce and a 16-byte
// tag after the payload, and says so in its flags.
inline constexpr std::size_t kControlSealBytes = 28;
inline constexpr std::uint32_t kControlFlagSealed = 1;
using ControlSeal = std::array<std::byte, kControlSealBytes>;
// Default and hard upper bound of a payload; a decoder is configured with its
// own bound at or below the hard one.
inline constexpr std::uint32_t kDefaultMaxControlPayload = 1u << 20;
inline constexpr std::uint32_t kMaxControlPayloadLimit = 16u << 20;

// Message types. 0 is never valid; types at or above kFirstInternalType are
// the transport's own (bulk-transfer completion) and never reach the
// application.
inline constexpr std::uint16_t kFirstInternalType = 0xf000;
inline constexpr std::uint16_t kTypeBulkDone = 0xf001;

struct ControlHeader {
  std::uint16_t type = 0;
  std::uint64_t job_token = 0;
  std::uint32_t sender = 0;       // the sender's id in the job (rank)
  std::uint32_t incarnation = 0;  // bumped each time a process (re)starts
  std::uint64_t iteration = 0;
};

struct ControlMessage {
  ControlHeader header;
  std::vector<std::byte> payload;
  // As received: the header's bytes and, for a sealed frame, its trailer,
  // which verify_control (message_mac.hpp) checks against the sender's key.
  std::array<std::byte, kControlHeaderBytes> raw_header{};
  std::optional<ControlSeal> seal;
};

// Layout (all little-endian), 40 bytes then the payload:
//   0 u32 magic | 4 u16 version | 6 u16 type | 8 u64 job token
//  16 u32 sender | 20 u32 incarnation | 24 u64 iteration
//  32 u32 payload length | 36 u32 flags (kControlFlagSealed, else zero)
// then, when sealed, the 28-byte seal over everything before it.
// Throws std::invalid_argument for a payload over max_payload or type 0.
// With a key the frame is sealed (message_mac.hpp).
std::vector<std::byte> encode_control(const ControlHeader& h, std::span<const std::byte> payload,
                                      std::uint32_t max_payload = kDefaultMaxControlPayload,
                                      const std::array<std::byte, 16>* key = nullptr);

struct ControlLimits {
  std::uint64_t job_token = 0;                               // must match exactly
  std::uint32_t max_payload = kDefaultMaxControlPayload;    // clamped to the hard limit
};

struct DecodeResult {
  std::optional<ControlMessage> message;  // set exactly when error is empty
  std::string error;
  bool ok() const { return message.has_value(); }
};

// Validates magic, version, type, job token, flags and lengths (the frame
// must be exactly header + payload (+ seal), the payload within the limit).
// A seal is kept, not verified: the receiver may learn the key later.
DecodeResult decode_control(std::span<const std::byte> frame, const ControlLimits& limits);

}  // namespace accel::transport
