#include "accel/topk.hpp"

#include <omp.h>

#include <algorithm>
#include <optional>
#include <span>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "accel/device.hpp"
#include "accel/error.hpp"

namespace accel {
namespace {

constexpr std::uint32_t kInfBits = 0x7f800000u;
// The histogram pass: bins of 2^18 ulps (5 mantissa bits left: 3% wide).
// 8160 counters stay in L2 even with the CPU kernel's per-thread copies,
// and for a Laplacian a bin near the top-0.1% threshold holds ~0.2k values,
// so some bin edge always lands within [k, 1.5k].
constexpr int kCoarseShift = 18;

std::uint32_t bits_of(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}
float float_of(std::uint32_t u) {
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

// S = {i : R_i finite, |R_i| >= tau}, ascending. OpenMP threads collect
// their contiguous slices and the slices are concatenated in order.
std::vector<std::int64_t> collect(const float* r, std::int64_t n, float tau) {
  const std::uint32_t t = bits_of(tau) & 0x7fffffffu;
  std::vector<std::vector<std::int64_t>> parts(omp_get_max_threads());
#pragma omp parallel
  {
    auto& mine = parts[omp_get_thread_num()];
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      const std::uint32_t u = bits_of(r[i]) & 0x7fffffffu;
      if (u >= t && u < kInfBits) mine.push_back(i);
    }
  }
  std::vector<std::int64_t> out;
  std::size_t total = 0;
  for (auto& p : parts) total += p.size();
  out.reserve(total);
  for (auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// One pass: finite indices with |R| bits >= hi (certainly selected) and
// those in [lo, hi) (candidates inside the k-th bin), both ascending.
void collect_split(const float* r, std::int64_t n, std::uint32_t lo, std::uint32_t hi, std::vector<std::int64_t>& above,
                   std::vector<std::int64_t>& inside) {
  const int threads = omp_get_max_threads();
  std::vector<std::vector<std::int64_t>> a(threads), c(threads);
#pragma omp parallel
  {
    auto& ma = a[omp_get_thread_num()];
    auto& mc = c[omp_get_thread_num()];
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      const std::uint32_t u = bits_of(r[i]) & 0x7fffffffu;
      if (u >= hi) {
        if (u < kInfBits) ma.push_back(i);
      } else if (u >= lo) {
        mc.push_back(i);
      }
    }
  }
  for (auto& p : a) above.insert(above.end(), p.begin(), p.end());
  for (auto& p : c) inside.insert(inside.end(), p.begin(), p.end());
}

std::int64_t first_nonfinite(const float* r, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i)
    if (!std::isfinite(r[i])) return i;
  return -1;
}

// The Laplacian threshold: for X ~ Laplace(mu, b), P(|X| >= t) =
// exp(-t/b) cosh(mu/b) when t >= |mu|; setting it to ratio gives
// t = b (ln(1/ratio) + ln cosh(mu/b)). mu and b from the sample mean and
// variance by maximum likelihood as Chen et al. 2021 do (b = sqrt(D[X] / 2)).
double laplace_threshold(double sum, double sumsq, std::int64_t count, double ratio) {
  if (count <= 0) return 0;
  const double mu = sum / count;
  const double var = std::max(0.0, sumsq / count - mu * mu);
  const double b = std::sqrt(var / 2);
  if (!(b > 0)) return std::abs(mu);
  const double a = std::abs(mu) / b;
  // ln cosh(a) without overflow for large a.
  const double lncosh = a + std::log1p(std::exp(-2 * a)) - std::log(2.0);
  return std::max(std::abs(mu), b * (std::log(1 / ratio) + lncosh));
}

}  // namespace

TopKMethod parse_topk_method(const std::string& s) {
  if (s == "exact") return TopKMethod::Exact;
  if (s == "ldte-bs") return TopKMethod::LdteBs;
  if (s == "ldte-hist") return TopKMethod::LdteHist;
  if (s == "nth_element") return TopKMethod::NthElement;
  if (s == "sample") return TopKMethod::Sample;
  throw InputError("--method " + s + ": expected exact, ldte-bs, ldte-hist, nth_element or sample");
}

std::string to_string(TopKMethod m) {
  switch (m) {
    case TopKMethod::Exact: return "exact";
    case TopKMethod::LdteBs: return "ldte-bs";
    case TopKMethod::LdteHist: return "ldte-hist";
    case TopKMethod::NthElement: return "nth_element";
    case TopKMethod::Sample: return "sample";
  }
  return "unknown";
}

struct TopKSelector::Buffers {
  Buffer* data = nullptr;        // R: own_data, a wrapped host array or the caller's device buffer
  std::unique_ptr<Buffer> own_data;
  std::unique_ptr<Buffer> hist, moments, outside, cand, cand_count, cand_values;
  // The candidates and their values on the host, kept between calls: MBs
  // allocated afresh each call cost their page faults again.
  std::vector<std::int64_t> host_cand;
  std::vector<float> host_values;
  std::vector<std::int64_t> sort_scratch;
  std::vector<float> sample, sample_scratch;  // window_floor's
};

struct TopKSelector::Histogram {
  std::vector<std::uint64_t> counts;
  std::span<const std::int64_t> candidates;  // when collected and within capacity (the selector's memory)
  std::span<const float> values;             // candidates' values, in their order
  bool ascending = true;                 // candidates in index order (GPUs list them in any)
  std::int64_t candidates_found = -1;    // -1: not collected
  double sum = 0, sumsq = 0, maxabs = 0;
  std::uint64_t below = 0, above = 0, nonfinite = 0;
  double pass_seconds = 0, copy_seconds = 0;  // this pass's launch, and its copies back
};

TopKSelector::TopKSelector(Device* device) : device_(device), buf_(std::make_unique<Buffers>()) {
  if (!device_->supports(KernelId::TopKHistogram))
    throw InputError(device_->info().name + " does not run topk_histogram");
  buf_->hist = device_->allocate((kInfBits >> kCoarseShift) * sizeof(std::uint64_t));
  buf_->moments = device_->allocate(3 * sizeof(double));
  buf_->outside = device_->allocate(3 * sizeof(std::uint64_t));
}

TopKSelector::~TopKSelector() = default;

void TopKSelector::bind(const float* r, std::int64_t n) {
  // Host-memory devices read R in place; the others get a copy per call
  // into a device buffer kept while the size fits.
  const std::size_t bytes = std::max<std::size_t>(n * sizeof(float), 1);
  if (auto wrapped = device_->wrap_host(const_cast<float*>(r), bytes)) {
    buf_->own_data = std::move(wrapped);
  } else {
    if (!buf_->own_data || buf_->own_data->size() < bytes) buf_->own_data = device_->allocate(bytes);
    if (n > 0) buf_->own_data->write(r, n * sizeof(float));
  }
  buf_->data = buf_->own_data.get();
}

TopKSelector::Histogram TopKSelector::run_histogram(std::int64_t n, std::uint32_t lo, std::uint32_t hi, int shift,
                                                    std::int64_t bins, std::int64_t capacity, bool want_moments) {
  TopKHistogramArgs a{buf_->data, buf_->hist.get(), buf_->moments.get(), buf_->outside.get(), n, lo, hi, shift,
                      bins};
  a.want_moments = want_moments;
  if (capacity > 0) {
    const std::size_t bytes = capacity * sizeof(std::int64_t);
    if (!buf_->cand || buf_->cand->size() < bytes) buf_->cand = device_->allocate(bytes);
    if (!buf_->cand_count) buf_->cand_count = device_->allocate(sizeof(std::uint64_t));
    if (!buf_->cand_values || buf_->cand_values->size() < capacity * sizeof(float))
      buf_->cand_values = device_->allocate(capacity * sizeof(float));
    a.candidates = buf_->cand.get();
    a.candidate_count = buf_->cand_count.get();
    a.candidate_values = buf_->cand_values.get();
    a.capacity = capacity;
  }
  const auto t0 = std::chrono::steady_clock::now();
  device_->launch_and_wait(a);
  const auto t1 = std::chrono::steady_clock::now();
  Histogram h;
  h.counts.resize(bins);
  buf_->hist->read(h.counts.data(), bins * sizeof(std::uint64_t));
  double m[3];
  std::uint64_t o[3];
  buf_->moments->read(m, sizeof m);
  buf_->outside->read(o, sizeof o);
  h.sum = m[0];
  h.sumsq = m[1];
  h.maxabs = m[2];
  h.below = o[0];
  h.above = o[1];
  h.nonfinite = o[2];
  if (capacity > 0) {
    std::uint64_t found = 0;
    buf_->cand_count->read(&found, sizeof found);
    h.candidates_found = static_cast<std::int64_t>(found);
    if (h.candidates_found <= capacity) {
      // In place where the host can address the device's memory.
      const auto* idx = static_cast<const std::int64_t*>(buf_->cand->host_ptr());
      const auto* val = static_cast<const float*>(buf_->cand_values->host_ptr());
      if (idx == nullptr || val == nullptr) {
        auto& ci = buf_->host_cand;
        auto& cv = buf_->host_values;
        if (ci.size() < found) ci.resize(found);
        if (cv.size() < found) cv.resize(found);
        buf_->cand->read(ci.data(), found * sizeof(std::int64_t));
        buf_->cand_values->read(cv.data(), found * sizeof(float));
        idx = ci.data();
        val = cv.data();
      }
      h.candidates = {idx, static_cast<std::size_t>(found)};
      h.values = {val, static_cast<std::size_t>(found)};
      // Devices may list them in any order (GPU atomics): then S is sorted
      // once it is picked, not all the candidates now.
      h.ascending = std::is_sorted(h.candidates.begin(), h.candidates.end());
    }
  }
  h.pass_seconds = std::chrono::duration<double>(t1 - t0).count();
  h.copy_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  return h;
}

// One select() call: its input, its result so far, and the two endings
// every method shares.
struct TopKSelector::Run {
  const float* r;  // R on the host; null while R is only in a device buffer
  std::int64_t n;
  const TopKOptions& opts;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  TopKResult res;
  const Buffer* device = nullptr;  // R's buffer when the caller's R is on the device
  std::vector<float> fetched;      // R copied to the host, for the paths that read all of it

