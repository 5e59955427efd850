// Kernel rows for the SMO solver: the CSR matrix lives on every device (once,
// or wrapped without a copy where the device shares host memory); each
// request splits the target rows among the devices in proportion to their
// measured rate and launches csr_kernel_rows on all of them at once.
//
// The LRU cache keeps each row only over the samples it covers (compact, the
// way LIBSVM's cache keeps rows of the active length), so shrinking makes room
// for more rows instead of leaving full-length rows mostly stale. A cached row
// that covers more than the active set is compacted in place when next used;
// one that covers less (samples came back) gets only its missing values
// computed. The cache is bounded in bytes (-m).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <list>
#include <map>
#include <memory>
#include <numeric>
#include <tuple>
#include <utility>

#include "accel/error.hpp"
#include "accel/svm.hpp"

namespace accel {
namespace {

// Queries per launch when prefetching: the CPU kernel serves up to four per
// pass over the rows.
constexpr int kPassQueries = 4;
// Rows per launch when many are missing (a batched working set): enough for
// the matrix-product path's full rate.
constexpr std::size_t kLaunchQueries = 256;

using clock_type = std::chrono::steady_clock;

// Storage of cached rows: resize leaves new values uninitialised, since
// every one is written before it is read (a launch's output is copied in
// whole), and zeroing a row first would be a second pass over memory
// that is touched for the first time.
template <class T>
struct Uninit : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = Uninit<U>;
  };
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
};
using RowValues = std::vector<float, Uninit<float>>;

