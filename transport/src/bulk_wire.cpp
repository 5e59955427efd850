#include "accel/transport/bulk_wire.hpp"

#include "accel/error.hpp"
#include "accel/transport/wire.hpp"

namespace accel::transport {

namespace {
constexpr std::uint32_t kTicketMagic = 0x4b4c4241;  // "ABLK"
constexpr std::uint32_t kBlockMagic = 0x54444241;   // "ABDT"
constexpr std::uint16_t kBulkVersion = 1;

template <class T>
std::optional<T> fail(std::string* error, std::string why) {
  if (error) *error = std::move(why);
  return std::nullopt;
}
}  // namespace

const char* to_string(BulkProtocol p) {
  switch (p) {
    case BulkProtocol::Auto: return "auto";
    case BulkProtocol::Put: return "put";
    case BulkProtocol::ActiveMessage: return "am";
  }
  return "?";
}

BulkProtocol parse_bulk_protocol(const std::string& s) {
  if (s == "auto") return BulkProtocol::Auto;
  if (s == "put") return BulkProtocol::Put;
  if (s == "am") return BulkProtocol::ActiveMessage;
  throw InputError("unknown bulk protocol '" + s + "' (auto, put, am)");
}

const char* to_string(MemoryType m) { return m == MemoryType::Cuda ? "cuda" : "host"; }

std::vector<std::byte> encode_ticket(const BulkTicket& t) {
  std::vector<std::byte> out;
  wire::put<std::uint32_t>(out, kTicketMagic);
  wire::put<std::uint16_t>(out, kBulkVersion);
  wire::put<std::uint16_t>(out, t.offers);
  wire::put<std::uint64_t>(out, t.transfer_id);
  wire::put<std::uint64_t>(out, t.bytes);
  wire::put<std::uint64_t>(out, t.remote_address);
  wire::put<std::uint32_t>(out, static_cast<std::uint32_t>(t.rkey.size()));
  wire::put<std::uint8_t>(out, static_cast<std::uint8_t>(t.memory));
  for (int i = 0; i < 3; ++i) wire::put<std::uint8_t>(out, 0);
  out.insert(out.end(), t.rkey.begin(), t.rkey.end());
  return out;
}

std::optional<BulkTicket> decode_ticket(std::span<const std::byte> in, std::string* error) {
  if (in.size() < kTicketHeaderBytes) return fail<BulkTicket>(error, "truncated bulk ticket");
  if (wire::get<std::uint32_t>(in, 0) != kTicketMagic) return fail<BulkTicket>(error, "bad bulk ticket magic");
  if (wire::get<std::uint16_t>(in, 4) != kBulkVersion) return fail<BulkTicket>(error, "unsupported bulk ticket version");
  BulkTicket t;
  t.offers = wire::get<std::uint16_t>(in, 6);
  if (t.offers == 0 || (t.offers & ~(kOfferPut | kOfferActiveMessage)) != 0)
    return fail<BulkTicket>(error, "bulk ticket offers no known protocol");
  t.transfer_id = wire::get<std::uint64_t>(in, 8);
  t.bytes = wire::get<std::uint64_t>(in, 16);
  if (t.bytes == 0 || t.bytes > kMaxTransferBytes) return fail<BulkTicket>(error, "bulk ticket size out of range");
  t.remote_address = wire::get<std::uint64_t>(in, 24);
  const auto rkey_len = wire::get<std::uint32_t>(in, 32);
  const auto mem = wire::get<std::uint8_t>(in, 36);
  if (mem > static_cast<std::uint8_t>(MemoryType::Cuda)) return fail<BulkTicket>(error, "bulk ticket memory type unknown");
  t.memory = static_cast<MemoryType>(mem);
  for (std::size_t i = 37; i < kTicketHeaderBytes; ++i)
    if (wire::get<std::uint8_t>(in, i) != 0) return fail<BulkTicket>(error, "bulk ticket reserved bits set");
  if (rkey_len > kMaxRkeyBytes) return fail<BulkTicket>(error, "bulk ticket rkey too long");
  if (in.size() - kTicketHeaderBytes != rkey_len) return fail<BulkTicket>(error, "bulk ticket length mismatch");
  const bool put = (t.offers & kOfferPut) != 0;
  if (put && (rkey_len == 0 || t.remote_address == 0))
    return fail<BulkTicket>(error, "bulk ticket offers put without a remote key");
  if (!put && (rkey_len != 0 || t.remote_address != 0))
    return fail<BulkTicket>(error, "bulk ticket carries a remote key it does not offer");
  if (put && t.remote_address + t.bytes < t.remote_address)
    return fail<BulkTicket>(error, "bulk ticket address range wraps");
  t.rkey.assign(in.begin() + kTicketHeaderBytes, in.end());
  return t;
}

std::vector<std::byte> encode_block_header(const BlockHeader& h) {
  std::vector<std::byte> out;
  wire::put<std::uint32_t>(out, kBlockMagic);
  wire::put<std::uint16_t>(out, kBulkVersion);
  wire::put<std::uint16_t>(out, 0);
  wire::put<std::uint64_t>(out, h.job_token);
  wire::put<std::uint64_t>(out, h.transfer_id);
  wire::put<std::uint64_t>(out, h.offset);
  wire::put<std::uint64_t>(out, h.length);
  return out;
}

std::optional<BlockHeader> decode_block_header(std::span<const std::byte> in, std::string* error) {
  if (in.size() != kBlockHeaderBytes) return fail<BlockHeader>(error, "bulk block header has the wrong size");
  if (wire::get<std::uint32_t>(in, 0) != kBlockMagic) return fail<BlockHeader>(error, "bad bulk block magic");
  if (wire::get<std::uint16_t>(in, 4) != kBulkVersion) return fail<BlockHeader>(error, "unsupported bulk block version");
  if (wire::get<std::uint16_t>(in, 6) != 0) return fail<BlockHeader>(error, "bulk block reserved bits set");
  BlockHeader h;
  h.job_token = wire::get<std::uint64_t>(in, 8);
  h.transfer_id = wire::get<std::uint64_t>(in, 16);
  h.offset = wire::get<std::uint64_t>(in, 24);
  h.length = wire::get<std::uint64_t>(in, 32);
  if (h.length == 0 || h.length > kMaxTransferBytes || h.offset > kMaxTransferBytes)
    return fail<BlockHeader>(error, "bulk block range out of bounds");
  return h;
}

std::vector<std::byte> encode_bulk_done(const BulkDone& d) {
  std::vector<std::byte> out;
  wire::put<std::uint64_t>(out, d.transfer_id);
  wire::put<std::uint64_t>(out, d.bytes);
  wire::put<std::uint8_t>(out, static_cast<std::uint8_t>(d.protocol));
  for (int i = 0; i < 7; ++i) wire::put<std::uint8_t>(out, 0);
  return out;
}

std::optional<BulkDone> decode_bulk_done(std::span<const std::byte> in, std::string* error) {
  if (in.size() != kBulkDoneBytes) return fail<BulkDone>(error, "bulk done has the wrong size");
  BulkDone d;
  d.transfer_id = wire::get<std::uint64_t>(in, 0);
  d.bytes = wire::get<std::uint64_t>(in, 8);
  const auto p = wire::get<std::uint8_t>(in, 16);
  if (p != static_cast<std::uint8_t>(BulkProtocol::Put) && p != static_cast<std::uint8_t>(BulkProtocol::ActiveMessage))
    return fail<BulkDone>(error, "bulk done names an unknown protocol");
  d.protocol = static_cast<BulkProtocol>(p);
  for (std::size_t i = 17; i < kBulkDoneBytes; ++i)
    if (wire::get<std::uint8_t>(in, i) != 0) return fail<BulkDone>(error, "bulk done reserved bits set");
  return d;
}

}  // namespace accel::transport
