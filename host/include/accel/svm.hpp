// C-SVC training by SMO with adaptive shrinking ([Narasimhan14]: Narasimhan,
// Vishnu, Holder, Hoisie, "Fast Support Vector Machines Using Parallel
// Adaptive Shrinking on Distributed Systems", 2014; docs/references.md) and
// LIBSVM-compatible models. Conventions are LIBSVM's: the dual is
//   min f(a) = 1/2 a'Qa - e'a,  0 <= a_i <= C,  y'a = 0,  Q_ij = y_i y_j K_ij,
// G = Qa - e its gradient, and [Narasimhan14]'s gamma_i = y_i G_i. The decision
// function is sum_j coef_j K(x_j, x) - rho with coef_j = y_j a_j.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "accel/csr.hpp"
#include "accel/device.hpp"
#include "accel/kernels.hpp"
#include "accel/task.hpp"

namespace accel {

// When to shrink (Narasimhan et al. 2014 Table 3): every `every` iterations, a fixed count
// ("2", "500", "1000") or a fraction of the samples ("5pc", "10pc", "50pc");
// Single reconstructs the gradient once and then optimises unshrunk, Multi
// keeps shrinking and reconstructs each time the shrunk problem converges.
struct ShrinkHeuristic {
  enum class Kind { None, Single, Multi, Auto } kind = Kind::None;
  std::int64_t every = 0;     // iterations, when fraction == 0
  double fraction = 0;        // of n, when > 0
  std::string name = "none";
  std::int64_t period(std::int64_t n) const;
};
// "none", "single2" ... "single50pc", "multi2" ... "multi50pc", "auto";
// InputError otherwise.
ShrinkHeuristic parse_shrink(const std::string& name);
// The heuristic "auto" stands for with n samples: none when the kernel cache
// holds full rows of at least n/8 samples (the support vectors' rows then
// stay cached, and a reconstruction would cost more than shrinking saves;
// Fashion-MNIST has 10-16% support vectors), else multi2. Other heuristics
// are returned as they are.
ShrinkHeuristic resolve_shrink(const ShrinkHeuristic& h, double cache_mb, std::int64_t n);
std::vector<std::string> shrink_heuristic_names();

enum class WorkingSet { FirstOrder, SecondOrder };

// Batch: working sets of ws_size samples per round, their kernel rows in one
// launch (Wen et al., "ThunderSVM: A Fast SVM Library on GPUs and CPUs",
// JMLR 2018). Pair: one pair per iteration, [Narasimhan14]'s SMO, kept as the
// reference.
enum class Solver { Batch, Pair };

// LIBSVM's -s: the problem solved.
enum class SvmType { CSvc = 0, NuSvc = 1, OneClass = 2, EpsilonSvr = 3, NuSvr = 4 };
bool is_classification(SvmType t);  // C-SVC, nu-SVC: labels are classes
bool is_regression(SvmType t);      // epsilon-SVR, nu-SVR
const char* model_type_name(SvmType t);  // LIBSVM's svm_type names: c_svc, nu_svc, ...

struct DualProblem;
struct BinarySolution;
class KernelRows;
class SvmObserver;

struct SvmParams {
  SvmType type = SvmType::CSvc;
  KernelType kernel = KernelType::Rbf;
  int degree = 3;
  double gamma = 0;  // 0: 1 / number of features, as LIBSVM
  double coef0 = 0;
  double C = 1;
  double nu = 0.5;  // nu-SVC, one-class, nu-SVR
  double p = 0.1;   // epsilon of epsilon-SVR's loss
  std::vector<std::pair<int, double>> weights;  // C-SVC: class label -> factor of C (LIBSVM's -wi)
  bool probability = false;  // LIBSVM's -b 1: fit probability estimates (classification, regression)
  double eps = 1e-3;  // LIBSVM's -e: stop when beta_low - beta_up <= eps ([Narasimhan14]'s 2*epsilon)
  double cache_mb = 100;
  ShrinkHeuristic shrink;
  WorkingSet wss = WorkingSet::FirstOrder;
  Solver solver = Solver::Batch;
  std::int64_t ws_size = 0;  // batch working-set size q; 0: chosen from n and the cache
  // Classification: classes in ascending label order (scikit-learn's)
  // instead of LIBSVM's order of first appearance.
  bool sorted_classes = false;
};

// Seconds spent per phase of the solver, summed over every binary problem.
struct SvmTimes {
  double kernel = 0;       // kernel rows (devices + cache)
  double select = 0;       // working-set selection and the stopping test
  double update = 0;       // gradient (gamma) update of the active samples
  double shrink = 0;       // applying the shrinking rule
  double reconstruct = 0;  // gradient reconstruction (Narasimhan et al. 2014 Algorithm 6)
  double total = 0;
};

struct BinaryStats {
  int class_a = 0, class_b = 0;  // labels of the +1 and -1 sides
  std::int64_t iterations = 0, n = 0, n_sv = 0, n_bsv = 0;  // iterations: pair updates
  std::int64_t rounds = 0, ws_size = 0;  // kernel-row rounds (= iterations for the pair solver), q
  double obj = 0, rho = 0;
  double r = 0;  // nu forms: LIBSVM's r (nu-SVC divides by it; nu-SVR reports -r as epsilon)
  int reconstructions = 0;
  std::string shrink;  // the heuristic used (auto resolved)
  std::int64_t cache_hits = 0, cache_misses = 0;
  std::int64_t prefetched = 0, prefetch_used = 0;  // rows computed ahead, and of those asked for later
  std::int64_t min_active = 0;
  std::int64_t kernel_values = 0;  // computed on the devices (cache misses and reconstruction)
};

struct SvmModel {
  SvmParams params;                        // type, kernel and its parameters
  std::vector<int> labels;                 // class order of the model (classification only)
  std::vector<double> rho;                 // one per class pair, LIBSVM order (one for the others)
  std::vector<std::int64_t> n_sv;          // support vectors per class (classification only)
  CsrMatrix sv;                            // support vectors, grouped by class
  std::vector<std::vector<double>> coef;   // (classes - 1) rows of sv.rows coefficients (one for the others)
  // -b 1: Platt's A and B per class pair (classification), or the Laplace
  // scale sigma of the residuals in probA[0] (regression); empty otherwise.
  std::vector<double> probA, probB;
  // The training row of each support vector (empty for a model read from
  // a file: LIBSVM's format does not keep them).
  std::vector<std::int64_t> sv_rows;
};

struct SvmTrainReport {
  std::vector<BinaryStats> problems;
  SvmTimes times;
};

// Trains params.type (classification one-against-one for more than two
// classes) on the given devices, which must all support csr_kernel_rows.
// Throws InputError for parameters or data the type cannot train on (one
// class, non-integer labels, an infeasible nu); a weight for an absent class
// is a warning on stderr, as in LIBSVM. An observer hears of each problem
// solved (and may solve them itself: svm_train_steps).
SvmModel svm_train(const LabeledCsr& data, const SvmParams& params, const std::vector<Device*>& devices,
                   SvmTrainReport* report = nullptr, SvmObserver* observer = nullptr);
// Throws InputError naming the option when params are out of range.
void check_svm_params(const SvmParams& params);

// Predicted labels (classification, one-class: +1 / -1) or values
// (regression) for the rows of x.
std::vector<double> svm_predict(const SvmModel& model, const CsrMatrix& x, const std::vector<Device*>& devices);

// Decision values of the rows of x: k(k-1)/2 per row for classification
// (LIBSVM's pair order: (0,1), (0,2), ..., pair (a,b) positive for class
// a), one per row otherwise (sum coef K - rho).
std::vector<double> svm_decision_values(const SvmModel& model, const CsrMatrix& x, const std::vector<Device*>& devices);

// Probabilities per class (rows x classes, the model's label order) and the
// most probable label, for a classification model trained with -b 1;
// InputError for a model without them.
struct ProbabilityPrediction {
  std::vector<double> labels, probabilities;
};
ProbabilityPrediction svm_predict_probability(const SvmModel& model, const CsrMatrix& x,
                                              const std::vector<Device*>& devices);

// LIBSVM's -v: trains on folds-1 parts and predicts the held-out one, for
// each of `folds` parts (stratified by class for classification, a fixed
// shuffle otherwise); returns the prediction for every row.
std::vector<double> svm_cross_validation(const LabeledCsr& data, const SvmParams& params, int folds,
                                         const std::vector<Device*>& devices);

// LIBSVM's model text format, read and written (every type).
void write_svm_model(const std::string& path, const SvmModel& model);
SvmModel read_svm_model(const std::string& path);

// ---- the pieces, exposed for tests ----

// Kernel rows of one CSR matrix on one or more devices, with an optional LRU
// cache of whole rows (Narasimhan et al. 2014 runs without one; LIBSVM's -m sizes it).
class KernelRows {
 public:
  // row_of maps the solver's variables to rows of x (epsilon-SVR's two
  // variables per sample); empty: variable i is row i.
  KernelRows(const CsrMatrix& x, const SvmParams& params, const std::vector<Device*>& devices,
             std::vector<std::int32_t> row_of = {});
  ~KernelRows();
  KernelRows(const KernelRows&) = delete;
  KernelRows& operator=(const KernelRows&) = delete;

