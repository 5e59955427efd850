// The types LIBSVM solves as one dual problem over all rows
// (svm.cpp's solve_one_class, solve_epsilon_svr, solve_nu_svr):
//  - one-class: y = +1, p = 0, bounds 1, starting from nu*l multipliers at
//    their bound (the last one fractional);
//  - epsilon-SVR: 2l variables, a_i (y = +1, p = eps - z_i) and a*_i
//    (y = -1, p = eps + z_i) over the same row, bounds C; coefficient
//    a_i - a*_i;
//  - nu-SVR: the same variables with p = -z_i / +z_i, starting from
//    C*nu*l/2 of mass on each side, Solver_NU.
// The model holds the rows with a nonzero coefficient, in data order.
#include <algorithm>
#include <cmath>

#include <numeric>

#include "accel/error.hpp"
#include "solver_state.hpp"
#include "svm_types.hpp"

namespace accel::svm_detail {
namespace {

DualProblem one_class(const SvmParams& params, std::int64_t n) {
  DualProblem pb;
  pb.y.assign(n, 1);
  pb.p.assign(n, 0.0);
  pb.alpha0.assign(n, 0.0);
  const double mass = params.nu * double(n);
  const std::int64_t whole = static_cast<std::int64_t>(mass);
  for (std::int64_t i = 0; i < std::min(whole, n); ++i) pb.alpha0[i] = 1;
  if (whole < n) pb.alpha0[whole] = mass - double(whole);
  return pb;
}

DualProblem regression(const SvmParams& params, const std::vector<double>& z) {
  const std::size_t n = z.size();
  DualProblem pb;
  pb.y.resize(2 * n);
  pb.p.resize(2 * n);
  pb.Cp = pb.Cn = params.C;
  const bool nu = params.type == SvmType::NuSvr;
  pb.nu = nu;
  if (nu) pb.alpha0.assign(2 * n, 0.0);
  double sum = params.C * params.nu * double(n) / 2;
  for (std::size_t i = 0; i < n; ++i) {
    pb.y[i] = 1;
    pb.y[i + n] = -1;
    pb.p[i] = (nu ? 0.0 : params.p) - z[i];
    pb.p[i + n] = (nu ? 0.0 : params.p) + z[i];
    if (nu) {
      pb.alpha0[i] = pb.alpha0[i + n] = std::min(sum, params.C);
      sum -= pb.alpha0[i];
    }
  }
  return pb;
}

// The model of the solution: the rows with a nonzero coefficient, in data
// order; nSV and nBSV as LIBSVM counts them, over the merged coefficients.
SvmModel single_model(const LabeledCsr& data, const SvmParams& params, BinarySolution& sol) {
  const std::int64_t n = data.x.rows;
  const bool regress = is_regression(params.type);
  const double bound = regress ? params.C : 1.0;
  sol.stats.n_sv = sol.stats.n_bsv = 0;
  SvmModel model;
  model.params = params;
  model.rho = {sol.stats.rho};
  model.coef.assign(1, {});
  for (std::int64_t i = 0; i < n; ++i) {
    const double coef = regress ? sol.alpha[i] - sol.alpha[i + n] : sol.alpha[i];
    if (coef == 0) continue;
    ++sol.stats.n_sv;
    if (std::abs(coef) >= bound) ++sol.stats.n_bsv;
    model.sv.add_row_from(data.x, i);
    model.sv_rows.push_back(i);
    model.coef[0].push_back(coef);
  }
  model.sv.cols = data.x.cols;
  return model;
}

}  // namespace

Task<SvmModel> train_single(const LabeledCsr& data, const SvmParams& params, const std::vector<Device*>& devices,
                            SvmTrainReport& rep, SvmObserver& observer) {
  const std::int64_t n = data.x.rows;
  const bool regress = is_regression(params.type);
  std::vector<std::int32_t> row_of;
  if (regress) {
    row_of.resize(2 * n);
    for (std::int64_t i = 0; i < 2 * n; ++i) row_of[i] = static_cast<std::int32_t>(i % n);
  }
  DualProblem pb = regress ? regression(params, data.labels) : one_class(params, n);
  pb.rows = row_of;
  if (pb.rows.empty()) {
    pb.rows.resize(n);
    std::iota(pb.rows.begin(), pb.rows.end(), 0);
  }
  KernelRows kr(data.x, params, devices, std::move(row_of));
  BinarySolution sol = co_await observer.solve(pb, params, kr, rep.times);
  SvmModel model = single_model(data, params, sol);
  if (params.probability && regress) model.probA = {regression_sigma(data, params, devices)};
  rep.problems.push_back(sol.stats);
  observer.solved(sol.stats);
  co_return model;
}

}  // namespace accel::svm_detail
