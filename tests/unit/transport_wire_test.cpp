// The wire formats the transport reads from the network: round trips, every
// rejection path, and fuzzing (random and mutated frames never crash the
// decoders and are never accepted unless they are well-formed).
#include <gtest/gtest.h>

#include <random>

#include "accel/error.hpp"
#include "accel/transport/bulk_wire.hpp"
#include "accel/transport/control_message.hpp"
#include "accel/transport/message_mac.hpp"
#include "accel/transport/wire.hpp"

namespace accel::transport {
namespace {

constexpr std::uint64_t kToken = 0x1234567890abcdefull;

std::vector<std::byte> bytes_of(std::initializer_list<int> v) {
  std::vector<std::byte> out;
  for (int x : v) out.push_back(static_cast<std::byte>(x));
  return out;
}

// One codec (accel/codec.hpp) for the transport's frames and every payload
// above it: fixed-size values little-endian, arrays length-prefixed, and
// reads refused past what the bytes hold.
TEST(Codec, LittleEndianEverywhereAndBounded) {
  Out o;
  o.put<std::uint32_t>(0x01020304u);
  o.put<std::int16_t>(-2);
  o.put(1.0f);
  o.array(std::vector<std::uint16_t>{0x0a0b, 0x0c0d});
  o.text("hi");
  EXPECT_EQ(o.b, bytes_of({0x04, 0x03, 0x02, 0x01, 0xfe, 0xff, 0x00, 0x00, 0x80, 0x3f, 2, 0, 0, 0, 0, 0, 0, 0, 0x0b,
                           0x0a, 0x0d, 0x0c, 2, 0, 0, 0, 0, 0, 0, 0, 'h', 'i'}));
  std::vector<std::byte> frame;
  wire::put<std::uint32_t>(frame, 0x01020304u);
  EXPECT_EQ(frame, std::vector<std::byte>(o.b.begin(), o.b.begin() + 4)) << "the transport's fields, the same bytes";
  EXPECT_EQ(wire::get<std::uint32_t>(frame, 0), 0x01020304u);
  In i(o.b);
  EXPECT_EQ(i.get<std::uint32_t>(), 0x01020304u);
  EXPECT_EQ(i.get<std::int16_t>(), -2);
  EXPECT_EQ(i.get<float>(), 1.0f);
  EXPECT_EQ(i.array<std::uint16_t>(2), (std::vector<std::uint16_t>{0x0a0b, 0x0c0d}));
  EXPECT_THROW(i.text(1), InputError) << "longer than allowed";
  In short_(std::span(o.b).first(3));
  EXPECT_THROW(short_.get<std::uint32_t>(), InputError);
}

std::vector<std::byte> sample_frame(std::size_t payload = 5) {
  std::vector<std::byte> p(payload);
  for (std::size_t i = 0; i < payload; ++i) p[i] = static_cast<std::byte>(i * 7 + 1);
  return encode_control({3, kToken, 9, 2, 41}, p);
}

TEST(ControlMessage, RoundTrip) {
  const auto frame = sample_frame();
  ASSERT_EQ(frame.size(), kControlHeaderBytes + 5);
  const DecodeResult d = decode_control(frame, {kToken, 1024});
  ASSERT_TRUE(d.ok()) << d.error;
  EXPECT_EQ(d.message->header.type, 3);
  EXPECT_EQ(d.message->header.job_token, kToken);
  EXPECT_EQ(d.message->header.sender, 9u);
  EXPECT_EQ(d.message->header.incarnation, 2u);
  EXPECT_EQ(d.message->header.iteration, 41u);
  EXPECT_EQ(d.message->payload, std::vector<std::byte>(frame.begin() + kControlHeaderBytes, frame.end()));
}

TEST(ControlMessage, EmptyPayload) {
  const auto frame = encode_control({1, kToken, 0, 0, 0}, {});
  EXPECT_TRUE(decode_control(frame, {kToken, 0}).ok());
}

TEST(ControlMessage, EncodeRefusesType0AndOversize) {
  EXPECT_THROW(encode_control({0, kToken, 0, 0, 0}, {}), std::invalid_argument);
  std::vector<std::byte> big(101);
  EXPECT_THROW(encode_control({1, kToken, 0, 0, 0}, big, 100), std::invalid_argument);
}

TEST(ControlMessage, RejectsTruncated) {
  auto frame = sample_frame();
  for (std::size_t n = 0; n < frame.size(); ++n) {
    const DecodeResult d = decode_control(std::span(frame).first(n), {kToken, 1024});
    EXPECT_FALSE(d.ok()) << n;
    EXPECT_FALSE(d.error.empty());
  }
}

TEST(ControlMessage, RejectsTrailingBytes) {
  auto frame = sample_frame();
  frame.push_back(std::byte{0});
  EXPECT_NE(decode_control(frame, {kToken, 1024}).error.find("does not match"), std::string::npos);
}

TEST(ControlMessage, RejectsWrongToken) {
  const DecodeResult d = decode_control(sample_frame(), {kToken + 1, 1024});
  EXPECT_FALSE(d.ok());
  EXPECT_EQ(d.error, "wrong job token");
}

TEST(ControlMessage, RejectsOversizedPayload) {
  const auto frame = sample_frame(200);
  EXPECT_TRUE(decode_control(frame, {kToken, 200}).ok());
  const DecodeResult d = decode_control(frame, {kToken, 199});
  EXPECT_FALSE(d.ok());
  EXPECT_NE(d.error.find("exceeds"), std::string::npos);
  // A length field claiming more than the hard limit is refused before any
  // allocation, even when the caller asks for a bigger limit.
  auto forged = sample_frame(0);
  forged[32] = forged[33] = forged[34] = forged[35] = std::byte{0xff};
  EXPECT_FALSE(decode_control(forged, {kToken, 0xffffffffu}).ok());
}

TEST(ControlMessage, RejectsBadMagicVersionTypeReserved) {
  auto check = [](std::size_t at, std::byte v, const std::string& what) {
    auto f = sample_frame();
    f[at] = v;
    const DecodeResult d = decode_control(f, {kToken, 1024});
    EXPECT_FALSE(d.ok()) << what;
    EXPECT_NE(d.error.find(what), std::string::npos) << d.error;
  };
  check(0, std::byte{0}, "magic");
  check(4, std::byte{2}, "version");
  auto f = sample_frame();
  f[6] = f[7] = std::byte{0};
  EXPECT_EQ(decode_control(f, {kToken, 1024}).error, "message type 0");
  check(39, std::byte{1}, "reserved");
}

// Anything a decoder accepts must be exactly what the encoder would write for
// the decoded value: no garbage passes as a message.
TEST(ControlMessage, FuzzRandomAndMutatedFrames) {
  std::mt19937_64 rng(12345);
  const auto valid = sample_frame(16);
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::byte> f;
    if (i % 2 == 0) {
      f.resize(rng() % 128);
      for (auto& b : f) b = static_cast<std::byte>(rng());
    } else {
      f = valid;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k) f[rng() % f.size()] ^= static_cast<std::byte>(1u << (rng() % 8));
      if (rng() % 4 == 0) f.resize(rng() % (f.size() + 8));
    }
    const DecodeResult d = decode_control(f, {kToken, 64});
    ASSERT_EQ(d.ok(), d.error.empty());
    if (d.ok()) {
      ++accepted;
      if (d.message->seal)  // a seal cannot be re-made without the key; it is kept as it came
        ASSERT_EQ(f.size(), kControlHeaderBytes + d.message->payload.size() + kControlSealBytes);
      else
        ASSERT_EQ(encode_control(d.message->header, d.message->payload), f);
    }
  }
  // Only mutations inside the payload, sender, incarnation or iteration survive.
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, 10000);
}

