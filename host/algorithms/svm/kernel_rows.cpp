// Kernel rows for the SMO solver: the CSR matrix lives on every device (once,
// or wrapped without a copy where the device shares host memory); each
// request splits the target rows among the devices in proportion to their
// measured rate and launches csr_kernel_rows on all of them at once. An LRU
// cache keeps whole rows (n floats) so a row computed while some samples were
// shrunk stays usable as long as no sample has come back since.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <list>
#include <numeric>

#include "accel/error.hpp"
#include "accel/svm.hpp"

namespace accel {
namespace {

using clock_type = std::chrono::steady_clock;

template <class T>
std::unique_ptr<Buffer> to_device(Device& dev, const std::vector<T>& v) {
  const std::size_t bytes = std::max<std::size_t>(1, v.size() * sizeof(T));
  if (auto b = dev.wrap_host(const_cast<T*>(v.data()), bytes)) return b;
  auto b = dev.allocate(bytes);
  b->write(v.data(), v.size() * sizeof(T));
  return b;
}

double kernel_of_dot(const SvmParams& p, double dot, double su, double sv) {
  switch (p.kernel) {
    case KernelType::Linear: return dot;
    case KernelType::Polynomial: {
      double base = p.gamma * dot + p.coef0, r = 1.0;
      for (int t = p.degree; t > 0; t /= 2) {
        if (t % 2) r *= base;
        base *= base;
      }
      return r;
    }
    case KernelType::Rbf: return std::exp(-p.gamma * std::max(0.0, su + sv - 2 * dot));
    case KernelType::Sigmoid: return std::tanh(p.gamma * dot + p.coef0);
  }
  return 0;
}

}  // namespace

struct KernelRows::Impl {
  struct Dev {
    Device* dev;
    bool host = false;  // shares host memory: wrap_host instead of copies
    std::unique_ptr<Buffer> row_ptr, col_idx, values, norms;
    std::unique_ptr<Buffer> targets, queries, out;
    std::size_t targets_cap = 0, queries_cap = 0, out_cap = 0;
    const std::int32_t* targets_src = nullptr;  // what `targets` holds (device copy), to skip re-uploads
    std::int64_t targets_len = -1, targets_version = -1;
    double rate = 0;  // target rows x queries per second, smoothed
  };

  const CsrMatrix& x;
  SvmParams p;
  std::vector<double> norms;
  std::vector<Dev> devs;
  std::vector<std::int32_t> active;
  std::int64_t active_version = 0;  // bumps on every set_active
  std::int64_t epoch = 0;           // bumps when rows come back: cached rows die
  bool epoch_open = true;           // false between complete_rows and the regrow it prepares

  // LRU cache of full rows.
  std::int64_t capacity = 0;  // rows the cache may hold; < 2 means no caching
  std::vector<std::vector<float>> slots;
  std::vector<std::int32_t> slot_of;      // row -> slot or -1
  std::vector<std::int32_t> owner;        // slot -> row
  std::vector<std::int64_t> slot_epoch;
  std::list<std::int32_t> lru;            // front: most recently used slot
  std::vector<std::list<std::int32_t>::iterator> lru_pos;
  std::vector<float> tmp;

  Impl(const CsrMatrix& m, const SvmParams& params, const std::vector<Device*>& devices)
      : x(m), p(params), norms(m.sq_norms()) {
    if (devices.empty()) throw InputError("svm: no device to compute kernel rows on");
    for (Device* d : devices) {
      if (!d->supports(KernelId::CsrKernelRows))
        throw InputError("svm: device " + d->info().name + " does not run csr_kernel_rows");
      Dev s;
      s.dev = d;
      s.host = d->wrap_host(norms.data(), 8) != nullptr;
      s.row_ptr = to_device(*d, x.row_ptr);
      s.col_idx = to_device(*d, x.col_idx);
      s.values = to_device(*d, x.values);
      s.norms = to_device(*d, norms);
      devs.push_back(std::move(s));
    }
    const double row_bytes = 4.0 * std::max<std::int64_t>(1, x.rows);
    capacity = static_cast<std::int64_t>(p.cache_mb * 1048576.0 / row_bytes);
    slot_of.assign(x.rows, -1);
    active.resize(x.rows);
    std::iota(active.begin(), active.end(), 0);
  }

