#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "accel/device.hpp"
#include "accel/error.hpp"
#include "accel/kmeans.hpp"

namespace accel {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One device's share of the rows and the buffers it works on.
struct Shard {
  Device* dev = nullptr;
  std::int64_t begin = 0, rows = 0;
  std::unique_ptr<Buffer> x, centroids, labels, sums, counts, inertia;
};

ShapeKey key_of(const Device* dev, std::int64_t d, std::int64_t k) {
  return {dev->info().name, KernelId::KMeansAssign, d, k};
}

// (Re)binds shard buffers to rows [begin, begin + rows); returns transfer seconds.
double bind_rows(Shard& s, const Matrix& x, std::int64_t k, std::int64_t begin, std::int64_t rows) {
  const auto t0 = Clock::now();
  const std::int64_t d = x.cols;
  s.begin = begin;
  s.rows = rows;
  const std::size_t xbytes = std::max<std::size_t>(rows * d * sizeof(float), 1);
  auto* src = const_cast<float*>(x.data.data() + begin * d);  // kernels only read x
  s.x = s.dev->wrap_host(src, xbytes);
  if (!s.x) {
    s.x = s.dev->allocate(xbytes);
    if (rows > 0) s.x->write(src, rows * d * sizeof(float));
  }
  s.labels = s.dev->allocate(std::max<std::size_t>(rows * sizeof(std::int32_t), 1));
  if (!s.centroids) {
    s.centroids = s.dev->allocate(k * d * sizeof(float));
    s.sums = s.dev->allocate(k * d * sizeof(double));
    s.counts = s.dev->allocate(k * sizeof(std::int64_t));
    s.inertia = s.dev->allocate(sizeof(double));
  }
  return since(t0);
}

struct StepTotals {
  std::vector<double> sums;
  std::vector<std::int64_t> counts;
  double inertia = 0, compute = 0, transfer = 0;
};

// One assignment step on every shard, partial results summed on the host.
StepTotals assign_step(std::vector<Shard>& shards, const std::vector<float>& c, std::int64_t k, std::int64_t d,
                       PerfModel& model) {
  StepTotals t;
  t.sums.assign(k * d, 0.0);
  t.counts.assign(k, 0);
  auto t0 = Clock::now();
  for (auto& s : shards)
    if (s.rows > 0) s.centroids->write(c.data(), c.size() * sizeof(float));
  t.transfer += since(t0);

  t0 = Clock::now();
  std::vector<Event> events(shards.size());
  for (std::size_t i = 0; i < shards.size(); ++i) {
    auto& s = shards[i];
    if (s.rows == 0) continue;
    events[i] = s.dev->launch(KMeansAssignArgs{s.x.get(), s.centroids.get(), s.labels.get(), s.sums.get(),
                                               s.counts.get(), s.inertia.get(), s.rows, d, k});
  }
  for (auto& e : events) e.wait();
  t.compute += since(t0);

  t0 = Clock::now();
  std::vector<double> sums(k * d);
  std::vector<std::int64_t> counts(k);
  for (std::size_t i = 0; i < shards.size(); ++i) {
    auto& s = shards[i];
    if (s.rows == 0) continue;
    model.record(key_of(s.dev, d, k), s.rows, events[i].seconds());
    s.sums->read(sums.data(), sums.size() * sizeof(double));
    s.counts->read(counts.data(), counts.size() * sizeof(std::int64_t));
    double inertia = 0;
    s.inertia->read(&inertia, sizeof inertia);
    for (std::size_t j = 0; j < sums.size(); ++j) t.sums[j] += sums[j];
    for (std::int64_t j = 0; j < k; ++j) t.counts[j] += counts[j];
    t.inertia += inertia;
  }
  t.transfer += since(t0);
  return t;
}

// Rows per shard from measured throughput; devices without a measurement
// yet get an even share (the first iteration measures them).
std::vector<std::int64_t> plan_rows(const std::vector<Shard>& shards, const std::vector<std::int64_t>& current,
                                    std::int64_t d, std::int64_t k, const PerfModel& model) {
  std::vector<double> capability(shards.size(), 0.0);
  bool all_known = true;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    auto r = model.rows_per_second(key_of(shards[i].dev, d, k));
    if (r) capability[i] = *r;
    else all_known = false;
  }
  if (!all_known) return current;
  return rebalance(current, capability, 0.05);
}

}  // namespace

std::vector<Device*> kmeans_capable(const std::vector<Device*>& candidates, std::int64_t k, std::int64_t d) {
  std::vector<Device*> out;
  std::string why;
  for (Device* dev : candidates) {
    const auto& info = dev->info();
    if ((info.max_k == 0 || k <= info.max_k) && (info.max_d == 0 || d <= info.max_d)) out.push_back(dev);
    else why += " " + info.name + " (k <= " + std::to_string(info.max_k) + ", d <= " + std::to_string(info.max_d) + ")";
  }
  if (out.empty())
    throw InputError("k=" + std::to_string(k) + ", d=" + std::to_string(d) + " exceeds the kernel bounds of" + why);
  return out;
}

