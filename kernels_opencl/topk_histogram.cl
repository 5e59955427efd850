// topk_histogram in OpenCL C (contract in host/include/accel/kernels.hpp):
// one pass over the data, each work-item a contiguous slice. Bins, the
// outside counts and the candidate counter are 64-bit global atomics; the
// moments are each work-group's, summed in local memory in a fixed tree and
// added by the driver in group order (so they do not depend on scheduling).
// Needs cl_khr_fp64 and cl_khr_int64_base_atomics.
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable

__kernel void topk_histogram(__global const float* data, long n, uint lo, uint hi, int shift,
                             __global ulong* hist, __global ulong* outside, int collect,
                             __global long* candidates, __global ulong* candidate_count, long capacity,
                             int collect_values, __global float* candidate_values, long per_item, __global double* group_moments, __local double* scratch) {
  const long gid = get_global_id(0);
  const int lid = get_local_id(0), size = get_local_size(0);
  const long begin = gid * per_item;
  const long end = min(n, begin + per_item);
  double s = 0.0, s2 = 0.0;
  float mx = 0.0f;
  ulong below = 0, above = 0, nonfinite = 0;
  for (long i = begin; i < end; ++i) {
    const float v = data[i];
    const uint u = as_uint(v) & 0x7fffffffu;
    if (u >= 0x7f800000u) {
      ++nonfinite;
      continue;
    }
    s += v;
    s2 += (double)v * (double)v;
    mx = fmax(mx, as_float(u));
    if (u < lo) {
      ++below;
      continue;
    }
    if (collect) {
      const ulong at = atom_inc(candidate_count);
      if ((long)at < capacity) {
        candidates[at] = i;
        if (collect_values) candidate_values[at] = v;
      }
    }
    if (u >= hi) ++above;
    else atom_inc(&hist[(u - lo) >> shift]);
  }
  if (below) atom_add(&outside[0], below);
  if (above) atom_add(&outside[1], above);
  if (nonfinite) atom_add(&outside[2], nonfinite);
  // The group's moments: a tree over the local slots, the same order every run.
  __local double* ls = scratch;
  __local double* ls2 = scratch + size;
  __local double* lmx = scratch + 2 * size;
  ls[lid] = s;
  ls2[lid] = s2;
  lmx[lid] = mx;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int span = size / 2; span > 0; span /= 2) {
    if (lid < span) {
      ls[lid] += ls[lid + span];
      ls2[lid] += ls2[lid + span];
      lmx[lid] = fmax(lmx[lid], lmx[lid + span]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) {
    __global double* g = group_moments + 3 * get_group_id(0);
    g[0] = ls[0];
    g[1] = ls2[0];
    g[2] = lmx[0];
  }
}

// topk_histogram_private: the same outputs for CPU devices (PoCL), where a
// global atomic per value is most of the cost. One work-item per group, so
// the group's local histogram is its own and counts with plain increments;
// its non-zero bins are added to the global histogram once at the end. Each
// group's moments go to group_moments as above (a group of one needs no
// tree). The driver picks it when the bins fit in local memory.
__kernel __attribute__((reqd_work_group_size(1, 1, 1)))
void topk_histogram_private(__global const float* data, long n, uint lo, uint hi, int shift,
                            __global ulong* hist, __global ulong* outside, int collect,
                            __global long* candidates, __global ulong* candidate_count, long capacity,
                            int collect_values, __global float* candidate_values, long per_item, __global double* group_moments, __local uint* own, int bins) {
  const long g = get_global_id(0);
  const long begin = g * per_item;
  const long end = min(n, begin + per_item);
  for (int b = 0; b < bins; ++b) own[b] = 0;
  double s = 0.0, s2 = 0.0;
  float mx = 0.0f;
  ulong below = 0, above = 0, nonfinite = 0;
  for (long i = begin; i < end; ++i) {
    const float v = data[i];
    const uint u = as_uint(v) & 0x7fffffffu;
    if (u >= 0x7f800000u) {
      ++nonfinite;
      continue;
    }
    s += v;
    s2 += (double)v * (double)v;
    mx = fmax(mx, as_float(u));
    if (u < lo) {
      ++below;
      continue;
    }
    if (collect) {
      const ulong at = atom_inc(candidate_count);
      if ((long)at < capacity) {
        candidates[at] = i;
        if (collect_values) candidate_values[at] = v;
      }
    }
    if (u >= hi) ++above;
    else ++own[(u - lo) >> shift];
  }
  for (int b = 0; b < bins; ++b)
    if (own[b]) atom_add(&hist[b], (ulong)own[b]);
  if (below) atom_add(&outside[0], below);
  if (above) atom_add(&outside[1], above);
  if (nonfinite) atom_add(&outside[2], nonfinite);
  group_moments[3 * g] = s;
  group_moments[3 * g + 1] = s2;
  group_moments[3 * g + 2] = mx;
}