  // R on the host: a device-resident R is copied the first time a path
  // needs all of it (the baselines, ldte-bs, a window that overflowed).
  const float* host() {
    if (r == nullptr) {
      fetched.resize(n);
      if (n > 0) device->read(fetched.data(), n * sizeof(float));
      r = fetched.data();
    }
    return r;
  }

  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
  // S = every value with |x| >= tau, by one more pass.
  TopKResult finish(float tau) {
    res.tau = tau;
    res.indices = collect(host(), n, tau);
    ++res.passes;
    res.seconds = elapsed();
    return std::move(res);  // the run ends here: its result is not copied
  }
  void check_nonfinite(std::uint64_t count) {
    res.nonfinite = static_cast<std::int64_t>(count);
    if (count > 0 && opts.nonfinite == NonFinitePolicy::Error) {
      const float* r = host();
      const std::int64_t i = first_nonfinite(r, n);
      throw InputError("R[" + std::to_string(i) + "] is " + (std::isnan(r[i]) ? "NaN" : "Inf") + " (" +
                       std::to_string(count) + " non-finite values; use --nonfinite exclude to skip them)");
    }
  }
  // k from the ratio and the finite values; the trivial selections (none,
  // every finite value) end the run.
  std::optional<TopKResult> set_k(std::int64_t finite) {
    res.k = std::min<std::int64_t>(static_cast<std::int64_t>(std::ceil(opts.ratio * n)), std::max<std::int64_t>(finite, 0));
    if (res.k == 0) return finish(std::numeric_limits<float>::infinity());
    if (res.k >= finite) return finish(0.0f);
    return std::nullopt;
  }
  std::int64_t upper() const { return static_cast<std::int64_t>(std::floor(opts.upper * static_cast<double>(res.k))); }
};

TopKResult TopKSelector::select(const float* r, std::int64_t n, const TopKOptions& opts) {
  if (!(opts.ratio >= 0 && opts.ratio <= 1))
    throw InputError("--ratio " + std::to_string(opts.ratio) + ": must be within [0, 1]");
  if (!(opts.upper >= 1)) throw InputError("upper bound factor must be >= 1");
  Run run{r, n, opts, std::chrono::steady_clock::now(), {}};
  run.res.n = n;
  bind(r, n);
  run.device = buf_->data;
  return dispatch(run);
}

TopKResult TopKSelector::select(Buffer& data, std::int64_t n, const TopKOptions& opts) {
  if (!(opts.ratio >= 0 && opts.ratio <= 1))
    throw InputError("--ratio " + std::to_string(opts.ratio) + ": must be within [0, 1]");
  if (!(opts.upper >= 1)) throw InputError("upper bound factor must be >= 1");
  if (n < 0 || data.size() < static_cast<std::size_t>(n) * sizeof(float))
    throw InputError("top-k of " + std::to_string(n) + " floats from a buffer of " + std::to_string(data.size()) +
                     " bytes");
  Run run{static_cast<const float*>(data.host_ptr()), n, opts, std::chrono::steady_clock::now(), {}};
  run.res.n = n;
  run.device = &data;
  buf_->own_data.reset();
  buf_->data = &data;
  return dispatch(run);
}

TopKResult TopKSelector::dispatch(Run& run) {
  switch (run.opts.method) {
    case TopKMethod::NthElement:
    case TopKMethod::Sample: return by_sorting(run);
    case TopKMethod::LdteBs: return ldte_bs(run);
    default: return by_histogram(run);
  }
}

// The baselines: std::nth_element over |R|, or over DGC's sample of it.
TopKResult TopKSelector::by_sorting(Run& run) {
  const float* r = run.host();
  const std::int64_t n = run.n;
  TopKResult& res = run.res;
  const bool sample = run.opts.method == TopKMethod::Sample;
  // DGC's sample: 1% of R, but at least ~16Ki values so a small tensor's
  // top 0.1% is still a few samples.
  const std::int64_t stride = sample ? std::clamp<std::int64_t>(n / 16384, 1, 100) : 1;
  std::vector<float> mag;
  mag.reserve(n / stride + 1);
  std::int64_t nonfinite = 0;
  for (std::int64_t i = 0; i < n; i += stride) {
    if (std::isfinite(r[i])) mag.push_back(std::fabs(r[i]));
    else ++nonfinite;
  }
  ++res.passes;
  // The sample sees 1% of the values: refusing NaN/Inf takes a full scan;
  // when they are excluded, the sample's share estimates their count.
  if (sample && run.opts.nonfinite == NonFinitePolicy::Exclude) {
    nonfinite *= stride;
  } else if (sample) {
    std::int64_t all = 0;
#pragma omp parallel for reduction(+ : all)
    for (std::int64_t i = 0; i < n; ++i) all += !std::isfinite(r[i]);
    nonfinite = all;
    ++res.passes;
  }
  run.check_nonfinite(static_cast<std::uint64_t>(nonfinite));
  if (auto done = run.set_k(std::max<std::int64_t>(n - nonfinite, 0))) return *done;
  const auto m = static_cast<std::int64_t>(mag.size());
  if (m == 0) return run.finish(0.0f);
  const std::int64_t kk =
      sample ? std::clamp<std::int64_t>(static_cast<std::int64_t>(std::ceil(run.opts.ratio * m)), 1, m) : res.k;
  std::nth_element(mag.begin(), mag.begin() + (kk - 1), mag.end(), std::greater<float>());
  ++res.passes;  // introselect: counted as one pass (it touches ~2-3n values)
  auto out = run.finish(mag[kk - 1]);
  if (!sample) out.ties = static_cast<std::int64_t>(out.indices.size()) - out.k;
  return out;
}

// Chen et al. 2021, Algorithm 2: the Laplacian estimate from the moments
// (the histogram kernel with one bin), then bisection on counting passes
// until k <= nnz <= upper k. Each count is a pass (one bin counting
// |x| >= tau).
TopKResult TopKSelector::ldte_bs(Run& run) {
  const std::int64_t n = run.n;
  TopKResult& res = run.res;
  Histogram h = run_histogram(n, 0, kInfBits, 31, 1);
  ++res.passes;
  run.check_nonfinite(h.nonfinite);
  const std::int64_t finite = n - static_cast<std::int64_t>(h.nonfinite);
  if (auto done = run.set_k(finite)) return *done;
  const std::int64_t k = res.k, upper = run.upper();
  res.estimate = laplace_threshold(h.sum, h.sumsq, finite, run.opts.ratio);
  auto count_ge = [&](double tau) {
    const std::uint32_t lo = std::min(bits_of(static_cast<float>(tau)) & 0x7fffffffu, kInfBits);
    ++res.passes;
    return static_cast<std::int64_t>(run_histogram(n, lo, kInfBits, 31, 1).counts[0]);
  };
  double tau = res.estimate;
  std::int64_t nnz = count_ge(tau);
  if (nnz >= k && nnz <= upper) return run.finish(static_cast<float>(tau));
  double lo = 0, hi = h.maxabs;  // count_ge(lo) >= k always; count_ge(hi) >= 1
  if (nnz > upper) lo = tau;
  else hi = tau;
  std::int64_t nnz_lo = -1;  // count at lo once measured
  for (int it = 0; it < 64; ++it) {
    const double mid = 0.5 * (lo + hi);
    if (static_cast<float>(mid) == static_cast<float>(lo) || static_cast<float>(mid) == static_cast<float>(hi)) {
      // Ties: no float between the bounds. Settle for the smallest tau with nnz >= k.
      tau = lo;
      if (nnz_lo < 0) count_ge(lo);
      break;
    }
    tau = mid;
    nnz = count_ge(tau);
    if (nnz >= k && nnz <= upper) break;
    if (nnz < k) hi = tau;
    else {
      lo = tau;
      nnz_lo = nnz;
    }
  }
  return run.finish(static_cast<float>(tau));
}

namespace {

// The rank-th largest of v (1-based) by a heap of the rank largest: most
// values cost one compare with its top, far less than nth_element's
// partitioning passes over every value.
float rank_by_heap(const std::vector<float>& v, std::int64_t rank) {
  const auto m = static_cast<std::int64_t>(v.size());
  std::vector<float> heap(v.begin(), v.begin() + rank);
  std::make_heap(heap.begin(), heap.end(), std::greater<float>());
  for (std::int64_t i = rank; i < m; ++i)
    if (v[i] > heap.front()) {
      std::pop_heap(heap.begin(), heap.end(), std::greater<float>());
      heap.back() = v[i];
      std::push_heap(heap.begin(), heap.end(), std::greater<float>());
    }
  return heap.front();
}

// |v|, with NaN and Inf as 0: a non-finite value never raises the floor.
inline float sample_magnitude(float v) {
  const float a = std::fabs(v);
  return a <= std::numeric_limits<float>::max() ? a : 0.0f;
}

// The rank-th largest magnitude (1-based) among `blocks` runs of `len`
// values, run b at base + b * pitch, read in place. A small rank (the
// window floor's: ~92 of 64Ki) is found among the values above a bound
// taken from every 16th value (the (2 rank / 16 + 8)-th largest of those,
// with about twice rank values above it): a few hundred values, picked by
// a test that vectorises. Only when fewer than rank lie above the bound are
// all the magnitudes copied and searched. Searching all of them each time
// (copy, then heap) was most of the selection's time outside its pass.
float sample_rank_th_largest(const float* base, std::int64_t pitch, std::int64_t blocks, std::int64_t len,
                             std::int64_t rank, std::vector<float>& scratch) {
  auto all = [&] {
    scratch.clear();
    for (std::int64_t b = 0; b < blocks; ++b)
      for (std::int64_t j = 0; j < len; ++j) scratch.push_back(sample_magnitude(base[b * pitch + j]));
  };
  if (rank * 64 > blocks * len) {
    all();
    std::nth_element(scratch.begin(), scratch.begin() + (rank - 1), scratch.end(), std::greater<float>());
    return scratch[rank - 1];
  }
  std::vector<float> sub;
  for (std::int64_t b = 0; b < blocks; ++b)
    for (std::int64_t j = 0; j < len; j += 16) sub.push_back(sample_magnitude(base[b * pitch + j]));
  const auto sub_rank = std::min<std::int64_t>(static_cast<std::int64_t>(sub.size()), 2 * rank / 16 + 8);
  std::nth_element(sub.begin(), sub.begin() + (sub_rank - 1), sub.end(), std::greater<float>());
  const std::uint32_t bound = bits_of(sub[sub_rank - 1]);
  std::vector<float> above;
  auto keep = [&](float v) {
    if (bits_of(sample_magnitude(v)) >= bound) above.push_back(sample_magnitude(v));
  };
  for (std::int64_t b = 0; b < blocks; ++b) {
    const float* x = base + b * pitch;
    std::int64_t j = 0;
    for (; j + 32 <= len; j += 32) {
      int hits = 0;
      for (int q = 0; q < 32; ++q) {
        const std::uint32_t u = bits_of(x[j + q]) & 0x7fffffffu;
        hits += (u >= bound) & (u < kInfBits);
      }
      if (hits == 0) [[likely]]
        continue;
      for (int q = 0; q < 32; ++q) keep(x[j + q]);
    }
    for (; j < len; ++j) keep(x[j]);
  }
  if (static_cast<std::int64_t>(above.size()) < rank) {
    all();
    return rank_by_heap(scratch, rank);
  }
  std::nth_element(above.begin(), above.begin() + (rank - 1), above.end(), std::greater<float>());
  return above[rank - 1];
}

// The floor of the histogram's window for R of n >= 1Mi values: an order
// statistic of a sample of 64 spread blocks (<= 0.5% of R), the
// (kk + 3 sqrt(kk) + 1)-th largest where kk sampled values are expected
// above the threshold. That many above it put, with ~3 standard deviations
// to spare, at least k values of R above it, whatever the distribution (a
// Laplacian estimate can overshoot a non-Laplacian tail, a uniform one by
// 3x, and miss). The floor is kept this close to the threshold because
// the pass lists every value in the window.
// Returned as float bits on the histogram's global grid; 0 (no window)
// for small R.
std::uint32_t window_floor(const float* r, const Buffer* data, std::int64_t n, double ratio, std::int64_t k,
                           std::vector<float>& sample, std::vector<float>& scratch) {
  if (n < (1 << 20) || k == 0) return 0;
  constexpr std::int64_t kBlocks = 64, kLen = 1024;
  const std::int64_t pitch = (n - kLen) / (kBlocks - 1);
  // Evenly spaced blocks, read in R where the host can, else copied in one
  // strided read from the device.
  const float* base = r;
  std::int64_t step = pitch;
  if (r == nullptr) {
    sample.resize(kBlocks * kLen);
    data->read_strided(sample.data(), kLen * sizeof(float), 0, pitch * sizeof(float), kBlocks);
    base = sample.data();
    step = kLen;
  }
  const std::int64_t m = kBlocks * kLen;
  const std::int64_t kk = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::ceil(ratio * m)), 1, m);
  const auto rank = std::min<std::int64_t>(m, kk + static_cast<std::int64_t>(std::ceil(3 * std::sqrt(kk))) + 1);
  const float est = sample_rank_th_largest(base, step, kBlocks, kLen, rank, scratch);
  std::uint32_t lo = std::min(bits_of(est) & 0x7fffffffu, kInfBits - 1);
  return lo & ~((std::uint32_t{1} << kCoarseShift) - 1);  // bin edges stay on the global grid
}