std::int64_t reseed_empty(std::vector<double>& c, std::vector<std::int64_t>& counts, std::int64_t k, std::int64_t d) {
  std::int64_t reseeded = 0;
  for (std::int64_t e = 0; e < k; ++e) {
    if (counts[e] != 0) continue;
    const auto largest = std::max_element(counts.begin(), counts.end()) - counts.begin();
    if (counts[largest] < 2) break;  // nothing left to split
    // Split the largest cluster: the empty centroid moves a small step away
    // from it and the next assignment divides the rows between the two. The
    // old centroid stays put, so rows that are all identical keep their
    // zero cost and the re-seeded position is the same every time (which lets
    // the shift test converge).
    for (std::int64_t j = 0; j < d; ++j) {
      const double v = c[largest * d + j];
      c[e * d + j] = v + 1e-3 * std::max(std::abs(v), 1e-3);
    }
    counts[e] = counts[largest] / 2;
    counts[largest] -= counts[e];
    ++reseeded;
  }
  return reseeded;
}

KMeansResult kmeans(const Matrix& x, const Matrix& initial, const KMeansOptions& opts,
                    const std::vector<Device*>& devices, PerfModel& model,
                    const std::function<void(const KMeansIteration&)>& on_iteration) {
  const auto start = Clock::now();
  const std::int64_t n = x.rows, d = x.cols, k = opts.k;
  if (initial.rows != k || initial.cols != d) throw InputError("initial centroids do not match k x d");
  if (devices.empty()) throw InputError("no device to run kmeans_assign on");

  KMeansResult res;
  for (auto* dev : devices) res.devices.push_back(dev->info().name);

  // Start with an even split, or the measured one when the model knows the devices.
  std::vector<Shard> shards(devices.size());
  std::vector<std::int64_t> rows(devices.size(), n / static_cast<std::int64_t>(devices.size()));
  rows.back() += n - std::accumulate(rows.begin(), rows.end(), std::int64_t{0});
  for (std::size_t i = 0; i < devices.size(); ++i) shards[i].dev = devices[i];
  rows = plan_rows(shards, rows, d, k, model);
  auto bind_all = [&](const std::vector<std::int64_t>& plan) {
    double t = 0;
    std::int64_t begin = 0;
    for (std::size_t i = 0; i < shards.size(); ++i) {
      if (!shards[i].x || shards[i].begin != begin || shards[i].rows != plan[i]) t += bind_rows(shards[i], x, k, begin, plan[i]);
      begin += plan[i];
    }
    return t;
  };
  res.transfer_seconds += bind_all(rows);

  std::vector<float> c(initial.data);
  std::vector<double> next(k * d);
  for (int it = 1; it <= opts.max_iter; ++it) {
    const auto t_iter = Clock::now();
    StepTotals step = assign_step(shards, c, k, d, model);
    KMeansIteration log;
    log.iteration = it;
    log.inertia = step.inertia;
    log.compute_seconds = step.compute;
    log.transfer_seconds = step.transfer;
    for (auto& s : shards) log.rows_per_device.push_back(s.rows);

    // Update: c_k = sum_k / count_k; empty clusters keep their centroid until re-seeded.
    for (std::int64_t kk = 0; kk < k; ++kk)
      for (std::int64_t j = 0; j < d; ++j)
        next[kk * d + j] = step.counts[kk] > 0 ? step.sums[kk * d + j] / step.counts[kk] : c[kk * d + j];
    log.reseeded = reseed_empty(next, step.counts, k, d);
    res.reseeded += log.reseeded;
    double max_shift2 = 0;
    for (std::int64_t kk = 0; kk < k; ++kk) {
      double s2 = 0;
      for (std::int64_t j = 0; j < d; ++j) {
        const double t = next[kk * d + j] - c[kk * d + j];
        s2 += t * t;
      }
      max_shift2 = std::max(max_shift2, s2);
    }
    for (std::size_t j = 0; j < c.size(); ++j) c[j] = static_cast<float>(next[j]);
    log.max_shift = std::sqrt(max_shift2);

    // Re-divide rows when the measured speeds drift (devices of different kinds).
    if (shards.size() > 1) {
      const auto plan = plan_rows(shards, rows, d, k, model);
      if (plan != rows) {
        rows = plan;
        log.transfer_seconds += bind_all(rows);
      }
    }
    log.seconds = since(t_iter);
    res.compute_seconds += log.compute_seconds;
    res.transfer_seconds += log.transfer_seconds;
    res.iterations = it;
    if (on_iteration) on_iteration(log);
    // Spark's rule: converged when no centroid moved tol or more.
    if (opts.tol > 0 && log.max_shift < opts.tol) {
      res.converged = true;
      break;
    }
  }

  // Final assignment with the returned centroids: labels and inertia match them.
  StepTotals last = assign_step(shards, c, k, d, model);
  res.inertia = last.inertia;
  res.compute_seconds += last.compute;
  res.transfer_seconds += last.transfer;
  const auto t0 = Clock::now();
  res.labels.resize(n);
  for (auto& s : shards)
    if (s.rows > 0) s.labels->read(res.labels.data() + s.begin, s.rows * sizeof(std::int32_t));
  res.transfer_seconds += since(t0);
  res.centroids.rows = k;
  res.centroids.cols = d;
  res.centroids.data = c;
  res.seconds = since(start);
  return res;
}

}  // namespace accel
