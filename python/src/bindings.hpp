// What the binding's source files share: one device registry for the
// process, and each file's part of the module.
#pragma once

#include <pybind11/pybind11.h>

#include "accel/registry.hpp"

// Discovery probes every backend once per process.
const accel::Registry& python_registry();

void bind_estimators(pybind11::module_& m);