MacKey key_of(int seed) {
  MacKey k;
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = static_cast<std::byte>(seed * 31 + i);
  return k;
}

// A sealed frame: the same header and payload, the sealed flag, and a
// 28-byte seal that verifies under its key only, and only unaltered.
TEST(SealedMessage, VerifiesUnderItsKeyOnly) {
  std::vector<std::byte> p(1000);
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<std::byte>(i * 13);
  const MacKey key = key_of(1);
  const auto frame = encode_control({3, kToken, 9, 2, 41}, p, 4096, &key);
  ASSERT_EQ(frame.size(), kControlHeaderBytes + p.size() + kControlSealBytes);
  const DecodeResult d = decode_control(frame, {kToken, 4096});
  ASSERT_TRUE(d.ok()) << d.error;
  ASSERT_TRUE(d.message->seal.has_value());
  EXPECT_EQ(d.message->payload, p);
  EXPECT_EQ(d.message->header.sender, 9u);
  EXPECT_TRUE(verify_control(*d.message, key));
  EXPECT_FALSE(verify_control(*d.message, key_of(2)));
  // Unsealed: nothing to verify.
  const DecodeResult plain = decode_control(encode_control({3, kToken, 9, 2, 41}, p, 4096), {kToken, 4096});
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(verify_control(*plain.message, key));
}