  // Splits [0, m) among the devices by measured rate (equal until measured).
  std::vector<std::int64_t> split(std::int64_t m) const {
    std::vector<double> w(devs.size());
    bool measured = true;
    for (std::size_t d = 0; d < devs.size(); ++d) measured = measured && devs[d].rate > 0;
    for (std::size_t d = 0; d < devs.size(); ++d) w[d] = measured ? devs[d].rate : 1.0;
    const double total = std::accumulate(w.begin(), w.end(), 0.0);
    std::vector<std::int64_t> off(devs.size() + 1, 0);
    double acc = 0;
    for (std::size_t d = 0; d < devs.size(); ++d) {
      acc += w[d];
      off[d + 1] = d + 1 == devs.size() ? m : static_cast<std::int64_t>(m * (acc / total));
    }
    return off;
  }

  template <class T>
  static Buffer* ensure(Dev& s, std::unique_ptr<Buffer>& b, std::size_t& cap, std::size_t count) {
    const std::size_t bytes = std::max<std::size_t>(1, count * sizeof(T));
    if (!b || cap < bytes) {
      b = s.dev->allocate(bytes);
      cap = bytes;
    }
    return b.get();
  }

  // out[a*m + b] = K(x_q[a], x_t[b]) for m targets; `version` >= 0 names a
  // target list that does not change between calls with the same version.
  void launch(const std::int32_t* q, std::int64_t nq, const std::int32_t* t, std::int64_t m, float* out,
              std::int64_t version) {
    if (nq == 0 || m == 0) return;
    const auto off = split(m);
    std::vector<Event> events(devs.size());
    std::vector<std::unique_ptr<Buffer>> held;  // wrapped host buffers alive until the waits
    std::vector<std::vector<float>> parts(devs.size());
    const bool single = devs.size() == 1;
    std::vector<clock_type::time_point> t0(devs.size());
    for (std::size_t d = 0; d < devs.size(); ++d) {
      Dev& s = devs[d];
      const std::int64_t md = off[d + 1] - off[d];
      if (md == 0) continue;
      CsrKernelRowsArgs a;
      a.row_ptr = s.row_ptr.get();
      a.col_idx = s.col_idx.get();
      a.values = s.values.get();
      a.sq_norms = s.norms.get();
      a.n = x.rows;
      a.nnz = x.nnz();
      a.cols = std::max<std::int64_t>(1, x.cols);
      a.q = nq;
      a.m = md;
      a.type = p.kernel;
      a.gamma = p.gamma;
      a.coef0 = p.coef0;
      a.degree = p.degree;
      float* dst = out;
      if (!single) {
        parts[d].resize(nq * md);
        dst = parts[d].data();
      }
      if (s.host) {
        held.push_back(s.dev->wrap_host(const_cast<std::int32_t*>(q), nq * sizeof(std::int32_t)));
        a.queries = held.back().get();
        held.push_back(s.dev->wrap_host(const_cast<std::int32_t*>(t + off[d]), md * sizeof(std::int32_t)));
        a.active = held.back().get();
        held.push_back(s.dev->wrap_host(dst, nq * md * sizeof(float)));
        a.out = held.back().get();
      } else {
        a.queries = ensure<std::int32_t>(s, s.queries, s.queries_cap, nq);
        a.queries->write(q, nq * sizeof(std::int32_t));
        a.active = ensure<std::int32_t>(s, s.targets, s.targets_cap, md);
        if (version < 0 || version != s.targets_version || s.targets_src != t + off[d] || s.targets_len != md) {
          a.active->write(t + off[d], md * sizeof(std::int32_t));
          s.targets_version = version;
          s.targets_src = t + off[d];
          s.targets_len = md;
        }
        a.out = ensure<float>(s, s.out, s.out_cap, nq * md);
      }
      t0[d] = clock_type::now();
      events[d] = s.dev->launch(a);
    }
    for (std::size_t d = 0; d < devs.size(); ++d) {
      Dev& s = devs[d];
      const std::int64_t md = off[d + 1] - off[d];
      if (md == 0) continue;
      events[d].wait();
      const double sec = std::max(1e-9, std::chrono::duration<double>(clock_type::now() - t0[d]).count());
      float* dst = single ? out : parts[d].data();
      if (!s.host) s.out->read(dst, nq * md * sizeof(float));
      const double r = double(md) * nq / sec;
      s.rate = s.rate == 0 ? r : 0.8 * s.rate + 0.2 * r;
      if (!single)
        for (std::int64_t a = 0; a < nq; ++a)
          std::memcpy(out + a * m + off[d], parts[d].data() + a * md, md * sizeof(float));
    }
  }

