// accel._accel: the Python binding of top-k selection, the Sparsifier and
// the sparse allreduce group (sparse_group.cpp, built with UCX;
// estimators.cpp: what accel.sklearn computes with). Arrays pass without copies: inputs must be
// float32 and C-contiguous (the Python layer turns CPU torch tensors into
// numpy views of the same memory); the GIL is released around every call
// that reads or exchanges them.
#include <pybind11/numpy.h>
#include <optional>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <mutex>
#include <map>

#include "accel/error.hpp"
#include "accel/kernels.hpp"
#include "accel/registry.hpp"
#include "accel/config.hpp"
#include "accel/topk.hpp"
#include "bindings.hpp"

namespace py = pybind11;

const accel::Registry& python_registry() {
  static const accel::Registry r = accel::Registry::discover_all();
  return r;
}
using FloatArray = py::array_t<float, py::array::c_style>;

namespace {

accel::Device* topk_device(const std::string& spec) {
  auto devs = python_registry().select(spec, accel::KernelId::TopKHistogram);
  if (devs.empty()) throw accel::InputError("device " + spec + " has no topk_histogram kernel");
  return devs.front();
}

accel::TopKOptions topk_options(double ratio, const std::string& method, const std::string& nonfinite) {
  if (!(ratio > 0 && ratio <= 1)) throw accel::InputError("ratio " + std::to_string(ratio) + " is outside (0, 1]");
  accel::TopKOptions o;
  o.ratio = ratio;
  o.method = accel::parse_topk_method(method);
  if (nonfinite != "error" && nonfinite != "exclude")
    throw accel::InputError("nonfinite " + nonfinite + ": expected error or exclude");
  o.nonfinite = nonfinite == "error" ? accel::NonFinitePolicy::Error : accel::NonFinitePolicy::Exclude;
  return o;
}

struct TopK {
  py::array_t<std::int64_t> indices;
  float tau;
  std::int64_t n, k, ties, nonfinite;
  int passes;
  double estimate, seconds, pass_seconds, copy_seconds;
};

TopK topk(FloatArray x, double ratio, const std::string& method, const std::string& nonfinite,
          const std::string& device) {
  const auto opts = topk_options(ratio, method, nonfinite);
  accel::TopKSelector selector(topk_device(device));
  accel::TopKResult r;
  {
    py::gil_scoped_release release;
    r = selector.select(x.data(), static_cast<std::int64_t>(x.size()), opts);
  }
  return {to_numpy(std::move(r.indices)), r.tau, r.n, r.k, r.ties, r.nonfinite, r.passes, r.estimate, r.seconds,
          r.pass_seconds, r.copy_seconds};
}

// Top-k of n floats at a device address (a CUDA tensor's data_ptr): the
// device named by `device` wraps the memory (it checks the address is its
// own) and R never leaves it. The caller has finished writing R (accel runs
// on its own stream).
TopK topk_at(std::uintptr_t ptr, std::int64_t n, double ratio, const std::string& method,
                 const std::string& nonfinite, const std::string& device) {
  const auto opts = topk_options(ratio, method, nonfinite);
  if (n < 0) throw accel::InputError("n = " + std::to_string(n) + " < 0");
  accel::Device* dev = topk_device(device);
  auto data = dev->wrap_device(reinterpret_cast<void*>(ptr), static_cast<std::size_t>(std::max<std::int64_t>(n, 1)) * 4);
  if (!data) throw accel::InputError("device " + device + " does not take device memory (a CUDA tensor needs cuda:N)");
  // One selector a device, kept: its histogram and candidate buffers are
  // device allocations (cudaMalloc costs more than a small top-k).
  static std::mutex mutex;
  static std::map<accel::Device*, std::unique_ptr<accel::TopKSelector>> selectors;
  accel::TopKResult r;
  {
    py::gil_scoped_release release;
    std::lock_guard lock(mutex);
    auto& selector = selectors[dev];
    if (!selector) selector = std::make_unique<accel::TopKSelector>(dev);
    r = selector->select(*data, n, opts);
  }
  return {to_numpy(std::move(r.indices)), r.tau, r.n, r.k, r.ties, r.nonfinite, r.passes, r.estimate, r.seconds,
          r.pass_seconds, r.copy_seconds};
}

accel::SparsifierOptions sparsifier_options(double ratio, const std::string& method, double momentum, bool masking,
                                            bool warmup, const std::string& nonfinite) {
  accel::SparsifierOptions o;
  o.topk = topk_options(ratio, method, nonfinite);
  if (!(momentum >= 0 && momentum < 1)) throw accel::InputError("momentum " + std::to_string(momentum) + " is outside [0, 1)");
  o.momentum = momentum;
  o.masking = masking;
  o.warmup = warmup;
  return o;
}

// The Sparsifier with the selector it needs, kept together.
class PySparsifier {
 public:
  PySparsifier(std::int64_t n, double ratio, const std::string& method, double momentum, bool masking, bool warmup,
               const std::string& nonfinite, const std::string& device)
      : n_(n), selector_(topk_device(device)) {
    if (n < 1) throw accel::InputError("sparsifier length " + std::to_string(n) + " is not positive");
    s_ = std::make_unique<accel::Sparsifier>(n, sparsifier_options(ratio, method, momentum, masking, warmup, nonfinite),
                                             selector_);
  }
  py::tuple step(FloatArray g) {
    if (g.size() != n_)
      throw accel::InputError("gradient of " + std::to_string(g.size()) + " values for a sparsifier of " +
                              std::to_string(n_));
    accel::SparseGradient out;
    {
      py::gil_scoped_release release;
      out = s_->step(g.data());
    }
    return py::make_tuple(to_numpy(std::move(out.indices)), to_numpy(std::move(out.values)));
  }
  void set_epoch(double e) { s_->set_epoch(e); }
  double ratio() const { return s_->ratio(); }
  py::array_t<float> residual() const {
    std::vector<float> r = s_->residual();
    return to_numpy(std::move(r));
  }
  std::int64_t size() const { return n_; }

