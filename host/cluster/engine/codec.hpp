// The engine's and the workloads' payloads use the one codec (accel/codec.hpp).
#pragma once

#include "accel/codec.hpp"

namespace accel::cluster {

using accel::Bytes;
using accel::In;
using accel::Out;

}  // namespace accel::cluster
