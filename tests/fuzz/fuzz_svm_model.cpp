// LIBSVM model reader (svm-predict's input): any bytes are a model or one InputError.
#include "accel/error.hpp"
#include "accel/svm.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    (void)accel::read_svm_model(accel::fuzz::as_file(data, size, ".model"));
  } catch (const accel::InputError&) {
  }
  return 0;
}