  std::int32_t take_slot(const std::vector<std::int32_t>& pinned) {
    std::int32_t s;
    if (static_cast<std::int64_t>(slots.size()) < std::max<std::int64_t>(capacity, 2)) {
      s = static_cast<std::int32_t>(slots.size());
      slots.emplace_back(x.rows);
      owner.push_back(-1);
      slot_epoch.push_back(-1);
      lru.push_front(s);
      lru_pos.push_back(lru.begin());
    } else {
      auto it = std::prev(lru.end());
      while (std::find(pinned.begin(), pinned.end(), *it) != pinned.end()) --it;
      s = *it;
      if (owner[s] >= 0) slot_of[owner[s]] = -1;
    }
    lru.splice(lru.begin(), lru, lru_pos[s]);
    return s;
  }
};

KernelRows::KernelRows(const CsrMatrix& x, const SvmParams& params, const std::vector<Device*>& devices)
    : impl_(std::make_unique<Impl>(x, params, devices)) {
  diag_.resize(x.rows);
  for (std::int64_t i = 0; i < x.rows; ++i) diag_[i] = kernel_of_dot(params, impl_->norms[i], impl_->norms[i], impl_->norms[i]);
}

KernelRows::~KernelRows() = default;

void KernelRows::set_active(const std::vector<std::int32_t>& active, bool grew) {
  impl_->active = active;
  ++impl_->active_version;
  if (grew) ++impl_->epoch;
  impl_->epoch_open = true;
}

std::vector<const float*> KernelRows::rows(const std::vector<std::int32_t>& queries) {
  Impl& s = *impl_;
  const bool caching = s.capacity >= 2;
  std::vector<const float*> out(queries.size());
  std::vector<std::int32_t> miss_rows, miss_slots, pinned;
  for (std::size_t a = 0; a < queries.size(); ++a) {
    const std::int32_t i = queries[a];
    const std::int32_t slot = s.slot_of[i];
    if (caching && slot >= 0 && s.slot_epoch[slot] == s.epoch && s.epoch_open) {
      ++hits_;
      s.lru.splice(s.lru.begin(), s.lru, s.lru_pos[slot]);
      pinned.push_back(slot);
      out[a] = s.slots[slot].data();
      continue;
    }
    // A repeated query in one request shares the first one's slot.
    const auto dup = std::find(miss_rows.begin(), miss_rows.end(), i);
    if (dup != miss_rows.end()) {
      out[a] = s.slots[miss_slots[dup - miss_rows.begin()]].data();
      continue;
    }
    ++misses_;
    const std::int32_t fresh = s.take_slot(pinned);
    pinned.push_back(fresh);
    s.owner[fresh] = i;
    s.slot_of[i] = fresh;
    s.slot_epoch[fresh] = caching ? s.epoch : -1;
    miss_rows.push_back(i);
    miss_slots.push_back(fresh);
    out[a] = s.slots[fresh].data();
  }
  if (miss_rows.empty()) return out;
  const std::int64_t m = static_cast<std::int64_t>(s.active.size());
  const std::int64_t nq = static_cast<std::int64_t>(miss_rows.size());
  s.tmp.resize(nq * m);
  s.launch(miss_rows.data(), nq, s.active.data(), m, s.tmp.data(), s.active_version);
  for (std::int64_t a = 0; a < nq; ++a) {
    float* row = s.slots[miss_slots[a]].data();
    const float* src = s.tmp.data() + a * m;
    const std::int32_t* act = s.active.data();
    for (std::int64_t b = 0; b < m; ++b) row[act[b]] = src[b];
  }
  return out;
}

void KernelRows::complete_rows(const std::vector<std::int32_t>& queries, const std::vector<std::int32_t>& targets,
                               const float* values) {
  Impl& s = *impl_;
  const std::size_t m = targets.size();
  for (std::size_t a = 0; a < queries.size(); ++a) {
    const std::int32_t slot = s.slot_of[queries[a]];
    if (slot < 0 || s.slot_epoch[slot] != s.epoch) continue;
    float* row = s.slots[slot].data();
    const float* src = values + a * m;
    for (std::size_t b = 0; b < m; ++b) row[targets[b]] = src[b];
    s.slot_epoch[slot] = s.epoch + 1;  // valid in the epoch the coming regrow starts
  }
  s.epoch_open = false;
}

void KernelRows::compute(const std::vector<std::int32_t>& queries, const std::vector<std::int32_t>& targets,
                         float* out) {
  impl_->launch(queries.data(), static_cast<std::int64_t>(queries.size()), targets.data(),
                static_cast<std::int64_t>(targets.size()), out, -1);
}

}  // namespace accel
