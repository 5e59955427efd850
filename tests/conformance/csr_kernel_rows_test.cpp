// Every device that runs csr_kernel_rows, on the same inputs, against the
// plain reference, to 1e-5 relative. Devices this machine lacks (GPUs,
// FPGAs) are not in the registry; `accel devices` says why.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>

#include "accel/csr.hpp"
#include "accel/host_buffer.hpp"
#include "accel/registry.hpp"
#include "cpu/csr_kernel_rows.hpp"
#include "reference/csr_kernel_rows_ref.hpp"
#include "conformance/required_devices.hpp"

namespace accel {
namespace {

struct Case {
  std::string name;
  std::int64_t n, cols;
  double density;
  int long_rows = 0;     // rows made fully dense (very long rows)
  bool empty_rows = false;
  bool single_nnz = false;
  int many_queries = 0;  // query count (prediction and reconstruction launch thousands)
  bool zipf = false;     // column j used with probability min(1, 2 / (j+1)^0.7), as words in text:
                         // the gemm path's dense columns and its rare ones both occur
};

// Rows are generated with shuffled (unsorted) column order: add_row sorts.
CsrMatrix make_matrix(const Case& c) {
  std::mt19937 rng(static_cast<unsigned>(c.n * 31 + c.cols));
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  CsrMatrix x;
  for (std::int64_t i = 0; i < c.n; ++i) {
    std::vector<std::pair<std::int32_t, float>> row;
    const bool dense = i < c.long_rows;
    const bool empty = c.empty_rows && i % 7 == 3;
    const bool single = c.single_nnz && i % 5 == 1;
    if (single) {
      row.emplace_back(static_cast<std::int32_t>((i * 13) % c.cols), val(rng));
    } else if (!empty) {
      for (std::int32_t j = 0; j < c.cols; ++j)
        if (dense || coin(rng) < (c.zipf ? std::min(1.0, 2.0 / std::pow(j + 1.0, 0.7)) : c.density))
          row.emplace_back(j, val(rng));
    }
    std::shuffle(row.begin(), row.end(), rng);
    x.add_row(std::move(row));
  }
  x.cols = c.cols;
  return x;
}

std::vector<float> run_device(Device& dev, const CsrMatrix& x, const std::vector<double>& norms,
                              const std::vector<std::int32_t>& queries, const std::vector<std::int32_t>& active,
                              KernelType type, double gamma, double coef0, int degree, bool exact) {
  auto upload = [&dev](const auto& v) {
    auto b = dev.allocate(std::max<std::size_t>(1, v.size() * sizeof(v[0])));
    b->write(v.data(), v.size() * sizeof(v[0]));
    return b;
  };
  auto rp = upload(x.row_ptr), ci = upload(x.col_idx), va = upload(x.values), sn = upload(norms),
       qb = upload(queries), ab = upload(active);
  const std::size_t outn = queries.size() * active.size();
  auto ob = dev.allocate(std::max<std::size_t>(1, outn * sizeof(float)));
  CsrKernelRowsArgs a;
  a.row_ptr = rp.get();
  a.col_idx = ci.get();
  a.values = va.get();
  a.sq_norms = sn.get();
  a.queries = qb.get();
  a.active = ab.get();
  a.out = ob.get();
  a.n = x.rows;
  a.nnz = x.nnz();
  a.q = static_cast<std::int64_t>(queries.size());
  a.m = static_cast<std::int64_t>(active.size());
  a.cols = x.cols;
  a.type = type;
  a.gamma = gamma;
  a.coef0 = coef0;
  a.degree = degree;
  a.exact = exact;
  dev.launch(a).wait();
  std::vector<float> out(outn);
  ob->read(out.data(), outn * sizeof(float));
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, const std::string& who) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5 * std::max(1.0, std::abs(want[i]))) << who << " entry " << i;
}