// Indices in ascending order. Past a few thousand, an LSD radix sort on
// 11-bit digits of the index (indices < n), the threads counting and
// scattering their own contiguous slices: a GPU's candidates come in any
// order, and S (k of them) is sorted once picked: a radix sort is linear
// in the count, where std::sort makes n log n comparisons.
void sort_indices(std::vector<std::int64_t>& v, std::int64_t n, std::vector<std::int64_t>& tmp) {
  if (v.size() < 4096) {
    std::sort(v.begin(), v.end());
    return;
  }
  constexpr int kBits = 11;
  constexpr std::int64_t kDigits = std::int64_t{1} << kBits;
  const auto m = static_cast<std::int64_t>(v.size());
  const int threads = static_cast<int>(std::min<std::int64_t>(omp_get_max_threads(), m / 2048 + 1));
  tmp.resize(v.size());  // the caller's, kept: fresh MBs cost page faults each call
  std::vector<std::int64_t> count(static_cast<std::size_t>(threads) * kDigits);
  for (int shift = 0; shift < 63 && ((n - 1) >> shift) != 0; shift += kBits) {
    std::fill(count.begin(), count.end(), 0);
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num();
      const std::int64_t from = m * t / threads, to = m * (t + 1) / threads;
      std::int64_t* c = count.data() + t * kDigits;
      for (std::int64_t j = from; j < to; ++j) ++c[(v[j] >> shift) & (kDigits - 1)];
#pragma omp barrier
#pragma omp single
      {
        // Where each (digit, thread) run starts: digits in order, threads in
        // order within a digit, so the sort is stable.
        std::int64_t at = 0;
        for (std::int64_t d = 0; d < kDigits; ++d)
          for (int u = 0; u < threads; ++u) {
            const std::int64_t here = count[u * kDigits + d];
            count[u * kDigits + d] = at;
            at += here;
          }
      }
      for (std::int64_t j = from; j < to; ++j) tmp[c[(v[j] >> shift) & (kDigits - 1)]++] = v[j];
    }
    v.swap(tmp);
  }
}

