// The batched working-set solver (Wen et al., "ThunderSVM: A Fast SVM
// Library on GPUs and CPUs", JMLR 2018, Sec. 3) as one loop over a source
// of its O(n) work. Internal to host/algorithms/svm.
//
// Each round the loop (batch_solver.cpp):
//  1. applies the shrinking rule when its period has passed, and the
//     stopping test (reconstructing shrunk gradients when the shrunk
//     problem looks solved);
//  2. selects a working set of q variables: the maximal violating pair,
//     q/2 new candidates taken alternately from the best of I_up and I_low,
//     and the rest kept from the previous set (free multipliers first);
//  3. gets the set's q x q kernel block from the source;
//  4. solves the q-sized subproblem on it (solve_subproblem);
//  5. hands the new multipliers to the source, which updates the gradients.
//
// The source holds the gradients of the variables and their kernel rows:
//  - LocalSource (local_source.cpp): this process's State and KernelRows
//    (solve_batch);
//  - the members of a cluster job (member_source.cpp), each holding a range
//    of rows, asked round by round (svm_parallel::solve_distributed): the
//    parallel SMO of [Narasimhan14].
// A source's operations are tasks: the local ones never wait, so the loop
// runs straight through; the members' wait for a round of the engine.
#pragma once

#include <cstdint>
#include <vector>

#include "accel/svm.hpp"
#include "accel/task.hpp"
#include "solver_state.hpp"

namespace accel::svm_detail {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // The problem starts at s (the loop's state: alpha always, G where the
  // source keeps it). s outlives every later call.
  virtual Task<void> start(State& s, std::int64_t q) = 0;
  virtual std::int64_t active() const = 0;  // active variables, in all
  // Extremes of -gamma over the active variables: of one sign of y (0:
  // all), and the pair to work on (working_extremes).
  virtual Extremes extremes(int sign) const = 0;
  virtual Extremes working() const = 0;
  // Seed eq. 10 with the global extremes.
  virtual Task<void> shrink(double gmax, double gmin) = 0;
  // Algorithm 6 for every shrunk variable; all active again.
  virtual Task<void> reconstruct() = 0;
  // The q best candidates of I_up and of I_low over the active variables,
  // best first (best_up, best_low).
  virtual void candidates(std::size_t q, Candidates& up, Candidates& low) = 0;
  // Whether a variable of the last working set may stay in the next.
  virtual bool kept(std::int32_t k) const = 0;
  // G_k of a variable the latest candidates(), extremes or kept set named.
  virtual double gradient(std::int32_t k) const = 0;
  virtual double diag(std::int32_t k) const = 0;  // K(x_k, x_k)
  // Kws[a * w + b] = K(x_ws[a], x_ws[b]), w = ws.size().
  virtual Task<void> block(const std::vector<std::int32_t>& ws, std::vector<float>& Kws) = 0;
  // The working set's multipliers move to alpha: into s, and the
  // gradients of the active variables follow.
  virtual Task<void> step(const std::vector<std::int32_t>& ws, const std::vector<double>& alpha) = 0;
  // After the last round: s.G as exact as the source keeps it.
  virtual Task<void> finish() = 0;
  // The source's own counters (the kernel cache's).
  virtual void stats(BinaryStats& st) const { (void)st; }
};

// One dual problem by the batched solver over `src`. pb, params, src and
// times outlive the task.
Task<BinarySolution> solve_batch_with(const DualProblem& pb, const SvmParams& params, BatchSource& src,
                                      SvmTimes& times);

// The local source over kr's variables.
class LocalSource final : public BatchSource {
 public:
  explicit LocalSource(KernelRows& kr) : kr_(kr) {}
  Task<void> start(State& s, std::int64_t q) override;
  std::int64_t active() const override { return static_cast<std::int64_t>(s_->active.size()); }
  Extremes extremes(int sign) const override { return svm_detail::extremes(*s_, sign); }
  Extremes working() const override { return working_extremes(*s_); }
  Task<void> shrink(double gmax, double gmin) override;
  Task<void> reconstruct() override;
  void candidates(std::size_t q, Candidates& up, Candidates& low) override;
  bool kept(std::int32_t k) const override { return slot_[k] >= 0; }
  double gradient(std::int32_t k) const override { return s_->G[k]; }
  double diag(std::int32_t k) const override { return kr_.diag(k); }
  Task<void> block(const std::vector<std::int32_t>& ws, std::vector<float>& Kws) override;
  Task<void> step(const std::vector<std::int32_t>& ws, const std::vector<double>& alpha) override;
  Task<void> finish() override;
  void stats(BinaryStats& st) const override;

 private:
  void index_slots();
  void gather(const std::vector<std::int32_t>& ws, std::vector<float>& Kws);

  KernelRows& kr_;
  State* s_ = nullptr;
  std::vector<std::int32_t> slot_;  // per variable: its slot in s.active, or -1
  std::vector<const float*> rows_;  // the last block's kernel rows, for its step
  std::vector<double> c_, acc_;
  std::int64_t computed0_ = 0, hits0_ = 0, misses0_ = 0;
};

}  // namespace accel::svm_detail