  // The samples later rows() calls are computed over, sorted ascending
  // (shrinking filters them, reconstruction restores all).
  void set_active(const std::vector<std::int32_t>& active);
  // One compact row per query over the active set: row[b] = K(x_q, x_active[b]),
  // from the cache or computed together in launches of up to 256 rows per
  // device. Pointers stay valid until the second rows() call after this one
  // (see set_held_calls). When a row has
  // to be computed, uncached `prefetch` rows are computed in the same launch
  // (up to four rows in all) and cached.
  std::vector<const float*> rows(const std::vector<std::int32_t>& queries,
                                 const std::vector<std::int32_t>& prefetch = {});
  // How many of the latest rows() calls keep their rows alive (default 2,
  // the behaviour described above; 1 when a caller is done with a call's
  // rows once it makes the next).
  void set_held_calls(int calls);
  // Dot products in double on every device (csr_kernel_rows' exact): what
  // prediction asks for, so that labels match LIBSVM's on borderline rows.
  void set_exact(bool exact);
  // Uncached: out[a*m + b] = K(x_queries[a], x_targets[b]).
  void compute(const std::vector<std::int32_t>& queries, const std::vector<std::int32_t>& targets, float* out);
  // Values the caller computed (gradient reconstruction: K(x_q, x_t) for every
  // shrunk t, targets sorted) are merged into the cached rows of these
  // queries, so those rows need nothing computed when the samples return.
  void complete_rows(const std::vector<std::int32_t>& queries, const std::vector<std::int32_t>& targets,
                     const float* values);
  // K(x_i, x_i)
  double diag(std::int64_t i) const { return diag_[i]; }

