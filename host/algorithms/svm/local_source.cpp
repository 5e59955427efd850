// The batched solver's source on this process (batch_solver.hpp): every
// gradient in the loop's State, kernel rows from a KernelRows. Its
// operations never wait.
#include <algorithm>
#include <numeric>

#include "batch_solver.hpp"

namespace accel::svm_detail {

Task<void> LocalSource::start(State& s, std::int64_t) {
  s_ = &s;
  kr_.set_active(s.active);
  if (std::any_of(s.alpha.begin(), s.alpha.end(), [](double a) { return a != 0; })) add_initial_gradient(s, kr_);
  kr_.set_held_calls(1);  // a round is done with its rows when the next asks for its own
  computed0_ = kr_.computed();
  hits0_ = kr_.hits();
  misses0_ = kr_.misses();
  index_slots();
  co_return;
}

void LocalSource::index_slots() {
  slot_.assign(s_->y.size(), -1);
  for (std::size_t b = 0; b < s_->active.size(); ++b) slot_[s_->active[b]] = static_cast<std::int32_t>(b);
}

Task<void> LocalSource::shrink(double gmax, double gmin) {
  const std::size_t before = s_->active.size();
  Extremes e;
  e.gmax = gmax;
  e.gmin = gmin;
  svm_detail::shrink(*s_, e);
  if (s_->active.size() != before) {
    kr_.set_active(s_->active);
    index_slots();
  }
  co_return;
}

Task<void> LocalSource::reconstruct() {
  svm_detail::reconstruct(*s_, kr_);
  s_->active.resize(s_->y.size());
  std::iota(s_->active.begin(), s_->active.end(), 0);
  kr_.set_active(s_->active);
  index_slots();
  co_return;
}

void LocalSource::candidates(std::size_t q, Candidates& up, Candidates& low) {
  for (const std::int32_t k : s_->active) {
    if (s_->in_up(k)) up.emplace_back(s_->v(k), k);
    if (s_->in_low(k)) low.emplace_back(s_->v(k), k);
  }
  best_up(up, q);
  best_low(low, q);
}

// Not in the coroutine: GCC 12 cannot compile an OpenMP loop inside one.
void LocalSource::gather(const std::vector<std::int32_t>& ws, std::vector<float>& Kws) {
  rows_ = kr_.rows(ws);
  const std::size_t w = ws.size();
  Kws.resize(w * w);
  // w^2 gathers from w rows of n values: cache misses, shared by threads.
#pragma omp parallel for schedule(static) if (w >= 64)
  for (std::size_t a = 0; a < w; ++a)
    for (std::size_t b = 0; b < w; ++b) Kws[a * w + b] = rows_[a][slot_[ws[b]]];
}

Task<void> LocalSource::block(const std::vector<std::int32_t>& ws, std::vector<float>& Kws) {
  gather(ws, Kws);
  co_return;
}

// G_k += y_k sum_a c_a K(x_ws[a], x_k) over every active k, c_a = y_a d_alpha_a.
Task<void> LocalSource::step(const std::vector<std::int32_t>& ws, const std::vector<double>& alpha) {
  State& s = *s_;
  c_.resize(ws.size());
  for (std::size_t a = 0; a < ws.size(); ++a) {
    c_[a] = s.y[ws[a]] * (alpha[a] - s.alpha[ws[a]]);
    s.alpha[ws[a]] = alpha[a];
  }
  const std::int64_t m = static_cast<std::int64_t>(s.active.size());
  acc_.assign(m, 0.0);
  accumulate_rows(rows_, c_, m, acc_.data());
  for (std::int64_t b = 0; b < m; ++b) {
    const std::int32_t k = s.active[b];
    s.G[k] += s.y[k] * acc_[b];
  }
  co_return;
}

Task<void> LocalSource::finish() {
  kr_.set_held_calls(2);
  co_return;
}

void LocalSource::stats(BinaryStats& st) const {
  st.cache_hits = kr_.hits() - hits0_;
  st.cache_misses = kr_.misses() - misses0_;
  st.kernel_values = kr_.computed() - computed0_;
}

}  // namespace accel::svm_detail
