#pragma once

#include <cblas.h>
#include <omp.h>

namespace accel {

// OpenBLAS's thread count for one scope (the cpu driver's and the k-means
// seeding's one-thread sgemm inside their own parallel regions), restored on every way out of it
// (the save/restore pairs it replaces left the count changed for the whole
// process when anything between them threw).
// Meant for n = 1 (one-thread sgemm inside the caller's own parallel
// regions). OpenBLAS's OpenMP build sets OpenMP's count as well, so every
// parallel region opened in the scope without num_threads ran on one
// thread (k-means|| rounds did, at half a Lloyd iteration's speed on 2
// cores); OpenMP's count is put back at once. That build runs sgemm on the
// calling thread inside a parallel region anyway, and follows OpenMP's
// count again on its next call outside one.
class BlasThreads {
 public:
  explicit BlasThreads(int n) : saved_(openblas_get_num_threads()), omp_(omp_get_max_threads()) {
    openblas_set_num_threads(n);
    omp_set_num_threads(omp_);
  }
  ~BlasThreads() {
    openblas_set_num_threads(saved_);
    omp_set_num_threads(omp_);
  }
  BlasThreads(const BlasThreads&) = delete;
  BlasThreads& operator=(const BlasThreads&) = delete;

 private:
  int saved_;
  int omp_;
};

}  // namespace accel
