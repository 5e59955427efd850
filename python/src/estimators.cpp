// The compute behind accel.sklearn's estimators: k-means fit and assignment,
// SVM training, decision values and probabilities. The Python layer
// validates inputs with scikit-learn's own checks and hands over float32
// C-contiguous rows (used in place: no copy) or a CSR matrix's three arrays
// (copied once into accel's CSR layout: int64 row pointers, int32 columns,
// float32 values). Every fit, prediction and conversion releases the GIL;
// Ctrl-C stops a fit on the main thread (where Python runs its signal
// handlers) at its next interruption point (accel/interrupt.hpp) with
// KeyboardInterrupt.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>

#include "accel/error.hpp"
#include "accel/interrupt.hpp"
#include "accel/kmeans.hpp"
#include "accel/registry.hpp"
#include "accel/svm.hpp"
#include "bindings.hpp"

namespace py = pybind11;

namespace {

using Rows = py::array_t<float, py::array::c_style>;

// Python's signal handlers run here (Ctrl-C sets KeyboardInterrupt).
bool python_interrupted() {
  py::gil_scoped_acquire gil;
  return PyErr_CheckSignals() != 0;
}

// f() with the GIL released and Ctrl-C checked at the computation's
// interruption points; an interruption raises the pending KeyboardInterrupt.
template <class F>
auto interruptible(F&& f) -> decltype(f()) {
  try {
    py::gil_scoped_release release;
    accel::InterruptScope scope(python_interrupted);
    return f();
  } catch (const accel::Interrupted&) {
    throw py::error_already_set();
  }
}

// Calls a Python progress callable (or nothing) from the computation's thread.
void report(const py::object& progress, const std::string& message) {
  if (progress.is_none()) return;
  py::gil_scoped_acquire gil;
  progress(message);
}

// The rows of a float32 C-contiguous (n, d) array, in place: the array is
// kept alive by the Matrix's view.
accel::Matrix view_rows(const Rows& x) {
  if (x.ndim() != 2) throw accel::InputError("expected a 2-D array");
  accel::Matrix m;
  m.rows = x.shape(0);
  m.cols = x.shape(1);
  auto* keep = new Rows(x);
  m.view = std::shared_ptr<const float>(x.data(), [keep](const float*) {
    py::gil_scoped_acquire gil;
    delete keep;
  });
  return m;
}

std::vector<accel::Device*> devices(const std::string& spec, accel::KernelId kernel) {
  return python_registry().select(spec, kernel);
}

// ---- k-means ----

py::dict kmeans_fit(const Rows& x, std::int64_t k, const std::string& init, std::optional<Rows> init_centers,
                    int max_iter, double tol, std::uint64_t seed, const std::string& algorithm,
                    const std::string& device, const py::object& progress) {
  accel::KMeansOptions o;
  o.k = k;
  o.max_iter = max_iter;
  o.tol = tol;
  o.init = init;
  o.seed = seed;
  o.algorithm = algorithm;
  accel::kmeans_uses_bounds(o.algorithm, 16);  // an unknown name before any work
  const accel::Matrix rows = view_rows(x);
  accel::Matrix start;
  if (init_centers && (init_centers->ndim() != 2 || init_centers->shape(0) != k || init_centers->shape(1) != rows.cols))
    throw accel::InputError("initial centers are not k x d");
  if (init_centers) {
    start.rows = init_centers->shape(0);
    start.cols = init_centers->shape(1);
    start.data.assign(init_centers->data(), init_centers->data() + init_centers->size());
  }
  accel::KMeansResult r = interruptible([&] {
    if (!init_centers) start = accel::kmeans_init(rows, o);
    const auto devs = accel::kmeans_capable(devices(device, accel::KernelId::KMeansAssign), k, rows.cols);
    accel::PerfModel model;
    return accel::kmeans(rows, start, o, devs, model, [&](const accel::KMeansIteration& it) {
      char line[160];
      std::snprintf(line, sizeof line, "iteration %d: inertia %.6g, largest center move %.3g, %.3f s", it.iteration,
                    it.inertia, it.max_shift, it.seconds);
      report(progress, line);
    });
  });
  py::dict out;
  out["centers"] = to_numpy(std::move(r.centroids.data), {r.centroids.rows, r.centroids.cols});
  out["labels"] = to_numpy(std::move(r.labels));
  out["inertia"] = r.inertia;
  out["n_iter"] = r.iterations;
  out["converged"] = r.converged;
  out["seconds"] = r.seconds;
  return out;
}

// Labels and inertia of x against fixed centers.
py::tuple kmeans_assign(const Rows& x, const Rows& centers, const std::string& device) {
  const accel::Matrix rows = view_rows(x);
  if (centers.ndim() != 2 || centers.shape(1) != rows.cols) throw accel::InputError("centers are not k x d");
  const std::int64_t k = centers.shape(0);
  std::vector<float> c(centers.data(), centers.data() + centers.size());
  std::vector<std::int32_t> labels(rows.rows);
  double inertia = interruptible([&] {
    const auto devs = accel::kmeans_capable(devices(device, accel::KernelId::KMeansAssign), k, rows.cols);
    accel::PerfModel model;
    accel::PartialAssigner a(rows.values(), rows.rows, rows.cols, k, devs, model);
    const double i = a.step(c).inertia;
    a.labels(labels.data());
    return i;
  });
  return py::make_tuple(to_numpy(std::move(labels)), inertia);
}

// ---- SVM ----

// NaN or Inf in X, in scikit-learn's words.
void refuse_nonfinite(bool nan, bool inf) {
  if (nan) throw accel::InputError("Input X contains NaN.");
  if (inf) throw accel::InputError("Input X contains infinity or a value too large for dtype('float32').");
}

void finite(const float* v, std::int64_t n) {
  int nan = 0, inf = 0;
#pragma omp parallel for schedule(static) reduction(| : nan, inf)
  for (std::int64_t i = 0; i < n; ++i) {
    nan |= v[i] != v[i];
    inf |= std::fabs(v[i]) == std::numeric_limits<float>::infinity();
  }
  refuse_nonfinite(nan, inf);
}

// A CSR matrix from scipy's three arrays (one copy into accel's layout).
accel::CsrMatrix csr_from(const py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>& indptr,
                          const py::array_t<std::int32_t, py::array::c_style | py::array::forcecast>& indices,
                          const py::array_t<float, py::array::c_style | py::array::forcecast>& data,
                          std::int64_t cols) {
  accel::CsrMatrix m;
  m.rows = indptr.size() - 1;
  m.cols = cols;
  m.row_ptr.assign(indptr.data(), indptr.data() + indptr.size());
  m.col_idx.assign(indices.data(), indices.data() + indices.size());
  m.values.assign(data.data(), data.data() + data.size());
  if (m.rows < 0 || m.col_idx.size() != m.values.size() || m.row_ptr.front() != 0 || m.row_ptr.back() != m.nnz())
    throw accel::InputError("CSR row pointers, indices and values do not match");
  // The kernels trust the structure: rows in order, columns in range and
  // ascending within a row (scipy's canonical format, which the caller made).
  bool bad = false;
#pragma omp parallel for schedule(static) reduction(|| : bad)
  for (std::int64_t i = 0; i < m.rows; ++i) {
    if (m.row_ptr[i + 1] < m.row_ptr[i]) {
      bad = true;
      continue;
    }
    for (std::int64_t e = m.row_ptr[i]; e < m.row_ptr[i + 1]; ++e)
      bad = bad || m.col_idx[e] < 0 || m.col_idx[e] >= cols || (e > m.row_ptr[i] && m.col_idx[e] <= m.col_idx[e - 1]);
  }
  if (bad) throw accel::InputError("CSR matrix is malformed: row pointers decrease, or columns are out of range or not ascending");
  finite(m.values.data(), static_cast<std::int64_t>(m.values.size()));
  return m;
}

// A dense C-contiguous (n, d) array (float32 or float64) as CSR, values
// rounded to float32 and their zeros left out: rows counted, then filled,
// in parallel (one pass into per-thread buffers is slower: its appends do
// not vectorise). NaN or Inf is refused in the counting pass.
template <class T>
accel::CsrMatrix csr_dense(const py::array_t<T, py::array::c_style>& x) {
  if (x.ndim() != 2) throw accel::InputError("expected a 2-D array");
  accel::CsrMatrix m;
  m.rows = x.shape(0);
  m.cols = x.shape(1);
  const T* v = x.data();
  const std::int64_t n = m.rows, d = m.cols;
  m.row_ptr.assign(n + 1, 0);
  int nan = 0, inf = 0;  // or-ed without branches, so the count loop vectorises
#pragma omp parallel for schedule(static) reduction(| : nan, inf)
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t c = 0;
    for (std::int64_t j = 0; j < d; ++j) {
      const float a = static_cast<float>(v[i * d + j]);  // a float64 beyond float32's range becomes inf
      c += a != 0;
      nan |= a != a;
      inf |= std::fabs(a) == std::numeric_limits<float>::infinity();
    }
    m.row_ptr[i + 1] = c;
  }
  refuse_nonfinite(nan, inf);
  for (std::int64_t i = 0; i < n; ++i) m.row_ptr[i + 1] += m.row_ptr[i];
  m.col_idx.resize(m.row_ptr[n]);
  m.values.resize(m.row_ptr[n]);
#pragma omp parallel
  {
    // Each row compacted branch-free into a row-sized scratch (every value
    // written, the cursor moved by whether it is non-zero), then copied out:
    // a branch per value mispredicted at the edges of every run of zeros.
    std::vector<std::int32_t> c(d + 1);
    std::vector<float> w(d + 1);
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      std::int64_t at = 0;
      for (std::int64_t j = 0; j < d; ++j) {
        const float a = static_cast<float>(v[i * d + j]);
        c[at] = static_cast<std::int32_t>(j);
        w[at] = a;
        at += a != 0;
      }
      std::copy_n(c.begin(), at, m.col_idx.begin() + m.row_ptr[i]);
      std::copy_n(w.begin(), at, m.values.begin() + m.row_ptr[i]);
    }
  }
  return m;
}