TEST(SealedMessage, AnyAlteredByteFailsVerification) {
  const std::vector<std::byte> p(64, std::byte{7});
  const MacKey key = key_of(3);
  const auto frame = encode_control({5, kToken, 4, 1, 8}, p, 4096, &key);
  int decoded = 0;
  for (std::size_t at = 0; at < frame.size(); ++at) {
    auto f = frame;
    f[at] ^= std::byte{0x01};
    const DecodeResult d = decode_control(f, {kToken, 4096});
    if (!d.ok()) continue;  // the header's own checks caught it
    ++decoded;
    EXPECT_FALSE(d.message->seal && verify_control(*d.message, key)) << "byte " << at;
  }
  EXPECT_GT(decoded, static_cast<int>(p.size()));  // the payload's and the seal's flips decode, and fail here
}

TEST(SealedMessage, EveryFrameGetsItsOwnNonce) {
  const MacKey key = key_of(4);
  const auto a = encode_control({5, kToken, 4, 1, 8}, {}, 64, &key), b = encode_control({5, kToken, 4, 1, 8}, {}, 64, &key);
  EXPECT_NE(a, b);  // the same message twice: different nonces, both valid
  EXPECT_TRUE(verify_control(*decode_control(a, {kToken, 64}).message, key));
  EXPECT_TRUE(verify_control(*decode_control(b, {kToken, 64}).message, key));
}

TEST(SealedMessage, SealedFlagWithoutASealIsRefused) {
  auto f = sample_frame();
  f[36] = std::byte{1};  // says sealed, carries no seal
  EXPECT_FALSE(decode_control(f, {kToken, 1024}).ok());
}

BulkTicket sample_ticket() {
  BulkTicket t;
  t.offers = kOfferPut | kOfferActiveMessage;
  t.transfer_id = 77;
  t.bytes = 1 << 20;
  t.remote_address = 0x7f0000001000;
  t.rkey = bytes_of({1, 2, 3, 4, 5, 6});
  return t;
}

