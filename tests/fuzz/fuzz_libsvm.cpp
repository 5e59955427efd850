// LIBSVM readers, sparse (svm-train) and dense (k-means): any bytes are a
// training set or one InputError.
#include "accel/csr.hpp"
#include "accel/error.hpp"
#include "accel/io.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = accel::fuzz::as_file(data, size, ".libsvm");
  try {
    (void)accel::read_libsvm_csr(path);
  } catch (const accel::InputError&) {
  }
  try {
    (void)accel::read_libsvm_dense(path);
  } catch (const accel::InputError&) {
  }
  return 0;
}
