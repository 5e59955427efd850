#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

#include "accel/device.hpp"
#include "accel/error.hpp"
#include "accel/interrupt.hpp"
#include "accel/kmeans.hpp"

#include "accel/clock.hpp"

namespace accel {
namespace {

using accel::Clock;  // a simulator's virtual time in its processes (accel/clock.hpp)
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One device's share of the rows and the buffers it works on.
struct Shard {
  Device* dev = nullptr;
  std::int64_t begin = 0, rows = 0;
  std::unique_ptr<Buffer> x, centroids, labels, sums, counts, inertia, state;
  Event x_copied;  // the rows' copy to the device, which its next launch waits for
  // The last launch's outputs, read back beside the other devices' launches.
  std::vector<double> sums_out;
  std::vector<std::int64_t> counts_out;
  double inertia_out = 0;
};

ShapeKey key_of(const Device* dev, std::int64_t d, std::int64_t k) {
  return {dev->info().name, KernelId::KMeansAssign, d, k};
}

}  // namespace

struct PartialAssigner::Impl {
  const float* x;
  std::int64_t n, d, k;
  PerfModel& model;
  bool use_bounds;
  std::vector<Shard> shards;
  std::vector<std::int64_t> rows;

  // (Re)binds a shard to rows [begin, begin + count); returns transfer seconds.
  double bind(Shard& s, std::int64_t begin, std::int64_t count) {
    const auto t0 = Clock::now();
    s.x_copied.wait();  // the buffer it fills is about to be replaced
    s.begin = begin;
    s.rows = count;
    const std::size_t xbytes = std::max<std::size_t>(count * d * sizeof(float), 1);
    auto* src = const_cast<float*>(x + begin * d);  // kernels only read x
    s.x = s.dev->wrap_host(src, xbytes);
    if (!s.x) {
      // Started here, waited for by the shard's next launch: the devices'
      // copies run at once, and each device computes as soon as its own
      // rows have arrived.
      s.x = s.dev->allocate(xbytes);
      if (count > 0) s.x_copied = s.x->write_async(src, count * d * sizeof(float));
    }
    s.labels = s.dev->allocate(std::max<std::size_t>(count * sizeof(std::int32_t), 1));
    // New rows, a new state (nullptr where the device keeps none): the
    // next launch starts over.
    s.state.reset();
    if (use_bounds && count > 0) {
      KMeansAssignArgs shape;
      shape.n = count, shape.d = d, shape.k = k;
      s.state = s.dev->create_state(shape);
    }
    if (!s.centroids) {
      s.centroids = s.dev->allocate(k * d * sizeof(float));
      s.sums = s.dev->allocate(k * d * sizeof(double));
      s.counts = s.dev->allocate(k * sizeof(std::int64_t));
      s.inertia = s.dev->allocate(sizeof(double));
    }
    return since(t0);
  }

  double bind_all() {
    double t = 0;
    std::int64_t begin = 0;
    for (std::size_t i = 0; i < shards.size(); ++i) {
      if (!shards[i].x || shards[i].begin != begin || shards[i].rows != rows[i]) t += bind(shards[i], begin, rows[i]);
      begin += rows[i];
    }
    return t;
  }

