// The sparse allreduce group in accel._accel (built with UCX only: the
// cluster engine runs it).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <span>

#include "accel/sparse_allreduce.hpp"
#include "bindings.hpp"

namespace py = pybind11;

namespace {

using FloatArray = py::array_t<float, py::array::c_style>;

py::dict allreduce(accel::SparseGroup& g, std::uint64_t n, py::array_t<std::uint32_t, py::array::c_style> idx,
                   FloatArray val, std::uint64_t tag) {
  accel::SparseSum s;
  {
    py::gil_scoped_release release;
    s = g.allreduce(n, std::span(idx.data(), idx.size()), std::span(val.data(), val.size()), tag);
  }
  py::dict d;
  d["step"] = s.step;
  d["indices"] = to_numpy(std::move(s.indices));
  d["values"] = to_numpy(std::move(s.values));
  d["members"] = s.members;
  d["tags"] = s.tags;
  d["bytes_sent"] = s.bytes_sent;
  d["exchange"] = s.exchange;
  d["rounds"] = s.rounds;
  return d;
}

}  // namespace

void bind_sparse_group(py::module_& m) {
  py::class_<accel::SparseGroupOptions>(m, "SparseGroupOptions")
      .def(py::init([] { return accel::sparse_group_options_from_env(); }))
      .def_readwrite("rank", &accel::SparseGroupOptions::rank)
      .def_readwrite("size", &accel::SparseGroupOptions::size)
      .def_readwrite("max_size", &accel::SparseGroupOptions::max_size)
      .def_readwrite("coordinator", &accel::SparseGroupOptions::coordinator)
      .def_readwrite("job", &accel::SparseGroupOptions::job)
      .def_readwrite("timeout_ms", &accel::SparseGroupOptions::timeout_ms)
      .def_readwrite("keepalive_ms", &accel::SparseGroupOptions::keepalive_ms)
      .def_readwrite("join_timeout_ms", &accel::SparseGroupOptions::join_timeout_ms)
      .def_readwrite("tls", &accel::SparseGroupOptions::tls)
      .def_readwrite("log_json", &accel::SparseGroupOptions::log_json)
      .def_readwrite("snapshot_dir", &accel::SparseGroupOptions::snapshot_dir)
      .def_readwrite("exchange", &accel::SparseGroupOptions::exchange);
  py::class_<accel::SparseGroup>(m, "SparseGroup")
      .def(py::init<const accel::SparseGroupOptions&>(), py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("rank", &accel::SparseGroup::rank)
      .def_property_readonly("size", &accel::SparseGroup::size)
      .def("join", &accel::SparseGroup::join, py::call_guard<py::gil_scoped_release>())
      .def("allreduce", &allreduce, py::arg("n"), py::arg("indices").noconvert(), py::arg("values").noconvert(),
           py::arg("tag") = 0)
      .def("close", &accel::SparseGroup::close, py::call_guard<py::gil_scoped_release>());
}
