// IDX reader (Fashion-MNIST's format): any bytes are a matrix or one InputError.
#include "accel/error.hpp"
#include "accel/io.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    (void)accel::read_idx(accel::fuzz::as_file(data, size, ".idx"));
  } catch (const accel::InputError&) {
  }
  return 0;
}
