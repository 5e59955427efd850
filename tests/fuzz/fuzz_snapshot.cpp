// A worker's snapshot file: any bytes are a snapshot, none, or one InputError.
#include "accel/error.hpp"
#include "fuzz_input.hpp"
#include "snapshot.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    (void)accel::cluster::load_snapshot(accel::fuzz::as_file(data, size, ".snapshot"));
  } catch (const accel::InputError&) {
  }
  return 0;
}