 private:
  std::int64_t n_;
  accel::TopKSelector selector_;
  std::unique_ptr<accel::Sparsifier> s_;
};

// The bucket form: one accumulation and one launch for the small layers.
class PyBucketSparsifier {
 public:
  PyBucketSparsifier(std::vector<std::int64_t> sizes, double ratio, const std::string& method, double momentum,
                     bool masking, bool warmup, std::int64_t dense_below, std::int64_t host_below,
                     const std::string& nonfinite, const std::string& device)
      : selector_(topk_device(device)) {
    accel::BucketOptions o;
    o.sparsifier = sparsifier_options(ratio, method, momentum, masking, warmup, nonfinite);
    o.dense_below = dense_below;
    o.host_below = host_below;
    s_ = std::make_unique<accel::BucketSparsifier>(std::move(sizes), o, selector_);
  }
  // Indices as uint32 (the sparse allreduce's type; a bucket holds < 2^32).
  py::tuple step(FloatArray g) {
    if (g.size() != s_->size())
      throw accel::InputError("bucket of " + std::to_string(g.size()) + " values for a sparsifier of " +
                              std::to_string(s_->size()));
    accel::SparseGradient out;
    std::vector<std::uint32_t> idx;
    {
      py::gil_scoped_release release;
      out = s_->step(g.data());
      idx.assign(out.indices.begin(), out.indices.end());
    }
    return py::make_tuple(to_numpy(std::move(idx)), to_numpy(std::move(out.values)));
  }
  void set_epoch(double e) { s_->set_epoch(e); }
  double ratio() const { return s_->ratio(); }
  py::array_t<float> residual() const {
    std::vector<float> r = s_->residual();
    return to_numpy(std::move(r));
  }
  py::array_t<float> velocity() const {
    std::vector<float> u = s_->velocity();
    return to_numpy(std::move(u));
  }
  void load(std::int64_t at, FloatArray residual, std::optional<FloatArray> velocity) {
    if (velocity && velocity->size() != residual.size())
      throw accel::InputError("sparsifier state: " + std::to_string(residual.size()) + " residual values but " +
                              std::to_string(velocity->size()) + " velocity values");
    s_->load(at, residual.size(), residual.data(), velocity ? velocity->data() : nullptr);
  }
  std::int64_t size() const { return s_->size(); }

