#include "accel/transport/control_message.hpp"

#include <algorithm>
#include <stdexcept>

#include "accel/transport/message_mac.hpp"
#include "accel/transport/wire.hpp"

namespace accel::transport {

std::vector<std::byte> encode_control(const ControlHeader& h, std::span<const std::byte> payload,
                                      std::uint32_t max_payload, const std::array<std::byte, 16>* key) {
  if (h.type == 0) throw std::invalid_argument("control message type 0 is reserved");
  if (payload.size() > std::min(max_payload, kMaxControlPayloadLimit))
    throw std::invalid_argument("control payload of " + std::to_string(payload.size()) +
                                " bytes exceeds the limit of " + std::to_string(max_payload));
  std::vector<std::byte> out;
  out.reserve(kControlHeaderBytes + payload.size() + (key ? kControlSealBytes : 0));
  wire::put<std::uint32_t>(out, kControlMagic);
  wire::put<std::uint16_t>(out, kControlVersion);
  wire::put<std::uint16_t>(out, h.type);
  wire::put<std::uint64_t>(out, h.job_token);
  wire::put<std::uint32_t>(out, h.sender);
  wire::put<std::uint32_t>(out, h.incarnation);
  wire::put<std::uint64_t>(out, h.iteration);
  wire::put<std::uint32_t>(out, static_cast<std::uint32_t>(payload.size()));
  wire::put<std::uint32_t>(out, key ? kControlFlagSealed : 0);
  out.insert(out.end(), payload.begin(), payload.end());
  if (key) {
    const ControlSeal s = seal_control(*key, std::span(out).first(kControlHeaderBytes), payload);
    out.insert(out.end(), s.begin(), s.end());
  }
  return out;
}

namespace {
DecodeResult fail(std::string why) {
  DecodeResult r;
  r.error = std::move(why);
  return r;
}
}  // namespace

DecodeResult decode_control(std::span<const std::byte> frame, const ControlLimits& limits) {
  if (frame.size() < kControlHeaderBytes)
    return fail("truncated control message: " + std::to_string(frame.size()) + " bytes, header needs " +
                std::to_string(kControlHeaderBytes));
  if (wire::get<std::uint32_t>(frame, 0) != kControlMagic) return fail("bad magic");
  const auto version = wire::get<std::uint16_t>(frame, 4);
  if (version != kControlVersion) return fail("unsupported version " + std::to_string(version));
  ControlMessage m;
  m.header.type = wire::get<std::uint16_t>(frame, 6);
  if (m.header.type == 0) return fail("message type 0");
  m.header.job_token = wire::get<std::uint64_t>(frame, 8);
  if (m.header.job_token != limits.job_token) return fail("wrong job token");
  m.header.sender = wire::get<std::uint32_t>(frame, 16);
  m.header.incarnation = wire::get<std::uint32_t>(frame, 20);
  m.header.iteration = wire::get<std::uint64_t>(frame, 24);
  const auto len = wire::get<std::uint32_t>(frame, 32);
  const auto flags = wire::get<std::uint32_t>(frame, 36);
  if ((flags & ~kControlFlagSealed) != 0) return fail("reserved header bits set");
  const std::size_t trailer = flags & kControlFlagSealed ? kControlSealBytes : 0;
  const std::uint32_t limit = std::min(limits.max_payload, kMaxControlPayloadLimit);
  if (len > limit)
    return fail("payload length " + std::to_string(len) + " exceeds the limit of " + std::to_string(limit));
  if (frame.size() - kControlHeaderBytes != len + trailer)
    return fail("payload length " + std::to_string(len) + (trailer ? " with a seal" : "") + " does not match the " +
                std::to_string(frame.size() - kControlHeaderBytes) + " bytes received");
  std::copy_n(frame.begin(), kControlHeaderBytes, m.raw_header.begin());
  m.payload.assign(frame.begin() + kControlHeaderBytes, frame.begin() + kControlHeaderBytes + len);
  if (trailer) {
    m.seal.emplace();
    std::copy(frame.end() - trailer, frame.end(), m.seal->begin());
  }
  DecodeResult r;
  r.message = std::move(m);
  return r;
}

}  // namespace accel::transport