// The listed candidates split by their values' bits: indices at or above
// `to` appended to above, (index, value) in [from, to) to inside. Threads
// take contiguous slices, count, then write at their offsets, so ascending
// candidates stay ascending (a GPU's large top-k leaves millions of
// candidates, too many for one thread). A thread per 256Ki of them: waking
// the caller's OpenMP team costs more than splitting tens of thousands.
void split_candidates(std::span<const std::int64_t> idx, std::span<const float> val, std::uint32_t from,
                      std::uint32_t to, std::vector<std::int64_t>& above, std::vector<std::int64_t>& inside,
                      std::vector<float>& inside_values) {
  const auto m = static_cast<std::int64_t>(idx.size());
  const int threads = static_cast<int>(std::min<std::int64_t>(omp_get_max_threads(), m / (1 << 18) + 1));
  std::vector<std::int64_t> na(threads + 1, 0), ni(threads + 1, 0);
  auto slice = [&](int t) { return std::pair{m * t / threads, m * (t + 1) / threads}; };
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    const auto [lo, hi] = slice(t);
    std::int64_t a = 0, in = 0;
    for (std::int64_t j = lo; j < hi; ++j) {
      const std::uint32_t u = bits_of(val[j]) & 0x7fffffffu;
      a += u >= to;
      in += u >= from && u < to;
    }
    na[t + 1] = a;
    ni[t + 1] = in;
  }
  for (int t = 0; t < threads; ++t) na[t + 1] += na[t], ni[t + 1] += ni[t];
  const std::size_t a0 = above.size(), i0 = inside.size();
  above.resize(a0 + na[threads]);
  inside.resize(i0 + ni[threads]);
  inside_values.resize(i0 + ni[threads]);
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    const auto [lo, hi] = slice(t);
    std::int64_t* pa = above.data() + a0 + na[t];
    std::int64_t* pi = inside.data() + i0 + ni[t];
    float* pv = inside_values.data() + i0 + ni[t];
    // Branch-free: each entry is written to both lists and kept where it
    // belongs (a branch per candidate is mispredicted about as often as
    // not). A write past the thread's part of a list, which would be the
    // next thread's, goes to a scratch slot instead.
    std::int64_t* const ea = pa + (na[t + 1] - na[t]);
    std::int64_t* const ei = pi + (ni[t + 1] - ni[t]);
    std::int64_t spare_index = 0;
    float spare_value = 0;
    for (std::int64_t j = lo; j < hi; ++j) {
      const std::uint32_t u = bits_of(val[j]) & 0x7fffffffu;
      const bool up = u >= to, in = !up && u >= from;
      *(pa < ea ? pa : &spare_index) = idx[j];
      *(pi < ei ? pi : &spare_index) = idx[j];
      *(pi < ei ? pv : &spare_value) = val[j];
      pa += up;
      pi += in;
      pv += in;
    }
  }
}