  // Rows per shard from measured throughput; devices without a measurement
  // yet keep their share (the next step measures them).
  std::vector<std::int64_t> plan() const {
    std::vector<double> capability(shards.size(), 0.0);
    for (std::size_t i = 0; i < shards.size(); ++i) {
      auto r = model.rows_per_second(key_of(shards[i].dev, d, k));
      if (!r) return rows;
      capability[i] = *r;
    }
    return accel::rebalance(rows, capability, 0.05);
  }
};

PartialAssigner::PartialAssigner(const float* rows, std::int64_t n, std::int64_t d, std::int64_t k,
                                 std::vector<Device*> devices, PerfModel& model, bool bounds)
    : impl_(std::make_unique<Impl>(Impl{rows, n, d, k, model, bounds, {}, {}})) {
  if (devices.empty()) throw InputError("no device to run kmeans_assign on");
  auto& I = *impl_;
  I.shards.resize(devices.size());
  for (std::size_t i = 0; i < devices.size(); ++i) I.shards[i].dev = devices[i];
  // An even split, or the measured one when the model already knows the devices.
  I.rows.assign(devices.size(), n / static_cast<std::int64_t>(devices.size()));
  I.rows.back() += n - std::accumulate(I.rows.begin(), I.rows.end(), std::int64_t{0});
  I.rows = I.plan();
  I.bind_all();
}

PartialAssigner::~PartialAssigner() {
  // No copy may still write into a buffer about to be freed; its error, if
  // any, has no one left to tell.
  for (auto& s : impl_->shards) try {
      s.x_copied.wait();
    } catch (const std::exception&) {
    }
}

PartialStep PartialAssigner::step(const std::vector<float>& c) {
  auto& I = *impl_;
  const std::int64_t k = I.k, d = I.d;
  PartialStep t;
  t.sums.assign(k * d, 0.0);
  t.counts.assign(k, 0);
  // Each device's centroids copy, and its launch after it (and after its
  // rows', the first time): one device's copies run while another computes.
  auto t0 = Clock::now();
  std::vector<Event> events(I.shards.size());
  for (std::size_t i = 0; i < I.shards.size(); ++i) {
    auto& s = I.shards[i];
    if (s.rows == 0) continue;
    std::vector<Event> after = {s.centroids->write_async(c.data(), c.size() * sizeof(float)), s.x_copied};
    s.x_copied = {};
    events[i] = s.dev->launch(KMeansAssignArgs{s.x.get(), s.centroids.get(), s.labels.get(), s.sums.get(),
                                               s.counts.get(), s.inertia.get(), s.rows, d, k, s.state.get()},
                              std::move(after));
  }
  // Each device's outputs read as soon as its launch is done, while the
  // others still compute.
  std::vector<Event> reads;
  for (std::size_t i = 0; i < I.shards.size(); ++i) {
    auto& s = I.shards[i];
    if (s.rows == 0) continue;
    events[i].wait();
    I.model.record(key_of(s.dev, d, k), s.rows, events[i].seconds());
    s.sums_out.resize(k * d);
    s.counts_out.resize(k);
    reads.push_back(s.sums->read_async(s.sums_out.data(), s.sums_out.size() * sizeof(double)));
    reads.push_back(s.counts->read_async(s.counts_out.data(), s.counts_out.size() * sizeof(std::int64_t)));
    reads.push_back(s.inertia->read_async(&s.inertia_out, sizeof(double)));
  }
  t.compute_seconds += since(t0);
  t0 = Clock::now();
  wait_all(reads);
  for (const auto& s : I.shards) {
    if (s.rows == 0) continue;
    for (std::size_t j = 0; j < t.sums.size(); ++j) t.sums[j] += s.sums_out[j];
    for (std::int64_t j = 0; j < k; ++j) t.counts[j] += s.counts_out[j];
    t.inertia += s.inertia_out;
  }
  t.transfer_seconds += since(t0);
  return t;
}

double PartialAssigner::rebalance() {
  auto& I = *impl_;
  if (I.shards.size() < 2) return 0;
  const auto next = I.plan();
  if (next == I.rows) return 0;
  I.rows = next;
  return I.bind_all();
}

std::vector<std::int64_t> PartialAssigner::rows_per_device() const { return impl_->rows; }

void PartialAssigner::labels(std::int32_t* out) const {
  std::vector<Event> reads;  // every device's at once
  for (const auto& s : impl_->shards)
    if (s.rows > 0) reads.push_back(s.labels->read_async(out + s.begin, s.rows * sizeof(std::int32_t)));
  wait_all(reads);
}

std::vector<std::string> PartialAssigner::device_names() const {
  std::vector<std::string> out;
  for (const auto& s : impl_->shards) out.push_back(s.dev->info().name);
  return out;
}

double update_centroids(const std::vector<double>& sums, std::vector<std::int64_t> counts, std::vector<float>& c,
                        std::int64_t k, std::int64_t d, std::int64_t* reseeded) {
  std::vector<double> next(k * d);
  for (std::int64_t kk = 0; kk < k; ++kk)
    for (std::int64_t j = 0; j < d; ++j)
      next[kk * d + j] = counts[kk] > 0 ? sums[kk * d + j] / counts[kk] : c[kk * d + j];
  const std::int64_t r = reseed_empty(next, counts, k, d);
  if (reseeded) *reseeded = r;
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
  return std::sqrt(max_shift2);
}

bool kmeans_uses_bounds(const std::string& algorithm, std::int64_t d) {
  if (algorithm == "lloyd") return false;
  if (algorithm == "yinyang") return true;
  // Past d = 64 a distance costs enough that the distances Yinyang's bounds
  // skip pay for keeping them. Up to it Lloyd's direct loops are faster
  // than reading and updating the bounds.
  if (algorithm == "auto") return d > 64;
  throw InputError("unknown k-means algorithm '" + algorithm + "' (auto, lloyd, yinyang)");
}

std::vector<Device*> kmeans_capable(const std::vector<Device*>& candidates, std::int64_t k, std::int64_t d) {
  std::vector<Device*> out;
  std::string why;
  KMeansAssignArgs shape;
  shape.d = d, shape.k = k;
  for (Device* dev : candidates) {
    const std::string no = dev->cannot_run(shape);
    if (no.empty()) out.push_back(dev);
    else why += (why.empty() ? " " : "; ") + dev->info().name + ": " + no;
  }
  if (out.empty())
    throw InputError("k=" + std::to_string(k) + ", d=" + std::to_string(d) + " runs on none of the devices:" + why);
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
  const auto t_bind = Clock::now();
  PartialAssigner assigner(x.values(), n, d, k, devices, model, kmeans_uses_bounds(opts.algorithm, d));
  KMeansResult res;
  res.devices = assigner.device_names();
  res.transfer_seconds += since(t_bind);

  std::vector<float> c(initial.values(), initial.values() + initial.rows * initial.cols);
  for (int it = 1; it <= opts.max_iter; ++it) {
    interruption_point();
    const auto t_iter = Clock::now();
    KMeansIteration log;
    log.iteration = it;
    log.rows_per_device = assigner.rows_per_device();
    const PartialStep step = assigner.step(c);
    log.inertia = step.inertia;
    log.compute_seconds = step.compute_seconds;
    log.transfer_seconds = step.transfer_seconds;
    log.max_shift = update_centroids(step.sums, step.counts, c, k, d, &log.reseeded);
    res.reseeded += log.reseeded;
    // Re-divide rows when the measured speeds drift (devices of different kinds).
    log.transfer_seconds += assigner.rebalance();
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
  const PartialStep last = assigner.step(c);
  res.inertia = last.inertia;
  res.compute_seconds += last.compute_seconds;
  res.transfer_seconds += last.transfer_seconds;
  const auto t0 = Clock::now();
  res.labels.resize(n);
  assigner.labels(res.labels.data());
  res.transfer_seconds += since(t0);
  res.centroids.rows = k;
  res.centroids.cols = d;
  res.centroids.data = c;
  res.seconds = since(start);
  return res;
}

}  // namespace accel