// The trained model, held by the estimator; its arrays are what
// scikit-learn's attributes are made of, and a model is rebuilt from them
// after unpickling.
struct Model {
  accel::SvmModel m;
  std::vector<std::int64_t> iterations;  // per binary problem
};

accel::SvmParams svm_params(const py::dict& p) {
  accel::SvmParams s;
  const std::string type = p["type"].cast<std::string>();
  if (type == "c_svc") s.type = accel::SvmType::CSvc;
  else if (type == "nu_svc") s.type = accel::SvmType::NuSvc;
  else if (type == "one_class") s.type = accel::SvmType::OneClass;
  else if (type == "epsilon_svr") s.type = accel::SvmType::EpsilonSvr;
  else if (type == "nu_svr") s.type = accel::SvmType::NuSvr;
  else throw accel::InputError("svm type " + type);
  const std::string kernel = p["kernel"].cast<std::string>();
  if (kernel == "linear") s.kernel = accel::KernelType::Linear;
  else if (kernel == "poly") s.kernel = accel::KernelType::Polynomial;
  else if (kernel == "rbf") s.kernel = accel::KernelType::Rbf;
  else if (kernel == "sigmoid") s.kernel = accel::KernelType::Sigmoid;
  else throw accel::InputError("kernel " + kernel);
  s.degree = p["degree"].cast<int>();
  s.gamma = p["gamma"].cast<double>();
  s.coef0 = p["coef0"].cast<double>();
  s.C = p["C"].cast<double>();
  s.nu = p["nu"].cast<double>();
  s.p = p["epsilon"].cast<double>();
  s.eps = p["tol"].cast<double>();
  s.cache_mb = p["cache_size"].cast<double>();
  s.shrink = accel::parse_shrink(p["shrinking"].cast<bool>() ? "auto" : "none");
  s.probability = p["probability"].cast<bool>();
  for (auto [label, w] : p["weights"].cast<std::vector<std::pair<int, double>>>()) s.weights.emplace_back(label, w);
  s.sorted_classes = true;
  return s;
}