// ldte-hist: the histogram edge nearest the Laplacian estimate (bin e0)
// with k <= ge[e] <= upper, or -1 when more than (upper - 1) k values share
// the k-th bin.
std::int64_t nearest_fitting_edge(const std::vector<std::int64_t>& ge, std::int64_t e0, std::int64_t k,
                                  std::int64_t upper) {
  const auto bins = static_cast<std::int64_t>(ge.size()) - 1;
  for (std::int64_t dist = 0; dist < bins; ++dist)
    for (std::int64_t e : {e0 - dist, e0 + dist})
      if (e >= 0 && e < bins && ge[e] >= k && ge[e] <= upper) return e;
  return -1;
}

}  // namespace

// exact and ldte-hist. The histogram pass covers only the window [floor,
// inf) -- the values near and above the threshold -- while still taking
// the moments of everything, and lists the window's members (a Laplacian
// puts ~3% of R above half the threshold), so S is found among them, not
// by another pass over R. If the window misses (fewer than k values in
// it), a full-range pass follows.
// The window pass over |x| from `lo` up, in bins of 2^kCoarseShift bit
// patterns, and the values in any range of its edges: from the candidates
// the pass listed with their values (R is not read again), or else by a
// pass over R on the host.
struct TopKSelector::Window {
  Run& run;
  std::uint32_t lo = 0;
  Histogram h;
  bool listed = false, ascending = true;
  std::vector<float> inside_values;