// A vector on a device: wrapped where the device shares host memory (its
// capacity, so that rows appended within it need no new wrap), copied
// otherwise.
template <class T>
std::unique_ptr<Buffer> to_device(Device& dev, const std::vector<T>& v) {
  if (auto b = dev.wrap_host(const_cast<T*>(v.data()), std::max<std::size_t>(1, v.capacity() * sizeof(T)))) return b;
  const std::size_t bytes = std::max<std::size_t>(1, v.size() * sizeof(T));
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
  // A device's buffers for one launch in flight. Two per device: the next
  // batch's copies and launch go ahead while the last batch's rows are read
  // back and stored (each its own buffers: a device's copies run beside
  // its launches, so a shared one would change under a running launch).
  struct Slot {
    std::unique_ptr<Buffer> targets, queries, out;
    std::size_t targets_cap = 0, queries_cap = 0, out_cap = 0;
    const std::int32_t* targets_src = nullptr;  // what `targets` holds (device copy), to skip re-uploads
    std::int64_t targets_len = -1, targets_version = -1;
  };
  struct Dev {
    Device* dev;
    bool host = false;  // shares host memory: wrap_host instead of copies
    std::unique_ptr<Buffer> row_ptr, col_idx, values, norms;
    const void* wrapped[4] = {};  // host: the memory wrapped, and its capacity
    std::size_t wrapped_cap[4] = {};
    Slot slots[2];
    double rate = 0;  // target rows x queries per second, smoothed
  };
  // The host's side of a launch in flight, until finish().
  struct Flight {
    std::int64_t nq = 0, m = 0;
    float* out = nullptr;
    std::vector<std::int64_t> off;  // each device's targets [off[d], off[d+1])
    std::vector<Event> events;
    std::vector<clock_type::time_point> t0;
    std::vector<std::vector<float>> parts;      // each device's rows, when there are several
    std::vector<std::unique_ptr<Buffer>> held;  // wrapped host buffers alive until the waits
  };

  const CsrMatrix& x;
  SvmParams p;
  std::vector<std::int32_t> row_of;  // variable -> row of x; empty: the identity
  // Per slot: the queries and the mapped targets of its launch, alive until
  // its copies are done; and the rows computed, read back.
  std::vector<std::int32_t> slot_q[2], slot_t[2];
  std::vector<float> slot_out[2];
  std::vector<double> norms;
  std::vector<Dev> devs;
  using Cover = std::shared_ptr<const std::vector<std::int32_t>>;  // sorted sample indices
  Cover active;
  std::int64_t active_version = 0;  // bumps on every set_active

  // One cached row: K(x_row, x_t) for every t in *cover, in cover's order.
  struct Entry {
    std::int32_t row = -1;
    Cover cover;
    bool own_cover = false;  // cover belongs to this entry alone (counted in bytes)
    bool prefetched = false;  // computed ahead of a request, not yet asked for
    RowValues vals;
    std::int64_t call = -1;  // last rows() call that returned it
    std::list<std::int32_t>::iterator lru;
    std::int64_t bytes() const { return 4 * static_cast<std::int64_t>(vals.size() + (own_cover ? cover->size() : 0)); }
  };
  std::int64_t computed = 0;  // kernel values computed on the devices
  std::int64_t budget = 0;  // bytes
  std::int64_t used = 0;
  std::int64_t call = 0;
  int held_calls = 2;  // rows of this many latest rows() calls are never evicted
  bool exact = false;  // dot products in double on every device
  std::vector<Entry> entries;
  std::vector<std::int32_t> free_entries;
  std::vector<std::int32_t> entry_of;  // row -> entry or -1
  std::list<std::int32_t> lru;         // front: most recently used
  std::vector<RowValues> spare;  // storage of evicted rows, reused

  Impl(const CsrMatrix& m, const SvmParams& params, const std::vector<Device*>& devices, std::vector<std::int32_t> rows)
      : x(m), p(params), row_of(std::move(rows)), norms(m.sq_norms()) {
    if (devices.empty()) throw InputError("svm: no device to compute kernel rows on");
    norms.reserve(x.row_ptr.capacity());  // as much room as the rows (rows_changed)
    for (Device* d : devices) {
      if (!d->supports(KernelId::CsrKernelRows))
        throw InputError("svm: device " + d->info().name + " does not run csr_kernel_rows");
      Dev s;
      s.dev = d;
      s.host = d->wrap_host(norms.data(), 8) != nullptr;
      upload(s);
      devs.push_back(std::move(s));
    }
    budget = static_cast<std::int64_t>(std::max(0.0, p.cache_mb) * 1048576.0);
    const std::int64_t vars = row_of.empty() ? x.rows : static_cast<std::int64_t>(row_of.size());
    entry_of.assign(vars, -1);
    auto all = std::make_shared<std::vector<std::int32_t>>(vars);
    std::iota(all->begin(), all->end(), 0);
    active = std::move(all);
  }

  // The matrix and its norms on device s: wrapped where it shares host
  // memory, copied otherwise.
  void upload(Dev& s) {
    s.row_ptr = to_device(*s.dev, x.row_ptr);
    s.col_idx = to_device(*s.dev, x.col_idx);
    s.values = to_device(*s.dev, x.values);
    s.norms = to_device(*s.dev, norms);
    for (int b = 0; b < 4; ++b) std::tie(s.wrapped[b], s.wrapped_cap[b]) = memory(b);
  }

  // Buffer b's host memory (row_ptr, col_idx, values, norms): where, and
  // how much is there.
  std::pair<const void*, std::size_t> memory(int b) const {
    switch (b) {
      case 0: return {x.row_ptr.data(), x.row_ptr.capacity()};
      case 1: return {x.col_idx.data(), x.col_idx.capacity()};
      case 2: return {x.values.data(), x.values.capacity()};
      default: return {norms.data(), norms.capacity()};
    }
  }

  // Rows from `first` on changed: their norms, and the devices' copies (a
  // device that copies gets only the changed tail while its buffers are
  // large enough; wrapped host memory may have moved, so it is wrapped
  // again).
  void rows_changed(std::int64_t first) {
    if (norms.capacity() < x.row_ptr.capacity()) norms.reserve(x.row_ptr.capacity());
    norms.resize(x.rows);
    for (std::int64_t i = first; i < x.rows; ++i) {
      double sum = 0;  // CsrMatrix::sq_norms' arithmetic
      for (std::int64_t k = x.row_ptr[i]; k < x.row_ptr[i + 1]; ++k) sum += double(x.values[k]) * double(x.values[k]);
      norms[i] = sum;
    }
    const std::size_t at = static_cast<std::size_t>(x.row_ptr[first]);
    for (Dev& s : devs) {
      if (s.host) {
        // The same memory (the vectors grew within their capacity): the
        // wraps stay, told where their contents changed, so the device
        // keeps what it derived from the rows before (the cpu's copy of
        // the own rows' dense columns).
        bool same = true;
        for (int b = 0; b < 4; ++b) same = same && memory(b) == std::make_pair(s.wrapped[b], s.wrapped_cap[b]);
        if (!same) {
          upload(s);
          continue;
        }
        s.row_ptr->changed_from((first + 1) * 8);
        s.col_idx->changed_from(at * 4);
        s.values->changed_from(at * 4);
        s.norms->changed_from(first * 8);
        continue;
      }
      const auto fits = [](const std::unique_ptr<Buffer>& b, std::size_t bytes) { return b && b->size() >= bytes; };
      if (!fits(s.row_ptr, x.row_ptr.size() * 8) || !fits(s.col_idx, x.col_idx.size() * 4) ||
          !fits(s.values, x.values.size() * 4) || !fits(s.norms, norms.size() * 8)) {
        upload(s);
        continue;
      }
      s.row_ptr->write(x.row_ptr.data() + first, (x.row_ptr.size() - first) * 8, first * 8);
      if (x.col_idx.size() > at) {
        s.col_idx->write(x.col_idx.data() + at, (x.col_idx.size() - at) * 4, at * 4);
        s.values->write(x.values.data() + at, (x.values.size() - at) * 4, at * 4);
      }
      if (x.rows > first) s.norms->write(norms.data() + first, (x.rows - first) * 8, first * 8);
    }
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
    Flight f = start(q, nq, t, m, out, version, 0);
    finish(f, 0);
  }

  // Copies and launches on every device, split by measured rate, using
  // slot `slot`'s buffers; finish() waits and gathers the rows into out.
  // The queries are copied (slot_q); t and out stay the caller's until then.
  Flight start(const std::int32_t* q, std::int64_t nq, const std::int32_t* t, std::int64_t m, float* out,
               std::int64_t version, int slot) {
    Flight f;
    f.nq = nq;
    f.m = m;
    f.out = out;
    if (nq == 0 || m == 0) return f;
    computed += nq * m;
    auto& qs = slot_q[slot];
    qs.assign(q, q + nq);
    if (!row_of.empty()) {  // variables -> rows of x
      auto& ts = slot_t[slot];
      ts.resize(m);
      for (auto& v : qs) v = row_of[v];
      for (std::int64_t b = 0; b < m; ++b) ts[b] = row_of[t[b]];
      t = ts.data();
      version = -1;  // the mapped list lives in one buffer whatever its contents
    }
    q = qs.data();
    f.off = split(m);
    f.events.resize(devs.size());
    f.parts.resize(devs.size());
    f.t0.resize(devs.size());
    try {
      for (std::size_t d = 0; d < devs.size(); ++d) {
        const std::int64_t md = f.off[d + 1] - f.off[d];
        if (md > 0) f.events[d] = start_on(d, f, q, t + f.off[d], md, version, slot);
      }
    } catch (...) {
      drain(f);
      throw;
    }
    return f;
  }

  // Waits for a flight's launches, whatever they throw: on an error
  // elsewhere, before the memory they write into goes.
  static void drain(const Flight& f) {
    for (const Event& e : f.events) {
      try {
        e.wait();
      } catch (...) {
      }
    }
  }

  // Device d's share of a launch: md targets from t.
  Event start_on(std::size_t d, Flight& f, const std::int32_t* q, const std::int32_t* t, std::int64_t md,
                 std::int64_t version, int slot) {
    Dev& s = devs[d];
    Slot& sl = s.slots[slot];
    const std::int64_t nq = f.nq;
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
    a.exact = exact;
    float* dst = f.out;
    if (devs.size() > 1) {
      f.parts[d].resize(nq * md);
      dst = f.parts[d].data();
    }
    std::vector<Event> copies;  // on each device's copy queue: one device's copy runs beside another's launch
    if (s.host) {
      f.held.push_back(s.dev->wrap_host(const_cast<std::int32_t*>(q), nq * sizeof(std::int32_t)));
      a.queries = f.held.back().get();
      f.held.push_back(s.dev->wrap_host(const_cast<std::int32_t*>(t), md * sizeof(std::int32_t)));
      a.active = f.held.back().get();
      f.held.push_back(s.dev->wrap_host(dst, nq * md * sizeof(float)));
      a.out = f.held.back().get();
    } else {
      a.queries = ensure<std::int32_t>(s, sl.queries, sl.queries_cap, nq);
      copies.push_back(a.queries->write_async(q, nq * sizeof(std::int32_t)));
      a.active = ensure<std::int32_t>(s, sl.targets, sl.targets_cap, md);
      if (version < 0 || version != sl.targets_version || sl.targets_src != t || sl.targets_len != md) {
        copies.push_back(a.active->write_async(t, md * sizeof(std::int32_t)));
        sl.targets_version = version;
        sl.targets_src = t;
        sl.targets_len = md;
      }
      a.out = ensure<float>(s, sl.out, sl.out_cap, nq * md);
    }
    f.t0[d] = clock_type::now();
    return s.dev->launch(a, std::move(copies));
  }

  // Waits for a launch: each device's rows are read as soon as its launch
  // is done, beside the others' launches, then gathered into f.out.
  void finish(Flight& f, int slot) {
    if (f.off.empty()) return;  // nothing launched
    std::vector<Event> reads;
    std::exception_ptr failed;
    for (std::size_t d = 0; d < devs.size(); ++d) {
      Dev& s = devs[d];
      const std::int64_t md = f.off[d + 1] - f.off[d];
      if (md == 0) continue;
      try {
        f.events[d].wait();
      } catch (...) {
        if (!failed) failed = std::current_exception();
        continue;
      }
      const double sec = std::max(1e-9, std::chrono::duration<double>(clock_type::now() - f.t0[d]).count());
      const double r = double(md) * f.nq / sec;
      s.rate = s.rate == 0 ? r : 0.8 * s.rate + 0.2 * r;
      float* dst = devs.size() == 1 ? f.out : f.parts[d].data();
      if (!s.host) reads.push_back(s.slots[slot].out->read_async(dst, f.nq * md * sizeof(float)));
    }
    wait_all(reads);
    f.held.clear();
    if (failed) std::rethrow_exception(failed);
    for (std::size_t d = 0; d < devs.size() && devs.size() > 1; ++d) {
      const std::int64_t md = f.off[d + 1] - f.off[d];
      if (md > 0)
        for (std::int64_t a = 0; a < f.nq; ++a)
          std::memcpy(f.out + a * f.m + f.off[d], f.parts[d].data() + a * md, md * sizeof(float));
    }
  }

  // The rows of new entries `fulls` over the active set `cur`, in launches
  // of at most kLaunchQueries rows, so the staging buffer stays a fraction
  // of the rows themselves. Where a device copies (no shared host memory),
  // the next launch and its copies go ahead while a launch's rows are read
  // back and stored; on host devices the store would only take cores from
  // the launch.
  void compute_fulls(const std::vector<std::int32_t>& fulls, const std::vector<std::int32_t>& cur) {
    const std::int64_t m = static_cast<std::int64_t>(cur.size());
    const bool overlap = std::any_of(devs.begin(), devs.end(), [](const Dev& d) { return !d.host; });
    std::vector<std::int32_t> rows;
    Flight flights[2];
    std::size_t firsts[2] = {0, 0};  // each flight's first of fulls
    bool flying[2] = {false, false};
    const auto land = [&](int slot) {
      flying[slot] = false;
      finish(flights[slot], slot);
      const std::size_t f0 = firsts[slot];
      const float* got = slot_out[slot].data();
      // First touch of the rows' storage: page faults, shared by threads.
#pragma omp parallel for schedule(static) if (flights[slot].nq * m >= (1 << 18))
      for (std::int64_t a = 0; a < flights[slot].nq; ++a)
        std::memcpy(entries[fulls[f0 + a]].vals.data(), got + a * m, m * sizeof(float));
    };
    try {
      int slot = 0;
      for (std::size_t f0 = 0; f0 < fulls.size(); f0 += kLaunchQueries, slot = overlap ? 1 - slot : 0) {
        const std::size_t nq = std::min<std::size_t>(kLaunchQueries, fulls.size() - f0);
        rows.resize(nq);
        for (std::size_t a = 0; a < nq; ++a) rows[a] = entries[fulls[f0 + a]].row;
        slot_out[slot].resize(nq * m);
        flights[slot] = start(rows.data(), static_cast<std::int64_t>(nq), cur.data(), m, slot_out[slot].data(),
                              active_version, slot);
        firsts[slot] = f0;
        flying[slot] = true;
        if (!overlap) land(slot);
        else if (flying[1 - slot]) land(1 - slot);
      }
      for (int sl : {0, 1})
        if (flying[sl]) land(sl);
    } catch (...) {
      for (int sl : {0, 1})
        if (flying[sl]) drain(flights[sl]);
      throw;
    }
  }

  RowValues fresh_storage() {
    if (spare.empty()) return {};
    RowValues v = std::move(spare.back());
    spare.pop_back();
    return v;
  }
  void recycle(RowValues&& v) {
    if (spare.size() < 8 && v.capacity() > 0) spare.push_back(std::move(v));
  }

  std::int32_t new_entry(std::int32_t row) {
    std::int32_t e;
    if (!free_entries.empty()) {
      e = free_entries.back();
      free_entries.pop_back();
    } else {
      e = static_cast<std::int32_t>(entries.size());
      entries.emplace_back();
    }
    Entry& en = entries[e];
    en.row = row;
    en.vals = fresh_storage();
    lru.push_front(e);
    en.lru = lru.begin();
    entry_of[row] = e;
    return e;
  }

  // A new entry for `row`, to be computed over the whole active set.
  std::int32_t new_full_entry(std::int32_t row) {
    const std::int32_t e = new_entry(row);
    Entry& en = entries[e];
    en.cover = active;
    en.vals.resize(active->size());
    used += en.bytes();
    return e;
  }

  void drop(std::int32_t e) {
    Entry& en = entries[e];
    used -= en.bytes();
    entry_of[en.row] = -1;
    lru.erase(en.lru);
    recycle(std::move(en.vals));
    en = Entry{};
    free_entries.push_back(e);
  }

  // Evicts least recently used rows until the cache fits its budget; rows
  // returned by the latest held_calls calls stay (callers hold them).
  void enforce_budget() {
    auto it = lru.end();
    while (used > budget && it != lru.begin()) {
      --it;
      const std::int32_t e = *it;
      if (entries[e].call > call - held_calls) continue;
      it = std::next(it);  // drop() erases *prev(it)
      drop(e);
    }
  }

  // Re-fits entry e to the current active set: values the entry holds are
  // kept, missing ones are listed in `missing` (sorted) to be computed and
  // then merged by finish_partial. Returns true when nothing is missing.
  bool fit(Entry& en, std::vector<std::int32_t>& missing) {
    const auto& cur = *active;
    const auto& cov = *en.cover;
    missing.clear();
    std::size_t c = 0;
    for (const std::int32_t k : cur) {
      while (c < cov.size() && cov[c] < k) ++c;
      if (c == cov.size() || cov[c] != k) missing.push_back(k);
    }
    if (!missing.empty()) return false;
    // cur is a subsequence of cov: compact in place (write index <= read index).
    c = 0;
    for (std::size_t b = 0; b < cur.size(); ++b) {
      while (cov[c] < cur[b]) ++c;
      en.vals[b] = en.vals[c];
    }
    used -= en.bytes();
    en.vals.resize(cur.size());
    en.cover = active;
    en.own_cover = false;
    used += en.bytes();
    return true;
  }

  // Merges freshly computed values for `missing` into entry en, which then
  // covers exactly the active set.
  void finish_partial(Entry& en, const std::vector<std::int32_t>& missing, const float* computed) {
    const auto& cur = *active;
    const auto& cov = *en.cover;
    RowValues next = fresh_storage();
    next.resize(cur.size());
    std::size_t c = 0, mi = 0;
    for (std::size_t b = 0; b < cur.size(); ++b) {
      const std::int32_t k = cur[b];
      while (c < cov.size() && cov[c] < k) ++c;
      if (mi < missing.size() && missing[mi] == k)
        next[b] = computed[mi++];
      else
        next[b] = en.vals[c];
    }
    used -= en.bytes();
    recycle(std::move(en.vals));
    en.vals = std::move(next);
    en.cover = active;
    en.own_cover = false;
    used += en.bytes();
  }
};

