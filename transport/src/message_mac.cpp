#include "accel/transport/message_mac.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <climits>
#include <memory>
#include <stdexcept>

namespace accel::transport {
namespace {

constexpr std::size_t kNonce = 12, kTag = 16;
static_assert(kNonce + kTag == kControlSealBytes);

using Ctx = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

// GMAC: AES-128-GCM with the message as associated data and no plaintext.
bool gmac(const MacKey& key, const std::byte* nonce, std::span<const std::byte> header,
          std::span<const std::byte> payload, std::byte* tag, bool verify) {
  Ctx ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  if (!ctx) return false;
  const auto* k = reinterpret_cast<const unsigned char*>(key.data());
  const auto* iv = reinterpret_cast<const unsigned char*>(nonce);
  int len = 0;
  auto aad = [&](std::span<const std::byte> b) {
    return b.size() <= INT_MAX && (b.empty() || (verify ? EVP_DecryptUpdate : EVP_EncryptUpdate)(
                                                     ctx.get(), nullptr, &len,
                                                     reinterpret_cast<const unsigned char*>(b.data()),
                                                     static_cast<int>(b.size())) == 1);
  };
  auto* t = reinterpret_cast<unsigned char*>(tag);
  if (verify) {
    return EVP_DecryptInit_ex(ctx.get(), EVP_aes_128_gcm(), nullptr, k, iv) == 1 && aad(header) && aad(payload) &&
           EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTag, t) == 1 &&
           EVP_DecryptFinal_ex(ctx.get(), nullptr, &len) == 1;
  }
  return EVP_EncryptInit_ex(ctx.get(), EVP_aes_128_gcm(), nullptr, k, iv) == 1 && aad(header) && aad(payload) &&
         EVP_EncryptFinal_ex(ctx.get(), nullptr, &len) == 1 &&
         EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTag, t) == 1;
}

}  // namespace

ControlSeal seal_control(const MacKey& key, std::span<const std::byte> header, std::span<const std::byte> payload) {
  ControlSeal s{};
  if (RAND_bytes(reinterpret_cast<unsigned char*>(s.data()), kNonce) != 1)
    throw std::runtime_error("no random bytes for a message nonce");
  if (!gmac(key, s.data(), header, payload, s.data() + kNonce, false))
    throw std::runtime_error("sealing a control message failed (OpenSSL AES-GCM)");
  return s;
}

bool verify_control(const ControlMessage& m, const MacKey& key) {
  if (!m.seal) return false;
  ControlSeal s = *m.seal;  // the tag is handed to OpenSSL, which may not take it const
  return gmac(key, s.data(), m.raw_header, m.payload, s.data() + kNonce, true);
}

}  // namespace accel::transport
