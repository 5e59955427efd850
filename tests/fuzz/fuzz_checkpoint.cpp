// The coordinator's checkpoint file: any bytes are a checkpoint or one
// InputError.
#include "accel/error.hpp"
#include "checkpoint.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    (void)accel::cluster::load_checkpoint(accel::fuzz::as_file(data, size, ".checkpoint"));
  } catch (const accel::InputError&) {
  }
  return 0;
}