KernelRows::KernelRows(const CsrMatrix& x, const SvmParams& params, const std::vector<Device*>& devices,
                       std::vector<std::int32_t> row_of)
    : impl_(std::make_unique<Impl>(x, params, devices, std::move(row_of))) {
  const auto& map = impl_->row_of;
  diag_.resize(map.empty() ? x.rows : map.size());
  for (std::size_t i = 0; i < diag_.size(); ++i) {
    if (!map.empty() && map[i] < 0) continue;  // a variable whose row this process does not hold
    const double nr = impl_->norms[map.empty() ? i : map[i]];
    diag_[i] = kernel_of_dot(params, nr, nr, nr);
  }
}

void KernelRows::rows_changed(std::int64_t first) {
  if (first < 0 || first > impl_->x.rows) throw std::logic_error("svm: rows changed from outside the matrix");
  impl_->rows_changed(first);
}

void KernelRows::remap(std::int32_t v, std::int32_t row) {
  Impl& s = *impl_;
  if (s.row_of.empty() || v < 0 || static_cast<std::size_t>(v) >= s.row_of.size() || row >= s.x.rows)
    throw std::logic_error("svm: a variable remapped outside the kernel's matrix");
  s.row_of[v] = row;
  const double nr = row < 0 ? 0.0 : s.norms[row];
  diag_[v] = row < 0 ? 0.0 : kernel_of_dot(s.p, nr, nr, nr);
}