TEST(BulkWire, TicketRoundTripAndRejections) {
  const auto enc = encode_ticket(sample_ticket());
  std::string err;
  auto t = decode_ticket(enc, &err);
  ASSERT_TRUE(t) << err;
  EXPECT_EQ(t->transfer_id, 77u);
  EXPECT_EQ(t->rkey, bytes_of({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(encode_ticket(*t), enc);
  for (std::size_t n = 0; n < enc.size(); ++n) EXPECT_FALSE(decode_ticket(std::span(enc).first(n), &err)) << n;

  BulkTicket bad = sample_ticket();
  bad.offers = 4;
  EXPECT_FALSE(decode_ticket(encode_ticket(bad), &err));
  bad = sample_ticket();
  bad.rkey.clear();
  EXPECT_FALSE(decode_ticket(encode_ticket(bad), &err));
  bad = sample_ticket();
  bad.bytes = 0;
  EXPECT_FALSE(decode_ticket(encode_ticket(bad), &err));
  bad = sample_ticket();
  bad.remote_address = ~0ull - 10;
  EXPECT_FALSE(decode_ticket(encode_ticket(bad), &err));
  bad = sample_ticket();
  bad.offers = kOfferActiveMessage;  // am only, yet carries a key
  EXPECT_FALSE(decode_ticket(encode_ticket(bad), &err));
  bad.rkey.clear();
  bad.remote_address = 0;
  EXPECT_TRUE(decode_ticket(encode_ticket(bad), &err)) << err;
  bad = sample_ticket();
  bad.rkey.resize(kMaxRkeyBytes + 1);
  EXPECT_FALSE(decode_ticket(encode_ticket(bad), &err));
}

TEST(BulkWire, BlockHeaderAndDone) {
  std::string err;
  const auto h = encode_block_header({kToken, 5, 4096, 8192});
  auto d = decode_block_header(h, &err);
  ASSERT_TRUE(d) << err;
  EXPECT_EQ(d->offset, 4096u);
  EXPECT_EQ(d->length, 8192u);
  EXPECT_FALSE(decode_block_header(std::span(h).first(39), &err));
  EXPECT_FALSE(decode_block_header(encode_block_header({kToken, 5, 0, 0}), &err));

  const auto done = encode_bulk_done({5, 100, BulkProtocol::ActiveMessage});
  auto dd = decode_bulk_done(done, &err);
  ASSERT_TRUE(dd) << err;
  EXPECT_EQ(dd->protocol, BulkProtocol::ActiveMessage);
  EXPECT_FALSE(decode_bulk_done(encode_bulk_done({5, 100, BulkProtocol::Auto}), &err));
}

TEST(BulkWire, FuzzDecoders) {
  std::mt19937_64 rng(777);
  const auto ticket = encode_ticket(sample_ticket());
  const auto block = encode_block_header({kToken, 5, 4096, 8192});
  const auto done = encode_bulk_done({5, 100, BulkProtocol::Put});
  std::string err;
  for (int i = 0; i < 5000; ++i) {
    auto mutate = [&](std::vector<std::byte> f) {
      if (rng() % 3 == 0) {
        f.resize(rng() % 96);
        for (auto& b : f) b = static_cast<std::byte>(rng());
      } else {
        f[rng() % f.size()] ^= static_cast<std::byte>(1u << (rng() % 8));
        if (rng() % 4 == 0) f.resize(rng() % (f.size() + 4));
      }
      return f;
    };
    const auto t = mutate(ticket);
    if (auto d = decode_ticket(t, &err)) ASSERT_EQ(encode_ticket(*d), t);
    const auto b = mutate(block);
    if (auto d = decode_block_header(b, &err)) ASSERT_EQ(encode_block_header(*d), b);
    const auto n = mutate(done);
    if (auto d = decode_bulk_done(n, &err)) ASSERT_EQ(encode_bulk_done(*d), n);
  }
}

TEST(BulkWire, ProtocolNames) {
  EXPECT_EQ(parse_bulk_protocol("put"), BulkProtocol::Put);
  EXPECT_EQ(parse_bulk_protocol("am"), BulkProtocol::ActiveMessage);
  EXPECT_EQ(parse_bulk_protocol("auto"), BulkProtocol::Auto);
  EXPECT_THROW(parse_bulk_protocol("rdma"), InputError);
  EXPECT_STREQ(to_string(BulkProtocol::ActiveMessage), "am");
}

}  // namespace
}  // namespace accel::transport
