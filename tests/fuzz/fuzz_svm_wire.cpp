// Distributed SVM's messages as a peer may send them, and its part of a
// coordinator checkpoint: the first byte picks the decoder (decision,
// report, shared state, parameters, solved problems, or the training set:
// LIBSVM text, as the coordinator pushes it to workers), the rest is the
// payload. Any bytes decode or throw one InputError.
#include <span>

#include "accel/csr.hpp"
#include "accel/error.hpp"
#include "svm/svm_wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::span<const std::byte> p(reinterpret_cast<const std::byte*>(data) + 1, size - 1);
  constexpr std::int64_t kMaxVars = 1 << 16;
  namespace w = accel::cluster::svm_wire;
  try {
    switch (data[0] % 6) {
      case 0: (void)w::decode_decision(p, kMaxVars); break;
      case 1: (void)w::decode_report(p, kMaxVars); break;
      case 2: (void)w::decode_shared(p, kMaxVars); break;
      case 3: (void)w::decode_params(p); break;
      case 4: (void)w::decode_solved(p, kMaxVars); break;
      default: (void)accel::parse_libsvm_csr(p, "pushed"); break;
    }
  } catch (const accel::InputError&) {
  }
  return 0;
}