struct KernelCfg {
  KernelType type;
  double gamma, coef0;
  int degree;
};
const std::vector<KernelCfg> kKernels = {
    {KernelType::Linear, 0, 0, 3}, {KernelType::Polynomial, 0.1, 0.5, 3},
    {KernelType::Rbf, 0.05, 0, 3}, {KernelType::Sigmoid, 0.02, -0.3, 3}};

const std::vector<Case> kCases = {
    {"sparse", 300, 200, 0.05},
    {"empty_rows", 200, 50, 0.2, 0, true},
    {"single_nnz", 150, 40, 0.3, 0, false, true},
    {"long_rows", 64, 20000, 0.001, 3},
    {"dense_like", 500, 784, 0.5},
    {"many_rows", 5000, 100, 0.1},
    {"many_queries", 400, 300, 0.1, 0, true, false, 61},
    {"text_like", 400, 3000, 0, 0, false, false, 61, true},
};

class CsrKernelRowsConformance : public ::testing::TestWithParam<Case> {};

TEST_P(CsrKernelRowsConformance, EveryDeviceMatchesReference) {
  const Case& c = GetParam();
  const CsrMatrix x = make_matrix(c);
  for (std::int64_t i = 0; i < x.rows; ++i)
    ASSERT_TRUE(std::is_sorted(x.col_idx.begin() + x.row_ptr[i], x.col_idx.begin() + x.row_ptr[i + 1]));
  const auto norms = x.sq_norms();
  // Queries include an empty / long row where the case has one; active rows
  // are a strided, out-of-order subset (as shrinking leaves them).
  std::vector<std::int32_t> queries = {0, 3, static_cast<std::int32_t>(x.rows - 1)};
  if (c.single_nnz) queries.push_back(1);
  for (int a = 0; a < c.many_queries; ++a) queries.push_back(static_cast<std::int32_t>((a * 37) % x.rows));
  std::vector<std::int32_t> active;
  for (std::int64_t i = x.rows - 1; i >= 0; i -= (i % 3 == 0 ? 1 : 2)) active.push_back(static_cast<std::int32_t>(i));
  static const Registry reg = Registry::discover_all();
  for (const auto& k : kKernels) {
    SCOPED_TRACE(to_string(KernelId::CsrKernelRows) + " kernel " + std::to_string(static_cast<int>(k.type)));
    const auto want = ref::csr_kernel_rows(x, queries, active, k.type, k.gamma, k.coef0, k.degree);
    int ran = 0;
    std::vector<std::string> ran_on;
    for (const auto& dev : reg.devices()) {
      if (!dev->supports(KernelId::CsrKernelRows)) continue;
      for (const bool exact : {false, true})  // float sums on some paths (sgemm, OpenCL's tiles), double on all
        expect_close(run_device(*dev, x, norms, queries, active, k.type, k.gamma, k.coef0, k.degree, exact), want,
                     dev->info().name + (exact ? " exact" : ""));
      ++ran;
      ran_on.push_back(dev->info().name);
    }
    EXPECT_GE(ran, 2) << "cpu and fpga-emu are always present";
    test::expect_required_ran(ran_on);
    // Every CPU path, forced, must conform too (Auto runs only one of them).
    for (auto path : {cpu::CsrDotPath::Merge, cpu::CsrDotPath::Scatter, cpu::CsrDotPath::Gemm}) {
      std::vector<float> out(queries.size() * active.size());
      const cpu::CsrView v{x.row_ptr.data(), x.col_idx.data(), x.values.data(), norms.data(), x.rows, x.cols};
      cpu::csr_kernel_rows(v, queries.data(), static_cast<std::int64_t>(queries.size()), active.data(),
                           static_cast<std::int64_t>(active.size()), k.type, k.gamma, k.coef0, k.degree, out.data(),
                           path);
      expect_close(out, want,
                   path == cpu::CsrDotPath::Merge ? "cpu merge" : path == cpu::CsrDotPath::Scatter ? "cpu scatter" : "cpu gemm");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CsrKernelRowsConformance, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return info.param.name; });

// The merge and the scatter sum every dot product in one order, set by the
// target row alone: they agree bit for bit with each other and with
// themselves on a matrix of some of the rows (a distributed SVM member's
// shard with the working set's rows behind it), so ACCEL_CSR_DOT=merge or
// scatter makes a distributed model single-node's exactly.
std::vector<float> run_path(const CsrMatrix& x, const std::vector<std::int32_t>& queries,
                            const std::vector<std::int32_t>& active, const KernelCfg& k, cpu::CsrDotPath path) {
  const auto norms = x.sq_norms();
  std::vector<float> out(queries.size() * active.size());
  const cpu::CsrView v{x.row_ptr.data(), x.col_idx.data(), x.values.data(), norms.data(), x.rows, x.cols};
  cpu::csr_kernel_rows(v, queries.data(), static_cast<std::int64_t>(queries.size()), active.data(),
                       static_cast<std::int64_t>(active.size()), k.type, k.gamma, k.coef0, k.degree, out.data(), path);
  return out;
}

TEST_P(CsrKernelRowsConformance, MergeAndScatterAgreeBitForBitOnAnyShard) {
  const Case& c = GetParam();
  const CsrMatrix x = make_matrix(c);
  // A shard: the middle third of the rows, then the queries' rows behind
  // them, as a member holds its own rows and its guests.
  const std::int64_t lo = x.rows / 3, hi = 2 * x.rows / 3;
  std::vector<std::int32_t> queries = {0, 3, static_cast<std::int32_t>(x.rows - 1)};
  for (int a = 0; a < c.many_queries; ++a) queries.push_back(static_cast<std::int32_t>((a * 37) % x.rows));
  CsrMatrix shard;
  for (std::int64_t i = lo; i < hi; ++i) shard.add_row_from(x, i);
  std::vector<std::int32_t> shard_queries;
  for (auto u : queries) {
    shard_queries.push_back(static_cast<std::int32_t>(shard.rows));
    shard.add_row_from(x, u);
  }
  shard.cols = x.cols;
  std::vector<std::int32_t> active, shard_active;
  for (std::int64_t i = hi - 1; i >= lo; i -= 2) {
    active.push_back(static_cast<std::int32_t>(i));
    shard_active.push_back(static_cast<std::int32_t>(i - lo));
  }
  for (const auto& k : kKernels) {
    SCOPED_TRACE("kernel " + std::to_string(static_cast<int>(k.type)));
    const auto merge = run_path(x, queries, active, k, cpu::CsrDotPath::Merge);
    for (const auto& got : {run_path(x, queries, active, k, cpu::CsrDotPath::Scatter),
                            run_path(shard, shard_queries, shard_active, k, cpu::CsrDotPath::Scatter),
                            run_path(shard, shard_queries, shard_active, k, cpu::CsrDotPath::Merge)})
      for (std::size_t i = 0; i < merge.size(); ++i)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(merge[i])) << "entry " << i;
  }
}

