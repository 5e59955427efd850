// `accel bench-kernels`: each kernel's rate on every device that runs it, on
// fixed shapes, beside the cpu's, in one run (ratios on a shared, noisy host
// mean something only within one). Each device's outputs are compared with
// the cpu's, so a fast wrong device shows. scripts/bench_backends.py runs it
// several times and prints medians.
//   kmeans_assign:   Fashion-MNIST's 60,000 x 784 training images, K = 256
//   csr_kernel_rows: the same images as CSR rows, 64 queries x every row, RBF
//   topk_histogram:  16M floats, the full-range first pass of a top-k
// --kmeans-shape NxDxK and --topk-floats N change the k-means and top-k
// shapes (scripts/device_check.sh sets them to the GPU issue's targets),
// --kernels runs only some of the three.
// Inputs are on the device before the clock starts: these are kernel rates.
#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <sstream>

#include "accel/csr.hpp"
#include "accel/error.hpp"
#include "accel/io.hpp"
#include "accel/registry.hpp"
#include "commands.hpp"

namespace po = boost::program_options;

namespace accel::cli {
namespace {

struct Inputs {
  Matrix x;                   // rows x d, values in [0, 1]: the CSR rows
  Matrix kx;                  // kmeans_assign's rows: x, or --kmeans-shape's
  std::vector<float> cent;    // kx's first k rows
  std::int64_t k = 256;
  CsrMatrix csr;              // x's non-zeros
  std::vector<double> norms;  // ||x_i||^2
  std::vector<std::int32_t> queries, targets;
  std::vector<float> grad;    // the top-k input
  std::string source;
};

// Fashion-MNIST from `dir` when it is there, else as many random sparse
// images of the same shape (said in the output).
Matrix images(const std::string& dir, std::int64_t rows, std::string& source) {
  const auto path = std::filesystem::path(dir) / "train-images-idx3-ubyte.gz";
  if (std::filesystem::exists(path)) {
    Matrix m = read_idx(path.string());
    m.rows = std::min(m.rows, rows);
    m.data.resize(m.rows * m.cols);
    for (auto& v : m.data) v /= 255.0f;
    source = path.string();
    return m;
  }
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  Matrix m{rows, 784, std::vector<float>(rows * 784), {}};
  for (auto& v : m.data) v = u(rng) < 0.5f ? 0.0f : u(rng);
  source = "random (no " + path.string() + ")";
  return m;
}

// --kmeans-shape: N rows of D standard normal values around K centres.
Matrix blobs(std::int64_t n, std::int64_t d, std::int64_t k) {
  std::mt19937 rng(11);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> centres(k * d);
  for (auto& v : centres) v = 4.0f * g(rng);
  Matrix m{n, d, std::vector<float>(n * d), {}};
  for (std::int64_t i = 0; i < n; ++i) {
    const float* c = centres.data() + (i % k) * d;
    for (std::int64_t j = 0; j < d; ++j) m.data[i * d + j] = c[j] + g(rng);
  }
  return m;
}

struct Shapes {
  std::int64_t kmeans_n = 0, kmeans_d = 0, kmeans_k = 0;  // 0: Fashion-MNIST, K = 256
  std::int64_t topk_floats = 0;                           // 0: 16M (1M quick)
};

// Only what the chosen kernels read is made (the images take seconds).
Inputs make_inputs(const std::string& dir, bool quick, const Shapes& shapes, const std::vector<KernelId>& ids) {
  auto wants = [&](KernelId id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); };
  Inputs in;
  if (wants(KernelId::CsrKernelRows) || (wants(KernelId::KMeansAssign) && shapes.kmeans_n == 0))
    in.x = images(dir, quick ? 2000 : 60000, in.source);
  if (shapes.kmeans_n > 0) {
    in.kx = blobs(shapes.kmeans_n, shapes.kmeans_d, shapes.kmeans_k);
    in.k = shapes.kmeans_k;
  } else {
    in.kx = in.x;
    in.k = std::min<std::int64_t>(256, in.x.rows);
  }
  in.k = std::min(in.k, in.kx.rows);
  in.cent.assign(in.kx.data.begin(), in.kx.data.begin() + in.k * in.kx.cols);
  for (std::int64_t i = 0; i < in.x.rows; ++i) {
    std::vector<std::pair<std::int32_t, float>> row;
    for (std::int64_t j = 0; j < in.x.cols; ++j)
      if (const float v = in.x.row(i)[j]; v != 0) row.emplace_back(static_cast<std::int32_t>(j), v);
    in.csr.add_row(std::move(row));
  }
  in.csr.cols = in.x.cols;
  in.norms = in.csr.sq_norms();
  for (std::int32_t q = 0; q < 64; ++q) in.queries.push_back(q * static_cast<std::int32_t>(in.x.rows / 64));
  in.targets.resize(in.x.rows);
  std::iota(in.targets.begin(), in.targets.end(), 0);
  std::mt19937 rng(5);
  std::exponential_distribution<float> e(200.0f);
  in.grad.resize(shapes.topk_floats > 0 ? shapes.topk_floats : quick ? (1 << 20) : (1 << 24));
  for (auto& v : in.grad) v = (rng() & 1 ? 1 : -1) * e(rng);
  return in;
}

template <class T>
std::unique_ptr<Buffer> upload(Device& dev, const std::vector<T>& v) {
  auto b = dev.allocate(std::max<std::size_t>(1, v.size() * sizeof(T)));
  b->write(v.data(), v.size() * sizeof(T));
  return b;
}

template <class T>
std::vector<T> download(const Buffer& b, std::size_t n) {
  std::vector<T> v(n);
  b.read(v.data(), n * sizeof(T));
  return v;
}

// Median seconds of `repeats` launches, after one that is not timed (an
// OpenCL program is built at its first launch).
double median_seconds(Device& dev, const KernelArgs& args, int repeats) {
  dev.launch(args).wait();
  std::vector<double> s;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    dev.launch(args).wait();
    s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(s.begin(), s.begin() + s.size() / 2, s.end());
  return s[s.size() / 2];
}

// A kernel's run on one device: its time and what its outputs are compared by.
struct Run {
  double seconds = 0;
  double units = 0;  // rows, kernel values or floats per launch
  std::vector<std::int32_t> labels;
  std::vector<std::int64_t> counts;
  std::vector<std::uint64_t> hist;
  std::vector<float> values;
};

Run run_kmeans(Device& dev, const Inputs& in, int repeats) {
  const std::int64_t n = in.kx.rows, d = in.kx.cols, k = in.k;
  auto x = upload(dev, in.kx.data), c = upload(dev, in.cent);
  auto l = dev.allocate(n * 4), s = dev.allocate(k * d * 8), cnt = dev.allocate(k * 8), i = dev.allocate(8);
  const KMeansAssignArgs a{x.get(), c.get(), l.get(), s.get(), cnt.get(), i.get(), n, d, k};
  Run r;
  r.seconds = median_seconds(dev, a, repeats);
  r.units = static_cast<double>(n);
  r.labels = download<std::int32_t>(*l, n);
  r.counts = download<std::int64_t>(*cnt, k);
  return r;
}

Run run_csr(Device& dev, const Inputs& in, int repeats) {
  auto rp = upload(dev, in.csr.row_ptr), ci = upload(dev, in.csr.col_idx), v = upload(dev, in.csr.values);
  auto nr = upload(dev, in.norms), q = upload(dev, in.queries), t = upload(dev, in.targets);
  const auto nq = static_cast<std::int64_t>(in.queries.size()), m = static_cast<std::int64_t>(in.targets.size());
  auto out = dev.allocate(nq * m * 4);
  CsrKernelRowsArgs a;
  a.row_ptr = rp.get(), a.col_idx = ci.get(), a.values = v.get(), a.sq_norms = nr.get();
  a.queries = q.get(), a.active = t.get(), a.out = out.get();
  a.n = in.csr.rows, a.nnz = in.csr.nnz(), a.q = nq, a.m = m, a.cols = in.csr.cols;
  a.type = KernelType::Rbf, a.gamma = 1.0 / static_cast<double>(in.csr.cols);
  Run r;
  r.seconds = median_seconds(dev, a, repeats);
  r.units = static_cast<double>(nq * m);
  r.values = download<float>(*out, nq * m);
  return r;
}

Run run_topk(Device& dev, const Inputs& in, int repeats) {
  constexpr int kShift = 18;  // TopKSelector's first pass
  const std::int64_t bins = (0x7f800000u >> kShift) + 1;
  auto x = upload(dev, in.grad);
  auto h = dev.allocate(bins * 8), mo = dev.allocate(24), o = dev.allocate(24);
  TopKHistogramArgs a;
  a.data = x.get(), a.hist = h.get(), a.moments = mo.get(), a.outside = o.get();
  a.n = static_cast<std::int64_t>(in.grad.size()), a.shift = kShift, a.bins = bins;
  Run r;
  r.seconds = median_seconds(dev, a, repeats);
  r.units = static_cast<double>(a.n);
  r.hist = download<std::uint64_t>(*h, bins);
  return r;
}

// How a device's outputs differ from the cpu's (all zero: the same).
nlohmann::json compare(KernelId id, const Run& got, const Run& cpu) {
  switch (id) {
    case KernelId::KMeansAssign: {
      std::int64_t labels = 0, counts = 0;
      for (std::size_t i = 0; i < got.labels.size(); ++i) labels += got.labels[i] != cpu.labels[i];
      for (std::size_t j = 0; j < got.counts.size(); ++j) counts += std::llabs(got.counts[j] - cpu.counts[j]);
      return {{"labels_differ", labels}, {"count_difference", counts}};
    }
    case KernelId::CsrKernelRows: {
      double worst = 0;
      for (std::size_t i = 0; i < got.values.size(); ++i)
        worst = std::max(worst, static_cast<double>(std::fabs(got.values[i] - cpu.values[i])));
      return {{"max_abs_difference", worst}};
    }
    case KernelId::TopKHistogram: {
      std::int64_t bins = 0;
      for (std::size_t i = 0; i < got.hist.size(); ++i) bins += got.hist[i] != cpu.hist[i];
      return {{"bins_differ", bins}};
    }
  }
  return {};
}

Run run(KernelId id, Device& dev, const Inputs& in, int repeats) {
  switch (id) {
    case KernelId::KMeansAssign: return run_kmeans(dev, in, repeats);
    case KernelId::CsrKernelRows: return run_csr(dev, in, repeats);
    case KernelId::TopKHistogram: return run_topk(dev, in, repeats);
  }
  throw std::logic_error("unknown kernel");
}

const char* unit_of(KernelId id) {
  return id == KernelId::KMeansAssign ? "rows/s" : id == KernelId::CsrKernelRows ? "kernel values/s" : "floats/s";
}

// Every device `spec` names that runs `id` (every device when spec is empty).
std::vector<Device*> devices_for(const Registry& reg, const std::string& spec, KernelId id, const Inputs& in) {
  std::vector<Device*> out;
  if (!spec.empty()) out = reg.select(spec, id);
  else
    for (const auto& d : reg.devices())
      if (d->supports(id)) out.push_back(d.get());
  const KMeansAssignArgs shape{.n = in.kx.rows, .d = in.kx.cols, .k = in.k};
  std::erase_if(out, [&](Device* d) { return id == KernelId::KMeansAssign && !d->cannot_run(shape).empty(); });
  return out;
}

// "NxDxK" -> three positive integers, or InputError naming the value.
Shapes parse_shapes(const std::string& kmeans, std::int64_t topk_floats) {
  Shapes sh;
  sh.topk_floats = topk_floats;
  if (topk_floats < 0 || (topk_floats > 0 && topk_floats > (std::int64_t{1} << 32)))
    throw InputError("--topk-floats " + std::to_string(topk_floats) + ": must be within [1, 2^32]");
  if (kmeans.empty()) return sh;
  std::int64_t v[3];
  std::size_t pos = 0;
  for (int i = 0; i < 3; ++i) {
    std::size_t used = 0;
    try {
      v[i] = std::stoll(kmeans.substr(pos), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    const char next = pos + used < kmeans.size() ? kmeans[pos + used] : '\0';
    if (used == 0 || v[i] < 1 || (i < 2 ? next != 'x' : next != '\0'))
      throw InputError("--kmeans-shape " + kmeans + ": expected ROWSxDIMxK, three positive integers");
    pos += used + 1;
  }
  if (v[2] > v[0] || v[0] > (std::int64_t{1} << 40) / v[1])
    throw InputError("--kmeans-shape " + kmeans + ": K must not exceed the rows, and rows x dim must fit in memory");
  sh.kmeans_n = v[0], sh.kmeans_d = v[1], sh.kmeans_k = v[2];
  return sh;
}

std::vector<KernelId> parse_kernels(const std::string& list) {
  std::vector<KernelId> out;
  std::stringstream ss(list);
  for (std::string name; std::getline(ss, name, ',');) {
    bool known = false;
    for (const KernelId id : {KernelId::KMeansAssign, KernelId::CsrKernelRows, KernelId::TopKHistogram})
      if (name == to_string(id)) out.push_back(id), known = true;
    if (!known)
      throw InputError("--kernels " + list + ": " + name + " is not kmeans_assign, csr_kernel_rows or topk_histogram");
  }
  return out;
}

}  // namespace

int bench_kernels_main(const std::vector<std::string>& args) {
  int repeats = 5;
  std::int64_t topk_floats = 0;
  std::string device, dir = "/usr/share/datasets/fashion-mnist", kmeans_shape,
                      kernels = "kmeans_assign,csr_kernel_rows,topk_histogram";
  po::options_description opts("accel bench-kernels [--device SPEC] [--repeats R] [--json]");
  opts.add_options()("help,h", "this help")("device", po::value(&device), device_option_help("devices (default: every device)").c_str())
      ("repeats", po::value(&repeats)->default_value(5), "timed launches per kernel and device (the median is kept)")
      ("fashion-mnist", po::value(&dir)->default_value(dir), "directory of Fashion-MNIST's IDX files")
      ("kernels", po::value(&kernels)->default_value(kernels), "which kernels, comma-separated")
      ("kmeans-shape", po::value(&kmeans_shape), "ROWSxDIMxK: kmeans_assign on random blobs of this shape "
                                                  "instead of Fashion-MNIST with K = 256")
      ("topk-floats", po::value(&topk_floats), "topk_histogram's input size (default 16M)")
      ("quick", "small shapes (2,000 images, 1M floats): a check that every device runs, not a benchmark")
      ("json", "print JSON");
  po::variables_map vm;
  if (!parse_or_help(args, opts, vm)) return 0;
  if (repeats < 1) throw InputError("--repeats " + std::to_string(repeats) + ": must be at least 1");
  const Shapes shapes = parse_shapes(kmeans_shape, topk_floats);
  const std::vector<KernelId> ids = parse_kernels(kernels);
  const Registry reg = Registry::discover_all();
  Device* cpu = reg.select("cpu", KernelId::KMeansAssign).at(0);
  const Inputs in = make_inputs(dir, vm.count("quick") > 0, shapes, ids);
  nlohmann::json out = {{"images", in.source}, {"rows", in.x.rows}, {"kmeans_rows", in.kx.rows},
                        {"kmeans_dim", in.kx.cols}, {"k", in.k}, {"floats", in.grad.size()},
                        {"repeats", repeats}, {"results", nlohmann::json::array()}};
  for (const KernelId id : ids) {
    const Run base = run(id, *cpu, in, repeats);
    for (Device* dev : devices_for(reg, device, id, in)) {
      const Run r = dev == cpu ? base : run(id, *dev, in, repeats);
      nlohmann::json line = {{"kernel", to_string(id)}, {"device", dev->info().name}, {"seconds", r.seconds},
                             {"rate", r.units / r.seconds}, {"unit", unit_of(id)},
                             {"times_cpu", r.seconds / base.seconds}, {"against_cpu", compare(id, r, base)}};
      if (!vm.count("json"))
        std::cout << to_string(id) << " on " << dev->info().name << ": " << r.units / r.seconds << " " << unit_of(id)
                  << ", " << r.seconds / base.seconds << "x the cpu's time; against the cpu: "
                  << line["against_cpu"].dump() << "\n";
      out["results"].push_back(std::move(line));
    }
  }
  if (vm.count("json")) std::cout << out.dump() << "\n";
  return 0;
}

}  // namespace accel::cli