KernelRows::~KernelRows() = default;

std::int64_t KernelRows::computed() const { return impl_->computed; }

void KernelRows::set_held_calls(int calls) { impl_->held_calls = std::max(1, calls); }

void KernelRows::set_exact(bool exact) { impl_->exact = exact; }

void KernelRows::set_active(const std::vector<std::int32_t>& active) {
  impl_->active = std::make_shared<const std::vector<std::int32_t>>(active);
  ++impl_->active_version;
}

std::vector<const float*> KernelRows::rows(const std::vector<std::int32_t>& queries,
                                          const std::vector<std::int32_t>& prefetch) {
  Impl& s = *impl_;
  ++s.call;
  const auto& cur = *s.active;
  std::vector<std::int32_t> fulls;                           // entries computed from scratch
  struct Group {
    std::vector<std::int32_t> missing;  // active samples the cover lacks
    std::vector<std::int32_t> entries;
  };
  std::map<const void*, Group> partial;  // entries by the cover they extend
  std::vector<std::int32_t> picked(queries.size());
  std::vector<std::int32_t> missing;
  for (std::size_t a = 0; a < queries.size(); ++a) {
    const std::int32_t i = queries[a];
    std::int32_t e = s.entry_of[i];
    if (e >= 0 && s.entries[e].call == s.call) {  // repeated within this request
      picked[a] = e;
      continue;
    }
    if (e < 0) {
      e = s.new_full_entry(i);
      fulls.push_back(e);
      ++misses_;
    } else {
      Impl::Entry& en = s.entries[e];
      s.lru.splice(s.lru.begin(), s.lru, en.lru);
      if (en.prefetched) {
        en.prefetched = false;
        ++prefetch_used_;
      }
      if (en.cover == s.active || s.fit(en, missing)) {
        ++hits_;
      } else {
        Group& g = partial[en.cover.get()];
        if (g.entries.empty()) g.missing = missing;
        g.entries.push_back(e);
        ++misses_;
      }
    }
    s.entries[e].call = s.call;
    picked[a] = e;
  }
  // Rows the caller expects to want soon ride along with a pass that happens
  // anyway: reading the active rows is the cost, extra queries add little.
  if (!fulls.empty()) {
    for (const std::int32_t i : prefetch) {
      if (static_cast<int>(fulls.size()) >= kPassQueries) break;
      if (s.entry_of[i] >= 0) continue;
      const std::int32_t e = s.new_full_entry(i);
      s.entries[e].prefetched = true;
      fulls.push_back(e);
      ++prefetched_;
    }
  }
  s.compute_fulls(fulls, cur);
  // Rows that cover part of the active set (samples came back since they
  // were computed): every row extending the same cover misses the same
  // samples, so each group is one launch over just those.
  for (auto& [cover, g] : partial) {
    const std::int64_t nq = static_cast<std::int64_t>(g.entries.size()), mm = static_cast<std::int64_t>(g.missing.size());
    std::vector<std::int32_t> rows(nq);
    for (std::int64_t a = 0; a < nq; ++a) rows[a] = s.entries[g.entries[a]].row;
    auto& got = s.slot_out[0];
    got.resize(nq * mm);
    s.launch(rows.data(), nq, g.missing.data(), mm, got.data(), -1);
    for (std::int64_t a = 0; a < nq; ++a) s.finish_partial(s.entries[g.entries[a]], g.missing, got.data() + a * mm);
  }
  s.enforce_budget();
  std::vector<const float*> out(queries.size());
  for (std::size_t a = 0; a < queries.size(); ++a) out[a] = s.entries[picked[a]].vals.data();
  return out;
}