  std::int64_t bins() const { return static_cast<std::int64_t>(h.counts.size()); }
  std::uint32_t edge_bits(std::int64_t e) const { return lo + (static_cast<std::uint32_t>(e) << kCoarseShift); }
  // ge[e] = values with |x| at or above edge e of the window.
  std::vector<std::int64_t> at_or_above() const {
    std::vector<std::int64_t> ge(bins() + 1, 0);
    for (std::int64_t b = bins() - 1; b >= 0; --b) ge[b] = ge[b + 1] + static_cast<std::int64_t>(h.counts[b]);
    return ge;
  }
  // Finite values with bits in [from, to): indices at or above `to` into
  // above, (index, value) in [from, to) into inside (values: inside_values).
  void members(std::uint32_t from, std::uint32_t to, std::vector<std::int64_t>& above,
               std::vector<std::int64_t>& inside) {
    if (listed) {
      ascending = h.ascending;
      split_candidates(h.candidates, h.values, from, to, above, inside, inside_values);
      return;
    }
    const float* r = run.host();
    collect_split(r, run.n, from, to, above, inside);
    inside_values.resize(inside.size());
    for (std::size_t j = 0; j < inside.size(); ++j) inside_values[j] = r[inside[j]];
    ++run.res.passes;
  }
};