// Trains on x, which it takes over (x is left empty: the caller made it
// for this call).
std::shared_ptr<Model> svm_fit(accel::CsrMatrix& x, const py::array_t<double, py::array::c_style | py::array::forcecast>& y,
                               const py::dict& params, const std::string& device, const py::object& progress) {
  accel::LabeledCsr data;
  data.x = std::move(x);
  data.labels.assign(y.data(), y.data() + y.size());
  accel::SvmParams p = svm_params(params);
  accel::check_svm_params(p);
  auto out = std::make_shared<Model>();
  // Each problem's iterations kept, and a line to `progress`.
  struct Progress final : accel::SvmObserver {
    Model& model;
    const py::object& progress;
    Progress(Model& m, const py::object& p) : model(m), progress(p) {}
    void solved(const accel::BinaryStats& st) override {
      model.iterations.push_back(st.iterations);
      char line[200];
      std::snprintf(line, sizeof line,
                    "problem %zu: %lld iterations, %lld support vectors (%lld at the bound), obj %.6g",
                    model.iterations.size(), static_cast<long long>(st.iterations), static_cast<long long>(st.n_sv),
                    static_cast<long long>(st.n_bsv), st.obj);
      report(progress, line);
    }
  } observer(*out, progress);
  out->m = interruptible(
      [&] { return accel::svm_train(data, p, devices(device, accel::KernelId::CsrKernelRows), nullptr, &observer); });
  return out;
}

py::array_t<double> svm_decision(const Model& model, const accel::CsrMatrix& x, const std::string& device) {
  const std::size_t k = model.m.labels.size();
  const std::size_t per_row = accel::is_classification(model.m.params.type) ? k * (k - 1) / 2 : 1;
  std::vector<double> d = interruptible(
      [&] { return accel::svm_decision_values(model.m, x, devices(device, accel::KernelId::CsrKernelRows)); });
  return to_numpy(std::move(d), {x.rows, static_cast<py::ssize_t>(per_row)});
}

