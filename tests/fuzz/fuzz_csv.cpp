// CSV reader: any bytes are a matrix or one InputError.
#include "accel/error.hpp"
#include "accel/io.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    (void)accel::read_csv(accel::fuzz::as_file(data, size, ".csv"));
  } catch (const accel::InputError&) {
  }
  return 0;
}