TopKResult TopKSelector::by_histogram(Run& run) {
  const std::int64_t n = run.n;
  TopKResult& res = run.res;
  const bool ldte = run.opts.method == TopKMethod::LdteHist;
  const auto t_sample = std::chrono::steady_clock::now();
  std::uint32_t lo =
      window_floor(run.r, run.device, n, run.opts.ratio, static_cast<std::int64_t>(std::ceil(run.opts.ratio * n)),
                   buf_->sample, buf_->sample_scratch);
  if (run.r == nullptr)  // the sample came from the device
    res.copy_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_sample).count();
  // Only the Laplacian estimate (ldte-hist) reads the pass's moments.
  auto window = [&](std::uint32_t from, std::int64_t capacity) {
    ++res.passes;
    Histogram w = run_histogram(n, from, kInfBits, kCoarseShift, ((kInfBits - from) >> kCoarseShift), capacity, ldte);
    res.pass_seconds += w.pass_seconds;
    res.copy_seconds += w.copy_seconds;
    return w;
  };
  Window w{run, lo, window(lo, lo > 0 ? n / 16 + 1024 : 0)};
  run.check_nonfinite(w.h.nonfinite);
  const std::int64_t finite = n - static_cast<std::int64_t>(w.h.nonfinite);
  if (auto done = run.set_k(finite)) return *done;
  const std::int64_t k = res.k;
  if (static_cast<std::int64_t>(finite - w.h.below) < k) {
    w.lo = 0;  // the floor was too high for this data: histogram everything
    w.h = window(0, 0);
  }
  w.listed = w.h.candidates_found >= 0 && w.h.candidates_found == static_cast<std::int64_t>(w.h.candidates.size());
  // The k-th largest is in bin kbin: ge[kbin] >= k > ge[kbin + 1].
  const std::vector<std::int64_t> ge = w.at_or_above();
  std::int64_t kbin = w.bins() - 1;
  while (ge[kbin] < k) --kbin;
  if (ldte) {
    // The Laplacian estimate from the moments of all of R picks an edge; the
    // histogram says exactly how many values lie above every edge, so the
    // correction walks edges from the estimate instead of counting passes.
    res.estimate = laplace_threshold(w.h.sum, w.h.sumsq, finite, run.opts.ratio);
    const std::uint32_t eb = bits_of(static_cast<float>(res.estimate));
    const std::int64_t e0 = eb <= w.lo ? 0 : std::min<std::int64_t>((eb - w.lo) >> kCoarseShift, w.bins() - 1);
    const std::int64_t best = nearest_fitting_edge(ge, e0, k, run.upper());
    if (best >= 0) return at_edge(run, w, best);
    // No edge works: resolve inside the k-th bin exactly, as exact does.
  }
  return within_bin(run, w, kbin);
}