 private:
  accel::TopKSelector selector_;
  std::unique_ptr<accel::BucketSparsifier> s_;
};

}  // namespace

PYBIND11_MODULE(_accel, m) {
  m.doc() = "accel: top-k selection, residual gradient sparsification and the sparse allreduce";
  py::register_exception<accel::InputError>(m, "InputError", PyExc_ValueError);
  py::register_exception<accel::DeviceError>(m, "DeviceError", PyExc_RuntimeError);
  bind_estimators(m);

  py::class_<TopK>(m, "TopKResult")
      .def_readonly("indices", &TopK::indices)
      .def_readonly("tau", &TopK::tau)
      .def_readonly("n", &TopK::n)
      .def_readonly("k", &TopK::k)
      .def_readonly("ties", &TopK::ties)
      .def_readonly("nonfinite", &TopK::nonfinite)
      .def_readonly("passes", &TopK::passes)
      .def_readonly("estimate", &TopK::estimate)
      .def_readonly("seconds", &TopK::seconds)
      .def_readonly("pass_seconds", &TopK::pass_seconds)
      .def_readonly("copy_seconds", &TopK::copy_seconds);
  m.def("topk", &topk, py::arg("x").noconvert(), py::arg("ratio"), py::arg("method") = "ldte-hist",
        py::arg("nonfinite") = "error", py::arg("device") = "cpu");
  m.def("topk_device", &topk_at, py::arg("ptr"), py::arg("n"), py::arg("ratio"), py::arg("method") = "ldte-hist",
        py::arg("nonfinite") = "error", py::arg("device") = "cuda:0");

  py::class_<PySparsifier>(m, "Sparsifier")
      .def(py::init<std::int64_t, double, const std::string&, double, bool, bool, const std::string&,
                    const std::string&>(),
           py::arg("n"), py::arg("ratio") = 0.001, py::arg("method") = "ldte-hist", py::arg("momentum") = 0.0,
           py::arg("masking") = true, py::arg("warmup") = false, py::arg("nonfinite") = "error",
           py::arg("device") = "cpu")
      .def("step", &PySparsifier::step, py::arg("gradient").noconvert())
      .def("set_epoch", &PySparsifier::set_epoch)
      .def_property_readonly("ratio", &PySparsifier::ratio)
      .def_property_readonly("residual", &PySparsifier::residual)
      .def_property_readonly("size", &PySparsifier::size);

  py::class_<PyBucketSparsifier>(m, "BucketSparsifier")
      .def(py::init<std::vector<std::int64_t>, double, const std::string&, double, bool, bool, std::int64_t,
                    std::int64_t, const std::string&, const std::string&>(),
           py::arg("sizes"), py::arg("ratio") = 0.001, py::arg("method") = "ldte-hist", py::arg("momentum") = 0.0,
           py::arg("masking") = true, py::arg("warmup") = false, py::arg("dense_below") = 0,
           py::arg("host_below") = std::int64_t{1} << 16, py::arg("nonfinite") = "error", py::arg("device") = "cpu")
      .def("step", &PyBucketSparsifier::step, py::arg("bucket").noconvert())
      .def("set_epoch", &PyBucketSparsifier::set_epoch)
      .def_property_readonly("ratio", &PyBucketSparsifier::ratio)
      .def_property_readonly("residual", &PyBucketSparsifier::residual)
      .def_property_readonly("velocity", &PyBucketSparsifier::velocity)
      .def("load", &PyBucketSparsifier::load, py::arg("at"), py::arg("residual"), py::arg("velocity") = py::none())
      .def_property_readonly("size", &PyBucketSparsifier::size);

#if ACCEL_HAVE_UCX
  bind_sparse_group(m);
#else
  // The estimators and top-k work without UCX; the sparse allreduce does not.
  m.attr("sparse_group_missing") = "this accel was built without UCX (libucx-dev), so it has no SparseGroup: "
                                   "install UCX and rebuild (pip install . or scripts/build.sh) to use the sparse allreduce";
#endif
}