// The sum order itself, where it shows: u.v = 2^60 + 1 - 2^60 + 1 is 1 summed
// left to right and 0 in four lanes ((2^60 + 1) + (-2^60 + 1) rounds both
// ones away). Random values almost never show it (double sums, float out).
TEST(CsrKernelRows, MergeSumsInTheScattersOrder) {
  CsrMatrix x;
  const float big = 1152921504606846976.0f;  // 2^60
  x.add_row({{0, big}, {1, 1.0f}, {2, -big}, {3, 1.0f}, {5, 2.0f}});
  x.add_row({{0, 1.0f}, {1, 1.0f}, {2, 1.0f}, {3, 1.0f}, {4, 1.0f}});
  x.cols = 6;
  const KernelCfg linear{KernelType::Linear, 0, 0, 3};
  const std::vector<std::int32_t> queries = {0}, active = {1};
  const auto merge = run_path(x, queries, active, linear, cpu::CsrDotPath::Merge);
  EXPECT_EQ(merge[0], 0.0f);
  EXPECT_EQ(run_path(x, queries, active, linear, cpu::CsrDotPath::Scatter)[0], merge[0]);
}

// The gemm path's written-out rows (kept by the buffer that holds the
// values): read straight for a contiguous run of targets, copied for an
// out-of-order one, and dropped when the buffer is written, so a launch
// after new values sees those.
TEST(CsrKernelRows, GemmWrittenOutRowsFollowTheBuffer) {
  for (const Case& c : {Case{"dense_like", 300, 784, 0.5}, Case{"text_like", 400, 3000, 0, 0, false, false, 0, true}}) {
    SCOPED_TRACE(c.name);
    CsrMatrix x = make_matrix(c);
    HostBuffer owner(x.values.data(), x.values.size() * sizeof(float));
    std::vector<std::int32_t> queries;
    for (int a = 0; a < 40; ++a) queries.push_back(static_cast<std::int32_t>((a * 37) % x.rows));
    std::vector<std::int32_t> run(x.rows - 10), strided;
    for (std::size_t b = 0; b < run.size(); ++b) run[b] = static_cast<std::int32_t>(b + 5);
    for (std::int64_t i = x.rows - 1; i >= 0; i -= 3) strided.push_back(static_cast<std::int32_t>(i));
    for (const float scale : {1.0f, 0.5f}) {
      if (scale != 1.0f) {
        std::vector<float> halved(x.values);
        for (float& v : halved) v *= scale;
        owner.write(halved.data(), halved.size() * sizeof(float));  // x.values now holds them
      }
      const auto norms = x.sq_norms();
      const cpu::CsrView v{x.row_ptr.data(), x.col_idx.data(), x.values.data(), norms.data(), x.rows, x.cols, &owner};
      if (c.name == "dense_like") EXPECT_TRUE(cpu::gemm_written_out(v));
      for (const auto* active : {&run, &strided}) {
        const auto want = ref::csr_kernel_rows(x, queries, *active, KernelType::Rbf, 0.05, 0, 3);
        std::vector<float> out(queries.size() * active->size());
        cpu::csr_kernel_rows(v, queries.data(), static_cast<std::int64_t>(queries.size()), active->data(),
                             static_cast<std::int64_t>(active->size()), KernelType::Rbf, 0.05, 0, 3, out.data(),
                             cpu::CsrDotPath::Gemm);
        expect_close(out, want, active == &run ? "contiguous targets" : "out-of-order targets");
      }
    }
  }
}

