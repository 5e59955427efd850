// What the binding's source files share: one device registry for the
// process, numpy arrays that own their vector, and each file's part of the
// module.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <vector>

#include "accel/registry.hpp"

// A vector handed to numpy without a copy: the array owns it (1-D when no
// shape is given).
template <class T>
pybind11::array_t<T> to_numpy(std::vector<T>&& v, std::vector<pybind11::ssize_t> shape = {}) {
  auto* heap = new std::vector<T>(std::move(v));
  pybind11::capsule owner(heap, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  if (shape.empty()) shape = {static_cast<pybind11::ssize_t>(heap->size())};
  return pybind11::array_t<T>(shape, heap->data(), owner);
}

// Discovery probes every backend once per process.
const accel::Registry& python_registry();

void bind_estimators(pybind11::module_& m);
void bind_sparse_group(pybind11::module_& m);  // sparse_group.cpp, with UCX