  // A member of a distributed solve holds its own rows and, behind them,
  // guest rows of other members' variables that it was sent (the working
  // set's, the support vectors' for a reconstruction), which change round
  // by round. x's rows from `first` on changed (rows may have been added
  // or dropped at its end): their norms and the devices' copies follow.
  // Cached rows stay: they are kept by variable, whatever row holds it.
  void rows_changed(std::int64_t first);
  // Variable v's row of x is now `row` (-1: none; it is not asked for).
  void remap(std::int32_t v, std::int32_t row);

  std::int64_t hits() const { return hits_; }
  std::int64_t misses() const { return misses_; }
  std::int64_t prefetched() const { return prefetched_; }        // rows computed ahead
  std::int64_t prefetch_used() const { return prefetch_used_; }  // of which later asked for
  std::int64_t computed() const;  // kernel values computed on the devices, in all

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<double> diag_;
  std::int64_t hits_ = 0, misses_ = 0, prefetched_ = 0, prefetch_used_ = 0;
};

// One dual problem in LIBSVM's general form, over the variables of a
// KernelRows:
//   min 1/2 a'Qa + p'a,  0 <= a_i <= (y_i > 0 ? Cp : Cn),  y'a fixed,
//   Q_ij = y_i y_j K_ij.
// C-SVC: p = -1, a0 = 0. One-class, nu-SVC and nu-SVR start from a feasible
// a0; nu marks LIBSVM's Solver_NU (y'a and e'a both fixed: each step moves
// a pair with the same y).
struct DualProblem {
  std::vector<std::int8_t> y;
  std::vector<double> p;
  std::vector<double> alpha0;  // empty: all zero
  double Cp = 1, Cn = 1;
  bool nu = false;
  // The training set's row of each variable (multi-class pairs take a
  // subset, epsilon-SVR two variables per row); empty: variable i is row i.
  std::vector<std::int32_t> rows;
  static DualProblem c_svc(const std::vector<std::int8_t>& y, double C);
};

// The SMO solver for one dual problem: params.solver picks solve_batch or
// solve_pair.
struct BinarySolution {
  std::vector<double> alpha;
  BinaryStats stats;
};
BinarySolution solve_binary(const DualProblem& problem, const SvmParams& params, KernelRows& kernel,
                            SvmTimes& times);
BinarySolution solve_pair(const DualProblem& problem, const SvmParams& params, KernelRows& kernel,
                          SvmTimes& times);
BinarySolution solve_batch(const DualProblem& problem, const SvmParams& params, KernelRows& kernel,
                           SvmTimes& times);
// What a training tells its caller, and who solves its dual problems.
class SvmObserver {
 public:
  virtual ~SvmObserver() = default;
  // After each dual problem (progress reports).
  virtual void solved(const BinaryStats& stats) { (void)stats; }
  // One dual problem: solve_binary on this process. The cluster's SVM job
  // solves it across its members instead, pausing between their rounds.
  // pb, params, kr and times outlive the task.
  virtual Task<BinarySolution> solve(const DualProblem& pb, const SvmParams& params, KernelRows& kr,
                                     SvmTimes& times);
};
// svm_train as a task that pauses where the observer's solve() does (the
// cluster engine resumes it round by round). data and observer outlive it.
Task<SvmModel> svm_train_steps(const LabeledCsr& data, SvmParams params, std::vector<Device*> devices,
                               SvmObserver& observer, SvmTrainReport* report = nullptr);
// C-SVC with labels y (+1/-1) and params.C.
BinarySolution solve_binary(const std::vector<std::int8_t>& y, const SvmParams& params, KernelRows& kernel,
                            SvmTimes& times);
// The working-set size solve_batch uses for n samples.
std::int64_t batch_ws_size(const SvmParams& params, std::int64_t n);

}  // namespace accel
