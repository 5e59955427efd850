// Wire formats of bulk transfers. A receiver describes where the data may go
// in a ticket (sent to the sender inside a control message); active-message
// blocks carry a block header; the sender ends a transfer with a "bulk done"
// control message. Each has a decoder that checks every field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace accel::transport {

enum class BulkProtocol : std::uint8_t {
  Auto = 0,           // per endpoint: Put where UCX has a real RMA lane, else ActiveMessage
  Put = 1,            // receiver registers memory, sender ucp_put_nbx + ucp_ep_flush_nbx
  ActiveMessage = 2,  // ucp_am_send_nbx with rendezvous, receiver ucp_am_recv_data_nbx
};
const char* to_string(BulkProtocol p);
// "auto", "put", "am"; throws accel::InputError otherwise.
BulkProtocol parse_bulk_protocol(const std::string& s);

enum class MemoryType : std::uint8_t { Host = 0, Cuda = 1 };
const char* to_string(MemoryType m);

inline constexpr std::size_t kTicketHeaderBytes = 40;
inline constexpr std::size_t kMaxRkeyBytes = 8192;
inline constexpr std::uint64_t kMaxTransferBytes = 1ull << 40;

// Offers bits: which protocols the receiver prepared for.
inline constexpr std::uint16_t kOfferPut = 1;
inline constexpr std::uint16_t kOfferActiveMessage = 2;

struct BulkTicket {
  std::uint16_t offers = 0;
  std::uint64_t transfer_id = 0;
  std::uint64_t bytes = 0;
  std::uint64_t remote_address = 0;  // only with kOfferPut
  MemoryType memory = MemoryType::Host;
  std::vector<std::byte> rkey;       // packed by ucp_rkey_pack; only with kOfferPut
};

std::vector<std::byte> encode_ticket(const BulkTicket& t);
// Returns the ticket or sets *error.
std::optional<BulkTicket> decode_ticket(std::span<const std::byte> in, std::string* error);

// Header of one active-message block (the AM user header).
inline constexpr std::size_t kBlockHeaderBytes = 40;
struct BlockHeader {
  std::uint64_t job_token = 0;
  std::uint64_t transfer_id = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};
std::vector<std::byte> encode_block_header(const BlockHeader& h);
std::optional<BlockHeader> decode_block_header(std::span<const std::byte> in, std::string* error);

// Payload of a kTypeBulkDone control message.
inline constexpr std::size_t kBulkDoneBytes = 24;
struct BulkDone {
  std::uint64_t transfer_id = 0;
  std::uint64_t bytes = 0;
  BulkProtocol protocol = BulkProtocol::Put;
};
std::vector<std::byte> encode_bulk_done(const BulkDone& d);
std::optional<BulkDone> decode_bulk_done(std::span<const std::byte> in, std::string* error);

}  // namespace accel::transport