TEST(CsrKernelRows, NoQueriesOrNoActiveRowsWritesNothing) {
  const CsrMatrix x = make_matrix({"tiny", 10, 5, 0.5});
  const auto norms = x.sq_norms();
  const cpu::CsrView v{x.row_ptr.data(), x.col_idx.data(), x.values.data(), norms.data(), x.rows, x.cols};
  float sentinel = 42.0f;
  std::int32_t zero = 0;
  cpu::csr_kernel_rows(v, &zero, 0, &zero, 1, KernelType::Rbf, 1, 0, 3, &sentinel);
  cpu::csr_kernel_rows(v, &zero, 1, &zero, 0, KernelType::Rbf, 1, 0, 3, &sentinel);
  EXPECT_EQ(sentinel, 42.0f);
}

TEST(CsrMatrix, AddRowSortsAndRejectsRepeatedColumns) {
  CsrMatrix x;
  x.add_row({{5, 1.0f}, {2, 2.0f}, {9, 3.0f}});
  EXPECT_EQ(x.col_idx, (std::vector<std::int32_t>{2, 5, 9}));
  EXPECT_EQ(x.values, (std::vector<float>{2.0f, 1.0f, 3.0f}));
  EXPECT_EQ(x.cols, 10);
  EXPECT_THROW(x.add_row({{1, 1.0f}, {1, 2.0f}}), std::invalid_argument);
}

}  // namespace
}  // namespace accel