py::array_t<double> svm_proba(const Model& model, const accel::CsrMatrix& x, const std::string& device) {
  accel::ProbabilityPrediction p = interruptible(
      [&] { return accel::svm_predict_probability(model.m, x, devices(device, accel::KernelId::CsrKernelRows)); });
  return to_numpy(std::move(p.probabilities), {x.rows, static_cast<py::ssize_t>(model.m.labels.size())});
}

// A model from its arrays (after unpickling): what fit returned, by name.
std::shared_ptr<Model> svm_model(const py::dict& params, const accel::CsrMatrix& sv, std::vector<int> labels,
                                 std::vector<double> rho, std::vector<std::int64_t> n_sv,
                                 std::vector<std::vector<double>> coef, std::vector<double> prob_a,
                                 std::vector<double> prob_b) {
  auto out = std::make_shared<Model>();
  out->m.params = svm_params(params);
  out->m.sv = sv;
  out->m.labels = std::move(labels);
  out->m.rho = std::move(rho);
  out->m.n_sv = std::move(n_sv);
  out->m.coef = std::move(coef);
  out->m.probA = std::move(prob_a);
  out->m.probB = std::move(prob_b);
  for (const auto& c : out->m.coef)
    if (static_cast<std::int64_t>(c.size()) != sv.rows) throw accel::InputError("dual coefficients do not match the support vectors");
  return out;
}

py::array_t<double> coef_array(const Model& m) {
  std::vector<double> flat;
  for (const auto& row : m.m.coef) flat.insert(flat.end(), row.begin(), row.end());
  return to_numpy(std::move(flat), {static_cast<py::ssize_t>(m.m.coef.size()), static_cast<py::ssize_t>(m.m.sv.rows)});
}

}  // namespace

void bind_estimators(py::module_& m) {
  m.def("kmeans_fit", &kmeans_fit, py::arg("x"), py::arg("k"), py::arg("init"), py::arg("init_centers"),
        py::arg("max_iter"), py::arg("tol"), py::arg("seed"), py::arg("algorithm"), py::arg("device"),
        py::arg("progress"));
  m.def("kmeans_assign", &kmeans_assign, py::arg("x"), py::arg("centers"), py::arg("device"));

  py::class_<accel::CsrMatrix>(m, "Csr")
      .def_property_readonly("rows", [](const accel::CsrMatrix& c) { return c.rows; })
      .def_property_readonly("cols", [](const accel::CsrMatrix& c) { return c.cols; })
      .def_property_readonly("indptr", [](const accel::CsrMatrix& c) { return to_numpy(std::vector<std::int64_t>(c.row_ptr)); })
      .def_property_readonly("indices", [](const accel::CsrMatrix& c) { return to_numpy(std::vector<std::int32_t>(c.col_idx)); })
      .def_property_readonly("data", [](const accel::CsrMatrix& c) { return to_numpy(std::vector<float>(c.values)); });
  m.def("csr", &csr_from, py::arg("indptr"), py::arg("indices"), py::arg("data"), py::arg("cols"),
        py::call_guard<py::gil_scoped_release>());
  m.def("csr_dense", &csr_dense<float>, py::arg("x"), py::call_guard<py::gil_scoped_release>());
  m.def("csr_dense", &csr_dense<double>, py::arg("x"), py::call_guard<py::gil_scoped_release>());
  m.def("devices", [] {
    std::vector<std::string> names;
    for (const auto& d : python_registry().devices()) names.push_back(d->info().name);
    return names;
  }, "the devices accel found (discovery runs once per process, at the first call of any kind)");

  py::class_<Model, std::shared_ptr<Model>>(m, "SvmModel")
      .def_property_readonly("labels", [](const Model& s) { return s.m.labels; })
      .def_property_readonly("rho", [](const Model& s) { return s.m.rho; })
      .def_property_readonly("n_sv", [](const Model& s) { return s.m.n_sv; })
      .def_property_readonly("sv", [](const Model& s) { return s.m.sv; })
      .def_property_readonly("sv_rows", [](const Model& s) { return s.m.sv_rows; })
      .def_property_readonly("coef", &coef_array)
      .def_property_readonly("prob_a", [](const Model& s) { return s.m.probA; })
      .def_property_readonly("prob_b", [](const Model& s) { return s.m.probB; })
      .def_property_readonly("gamma", [](const Model& s) { return s.m.params.gamma; })
      .def_property_readonly("iterations", [](const Model& s) { return s.iterations; });
  m.def("svm_fit", &svm_fit, py::arg("x"), py::arg("y"), py::arg("params"), py::arg("device"), py::arg("progress"));
  m.def("svm_model", &svm_model);
  m.def("svm_decision", &svm_decision, py::arg("model"), py::arg("x"), py::arg("device"));
  m.def("svm_proba", &svm_proba, py::arg("model"), py::arg("x"), py::arg("device"));
}
