// The batched solver's loop over its source (batch_solver.hpp).
#include "batch_solver.hpp"

#include <algorithm>
#include <cstdio>

#include "accel/interrupt.hpp"

namespace accel::svm_detail {
namespace {

class BatchLoop {
 public:
  BatchLoop(const DualProblem& pb, const SvmParams& params, BatchSource& src, SvmTimes& times)
      : pb_(pb), params_(params), src_(src), times_(times), n_(static_cast<std::int64_t>(pb.y.size())),
        q_(batch_ws_size(params, n_)), s_(pb), ctl_(params, n_, false, pb.nu), in_ws_(n_, 0) {
    st_.n = n_;
    st_.min_active = n_;
    st_.ws_size = q_;
  }

  Task<BinarySolution> run() {
    const auto t_start = clock_type::now();
    co_await src_.start(s_, q_);
    const std::int64_t max_steps = std::max<std::int64_t>(10000000, n_ > INT32_MAX / 100 ? INT32_MAX : 100 * n_);
    std::int64_t steps = 0, last = 0;
    bool restored = false;
    while (steps < max_steps) {
      interruption_point();
      if (ctl_.shrink_due(last)) co_await shrink();
      auto t0 = clock_type::now();
      const Extremes e = src_.working();
      const auto verdict = ctl_.verdict(e, src_.active() == n_, st_);
      times_.select += since(t0);
      if (verdict == Control::Verdict::Done) break;
      if (verdict == Control::Verdict::Reconstruct) {
        t0 = clock_type::now();
        co_await src_.reconstruct();
        times_.reconstruct += since(t0);
        restored = true;
      }
      select(e, restored);
      restored = false;
      if (ws_.size() < 2) break;
      t0 = clock_type::now();
      co_await src_.block(ws_, Kws_);
      times_.kernel += since(t0);
      last = subproblem();
      t0 = clock_type::now();
      co_await src_.step(ws_, alpha_);
      times_.update += since(t0);
      steps += std::max<std::int64_t>(1, last);  // a round counts, so the limit holds
      ++st_.rounds;
    }
    if (steps >= max_steps)
      std::fprintf(stderr, "svm: reached the iteration limit %lld\n", static_cast<long long>(max_steps));
    co_await src_.finish();
    finish(s_, st_);
    st_.shrink = ctl_.heuristic().name;
    st_.iterations = steps;
    src_.stats(st_);
    times_.total += since(t_start);
    co_return BinarySolution{std::move(s_.alpha), st_};
  }

 private:
  Task<void> shrink() {
    const auto t0 = clock_type::now();
    const Extremes e = src_.extremes(0);
    co_await src_.shrink(e.gmax, e.gmin);
    st_.min_active = std::min(st_.min_active, src_.active());
    times_.shrink += since(t0);
  }

  // The next working set: the pair e, then the candidates (at least one new
  // sample from each side), then the kept ones.
  void select(const Extremes& e, bool restored) {
    const auto t0 = clock_type::now();
    const std::size_t qq = static_cast<std::size_t>(std::min(q_, src_.active()));
    Candidates up, low;
    src_.candidates(qq, up, low);
    const std::size_t fresh = ws_.empty() || restored ? qq : std::max<std::size_t>(2, qq / 2);
    ws_ = assemble_ws(
        up, low, e, qq, fresh, ws_, [&](std::int32_t k) { return src_.kept(k); },
        [&](std::int32_t k) { return s_.alpha[k] > 0 && s_.alpha[k] < s_.C(k); }, in_ws_);
    times_.select += since(t0);
  }

  // SMO on the working set's block; alpha_ its new multipliers. Returns the
  // pair updates made.
  std::int64_t subproblem() {
    const auto t0 = clock_type::now();
    const std::size_t w = ws_.size();
    DualProblem local;
    local.Cp = pb_.Cp;
    local.Cn = pb_.Cn;
    local.nu = pb_.nu;
    local.y.resize(w);
    local.p.assign(w, 0.0);  // the subproblem's linear term lives in its G
    diag_.resize(w);
    for (std::size_t a = 0; a < w; ++a) {
      local.y[a] = s_.y[ws_[a]];
      diag_[a] = src_.diag(ws_[a]);
    }
    State ls(local);
    for (std::size_t a = 0; a < w; ++a) {
      ls.alpha[a] = s_.alpha[ws_[a]];
      ls.G[a] = src_.gradient(ws_[a]);
    }
    const std::int64_t steps = solve_subproblem(ls, Kws_, diag_, params_);
    alpha_ = std::move(ls.alpha);
    times_.select += since(t0);
    return steps;
  }

  const DualProblem& pb_;
  const SvmParams& params_;
  BatchSource& src_;
  SvmTimes& times_;
  const std::int64_t n_, q_;
  State s_;
  Control ctl_;
  BinaryStats st_;
  std::vector<std::int32_t> ws_;
  std::vector<char> in_ws_;
  std::vector<float> Kws_;
  std::vector<double> diag_, alpha_;
};

}  // namespace

Task<BinarySolution> solve_batch_with(const DualProblem& pb, const SvmParams& params, BatchSource& src,
                                      SvmTimes& times) {
  BatchLoop loop(pb, params, src, times);
  co_return co_await loop.run();
}

}  // namespace accel::svm_detail

namespace accel {

BinarySolution solve_batch(const DualProblem& pb, const SvmParams& params, KernelRows& kr, SvmTimes& times) {
  svm_detail::LocalSource src(kr);
  return run_to_end(svm_detail::solve_batch_with(pb, params, src, times));
}

}  // namespace accel