// ldte-hist: every value at or above the edge.
TopKResult TopKSelector::at_edge(Run& run, Window& w, std::int64_t edge) {
  TopKResult& res = run.res;
  res.tau = float_of(w.edge_bits(edge));
  std::vector<std::int64_t> none;
  w.members(w.edge_bits(edge), w.edge_bits(edge), res.indices, none);
  if (!w.ascending) sort_indices(res.indices, run.n, buf_->sort_scratch);
  res.seconds = run.elapsed();
  return std::move(res);
}

// Exact: the selection also gathers the values inside the k-th bin (few:
// the bin is 3% wide); the exact k-th largest is the (k - above)-th
// largest among them.
TopKResult TopKSelector::within_bin(Run& run, Window& w, std::int64_t kbin) {
  TopKResult& res = run.res;
  const std::int64_t k = res.k;
  std::vector<std::int64_t> above, inside;
  w.members(w.edge_bits(kbin), w.edge_bits(kbin + 1), above, inside);
  const auto need = static_cast<std::int64_t>(k - static_cast<std::int64_t>(above.size()));
  std::vector<float> mag(inside.size());
  for (std::size_t j = 0; j < inside.size(); ++j) mag[j] = std::fabs(w.inside_values[j]);
  std::nth_element(mag.begin(), mag.begin() + (need - 1), mag.end(), std::greater<float>());
  res.tau = mag[need - 1];
  std::vector<std::int64_t> chosen;
  for (std::size_t j = 0; j < inside.size(); ++j)
    if (std::fabs(w.inside_values[j]) >= res.tau) chosen.push_back(inside[j]);
  if (w.ascending) {
    res.indices.resize(above.size() + chosen.size());
    std::merge(above.begin(), above.end(), chosen.begin(), chosen.end(), res.indices.begin());
  } else {
    res.indices = std::move(above);
    res.indices.insert(res.indices.end(), chosen.begin(), chosen.end());
    sort_indices(res.indices, run.n, buf_->sort_scratch);
  }
  res.ties = static_cast<std::int64_t>(res.indices.size()) - k;
  res.seconds = run.elapsed();
  return std::move(res);
}

}  // namespace accel
