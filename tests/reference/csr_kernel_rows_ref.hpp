// Plain reference for csr_kernel_rows (tests only): densify both rows and
// evaluate LIBSVM's kernel formulas in double, with ||u - v||^2 summed
// directly rather than through norms.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "accel/csr.hpp"
#include "accel/kernels.hpp"

namespace accel::ref {

inline std::vector<double> dense_row(const CsrMatrix& x, std::int64_t i) {
  std::vector<double> r(x.cols, 0.0);
  for (std::int64_t k = x.row_ptr[i]; k < x.row_ptr[i + 1]; ++k) r[x.col_idx[k]] = x.values[k];
  return r;
}

inline double kernel(const std::vector<double>& u, const std::vector<double>& v, KernelType type, double gamma,
                     double coef0, int degree) {
  double dot = 0, d2 = 0;
  for (std::size_t j = 0; j < u.size(); ++j) {
    dot += u[j] * v[j];
    d2 += (u[j] - v[j]) * (u[j] - v[j]);
  }
  switch (type) {
    case KernelType::Linear: return dot;
    case KernelType::Polynomial: return std::pow(gamma * dot + coef0, degree);
    case KernelType::Rbf: return std::exp(-gamma * d2);
    case KernelType::Sigmoid: return std::tanh(gamma * dot + coef0);
  }
  return 0;
}

// out[a*m + b] = K(x_{queries[a]}, x_{active[b]})
inline std::vector<double> csr_kernel_rows(const CsrMatrix& x, const std::vector<std::int32_t>& queries,
                                           const std::vector<std::int32_t>& active, KernelType type, double gamma,
                                           double coef0, int degree) {
  std::vector<double> out(queries.size() * active.size());
  std::vector<std::vector<double>> act;
  for (auto i : active) act.push_back(dense_row(x, i));
  for (std::size_t a = 0; a < queries.size(); ++a) {
    const auto u = dense_row(x, queries[a]);
    for (std::size_t b = 0; b < active.size(); ++b) out[a * active.size() + b] = kernel(u, act[b], type, gamma, coef0, degree);
  }
  return out;
}

}  // namespace accel::ref