void KernelRows::complete_rows(const std::vector<std::int32_t>& queries, const std::vector<std::int32_t>& targets,
                               const float* values) {
  Impl& s = *impl_;
  const std::size_t m = targets.size();
  for (std::size_t a = 0; a < queries.size(); ++a) {
    const std::int32_t e = s.entry_of[queries[a]];
    if (e < 0) continue;
    Impl::Entry& en = s.entries[e];
    const auto& cov = *en.cover;
    const float* src = values + a * m;
    // Union of the two sorted lists; where both hold a sample the values agree.
    auto cover = std::make_shared<std::vector<std::int32_t>>();
    RowValues vals = s.fresh_storage();
    vals.clear();
    cover->reserve(cov.size() + m);
    vals.reserve(cov.size() + m);
    std::size_t c = 0, t = 0;
    while (c < cov.size() || t < m) {
      if (t == m || (c < cov.size() && cov[c] < targets[t])) {
        cover->push_back(cov[c]);
        vals.push_back(en.vals[c++]);
      } else {
        if (c < cov.size() && cov[c] == targets[t]) ++c;
        cover->push_back(targets[t]);
        vals.push_back(src[t++]);
      }
    }
    s.used -= en.bytes();
    s.recycle(std::move(en.vals));
    en.vals = std::move(vals);
    en.cover = std::move(cover);
    en.own_cover = true;
    s.used += en.bytes();
  }
  s.enforce_budget();
}

void KernelRows::compute(const std::vector<std::int32_t>& queries, const std::vector<std::int32_t>& targets,
                         float* out) {
  impl_->launch(queries.data(), static_cast<std::int64_t>(queries.size()), targets.data(),
                static_cast<std::int64_t>(targets.size()), out, -1);
}

}  // namespace accel
