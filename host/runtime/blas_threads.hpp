#pragma once

#include <cblas.h>

namespace accel {

// OpenBLAS's thread count for one scope (the cpu driver's and the k-means
// seeding's one-thread sgemm inside their own parallel regions), restored on every way out of it
// (the save/restore pairs it replaces left the count changed for the whole
// process when anything between them threw).
class BlasThreads {
 public:
  explicit BlasThreads(int n) : saved_(openblas_get_num_threads()) { openblas_set_num_threads(n); }
  ~BlasThreads() { openblas_set_num_threads(saved_); }
  BlasThreads(const BlasThreads&) = delete;
  BlasThreads& operator=(const BlasThreads&) = delete;

 private:
  int saved_;
};

}  // namespace accel
