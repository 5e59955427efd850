// What the Sparsifier and the BucketSparsifier share: the momentum check and
// the residual's accumulation.
#pragma once

#include <cstdint>

namespace accel::sparsify {

// InputError unless 0 <= momentum < 1.
void check_momentum(double momentum);

// R <- R + G, or with momentum correction U <- m U + G, R <- R + U (the
// velocity, not the raw gradient, so delayed coordinates carry the momentum
// they would have had). u is unused when momentum is 0.
void accumulate_residual(float* r, float* u, const float* g, std::int64_t n, double momentum);

}  // namespace accel::sparsify
