// LIBSVM text into CSR, and LIBSVM model files: errors name file and line;
// a model written and read back predicts the same.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <span>

#include "accel/csr.hpp"
#include "accel/error.hpp"
#include "accel/registry.hpp"
#include "accel/svm.hpp"

namespace fs = std::filesystem;

namespace accel {
namespace {

class SvmIo : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("accel_svm_io_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name, const std::string& text) {
    const auto p = (dir_ / name).string();
    std::ofstream(p) << text;
    return p;
  }
  void expect_error(const std::string& text, const std::string& needle) {
    const std::string p = file("bad.txt", text);
    try {
      read_libsvm_csr(p);
      FAIL() << "no error for: " << text;
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    }
  }
  fs::path dir_;
};

TEST_F(SvmIo, ReadsSparseRowsWithLineNumbers) {
  const auto p = file("ok.txt", "# comment\n+1 1:0.5 3:2\n\n-1 2:1e-3 4:0\n2\n");
  const LabeledCsr d = read_libsvm_csr(p);
  EXPECT_EQ(d.x.rows, 3);
  EXPECT_EQ(d.x.cols, 4);  // an explicit zero still counts as a feature (LIBSVM's default gamma)
  EXPECT_EQ(d.labels, (std::vector<double>{1, -1, 2}));
  EXPECT_EQ(d.lines, (std::vector<std::int64_t>{2, 4, 5}));
  EXPECT_EQ(d.x.row_ptr, (std::vector<std::int64_t>{0, 2, 3, 3}));
  EXPECT_EQ(d.x.col_idx, (std::vector<std::int32_t>{0, 2, 1}));
  EXPECT_FLOAT_EQ(d.x.values[2], 1e-3f);
}

// Text in memory parses in pieces (one per thread past 8 MB, as a worker
// parses the file the SVM coordinator pushed): the same rows, labels and
// line numbers as the file read line by line, and an error names its line
// in the whole file, not in its piece. read_libsvm_rows keeps only the rows
// asked for, and the whole file's labels, lines and shape.
TEST_F(SvmIo, TextInMemoryParsesInPiecesAsTheFileReads) {
  std::string text;
  for (int i = 0; i < 120000; ++i) {
    if (i % 1000 == 7) text += "# a comment\n\n";
    text += std::to_string(i % 3 - 1) + " " + std::to_string(i % 50 + 1) + ":" + std::to_string(i * 0.5) + " 60:" +
            std::to_string(i % 11) + " 61:0.25 62:0.5 63:0.75 64:1 65:1.25 66:1.5 67:1.75 68:2\n";
  }
  ASSERT_GT(text.size(), std::size_t{8} << 20);
  const std::string p = file("big.txt", text);
  const LabeledCsr want = read_libsvm_csr(p);
  const LabeledCsr got = parse_libsvm_csr(std::as_bytes(std::span(text)), p);
  EXPECT_EQ(got.labels, want.labels);
  EXPECT_EQ(got.lines, want.lines);
  EXPECT_EQ(got.x.rows, want.x.rows);
  EXPECT_EQ(got.x.cols, want.x.cols);
  EXPECT_EQ(got.x.row_ptr, want.x.row_ptr);
  EXPECT_EQ(got.x.col_idx, want.x.col_idx);
  EXPECT_EQ(got.x.values, want.x.values);

  std::int64_t nnz = 0;
  std::vector<std::int64_t> offsets;
  const LabeledCsr some = read_libsvm_rows(p, [](std::int64_t r) { return r % 1000 == 5; }, &nnz, &offsets);
  ASSERT_EQ(offsets.size(), static_cast<std::size_t>(want.x.rows));
  const std::vector<std::int64_t> pick = {119999, 0, 7, 1007, 64000};
  std::vector<std::int64_t> where, lines;
  for (const auto r : pick) where.push_back(offsets[r]), lines.push_back(want.lines[r]);
  const LabeledCsr back = read_libsvm_lines(p, where, lines);
  ASSERT_EQ(back.x.rows, static_cast<std::int64_t>(pick.size()));
  for (std::size_t i = 0; i < pick.size(); ++i) {
    const auto r = pick[i];
    EXPECT_EQ(back.labels[i], want.labels[r]);
    EXPECT_TRUE(std::equal(want.x.values.begin() + want.x.row_ptr[r], want.x.values.begin() + want.x.row_ptr[r + 1],
                           back.x.values.begin() + back.x.row_ptr[i], back.x.values.begin() + back.x.row_ptr[i + 1]))
        << "row " << r;
  }
  // The labels alone, in pieces: what read_libsvm_rows keeping nothing gives.
  std::int64_t nnz_labels = 0;
  std::vector<std::int64_t> offsets_labels;
  const LabeledCsr labels = read_libsvm_labels(p, &nnz_labels, &offsets_labels);
  EXPECT_EQ(nnz_labels, want.x.nnz());
  EXPECT_EQ(offsets_labels, offsets);
  EXPECT_EQ(labels.labels, want.labels);
  EXPECT_EQ(labels.lines, want.lines);
  EXPECT_EQ(labels.x.cols, want.x.cols);
  ASSERT_EQ(labels.x.rows, want.x.rows);
  EXPECT_EQ(labels.x.nnz(), 0);
  std::filesystem::resize_file(p, static_cast<std::uintmax_t>(offsets[119999]));  // the file cut since
  EXPECT_THROW(read_libsvm_lines(p, {offsets[119999]}, {want.lines[119999]}), InputError);
  EXPECT_EQ(nnz, want.x.nnz());
  EXPECT_EQ(some.labels, want.labels);
  EXPECT_EQ(some.lines, want.lines);
  EXPECT_EQ(some.x.cols, want.x.cols);
  ASSERT_EQ(some.x.rows, want.x.rows);
  for (std::int64_t r : {std::int64_t{4}, std::int64_t{5}, std::int64_t{119005}}) {
    const auto len = some.x.row_ptr[r + 1] - some.x.row_ptr[r];
    EXPECT_EQ(len, r % 1000 == 5 ? want.x.row_ptr[r + 1] - want.x.row_ptr[r] : 0) << "row " << r;
  }

  std::string bad = text;
  const auto at = bad.find("\n", bad.size() * 3 / 4) + 1;  // a line in the last piece
  const auto line = std::count(bad.begin(), bad.begin() + static_cast<std::ptrdiff_t>(at), '\n') + 1;
  bad.insert(at, "1 5:x\n");
  try {
    parse_libsvm_csr(std::as_bytes(std::span(bad)), "pushed.txt");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("pushed.txt:" + std::to_string(line) + ":"), std::string::npos) << e.what();
  }
  const std::string q = file("bad.txt", bad);
  try {
    read_libsvm_labels(q);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(q + ":" + std::to_string(line) + ":"), std::string::npos) << e.what();
  }
}

TEST_F(SvmIo, BadInputNamesFileAndLine) {
  expect_error("1 1:1\n1 2 3:1\n", "bad.txt:2: '2' has no ':'");
  expect_error("1 1:1\n-1 1:abc\n", "bad.txt:2: value 'abc'");
  expect_error("1 3:1 2:1\n", "bad.txt:1: feature index 2 does not increase");
  expect_error("1 1:1 1:2\n", "bad.txt:1: feature index 1 does not increase");
  expect_error("1 1:1\nx 1:1\n", "bad.txt:2: label 'x'");
  expect_error("1 0:1\n", "bad.txt:1: bad feature index '0'");
  expect_error("", "no data rows");
  expect_error("# only a comment\n\n", "no data rows");
}

TEST_F(SvmIo, OneClassAndFractionalLabelsAreInputErrors) {
  static const Registry reg = Registry::discover_all();
  const auto devs = reg.select("cpu", KernelId::CsrKernelRows);
  const auto one = file("one.txt", "1 1:1\n1 1:2\n");
  try {
    svm_train(read_libsvm_csr(one), SvmParams{}, devs);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("only one class"), std::string::npos) << e.what();
  }
  const auto frac = file("frac.txt", "1 1:1\n\n2.5 1:2\n");
  try {
    svm_train(read_libsvm_csr(frac), SvmParams{}, devs);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("frac.txt:3: label 2.5"), std::string::npos) << e.what();
  }
}

TEST_F(SvmIo, ModelRoundTripPredictsTheSame) {
  // Three classes on a line: 0..1 -> 5, 2..3 -> 2, 4..5 -> 9 (class order of first appearance).
  std::string text;
  for (int i = 0; i < 60; ++i) {
    const double v = (i % 30) / 5.0;
    const int label = v < 2 ? 5 : v < 4 ? 2 : 9;
    text += std::to_string(label) + " 1:" + std::to_string(v) + " 3:" + std::to_string(0.1 * (i % 3)) + "\n";
  }
  const LabeledCsr d = read_libsvm_csr(file("train.txt", text));
  static const Registry reg = Registry::discover_all();
  const auto devs = reg.select("cpu", KernelId::CsrKernelRows);
  for (const KernelType k : {KernelType::Linear, KernelType::Polynomial, KernelType::Rbf, KernelType::Sigmoid}) {
    SvmParams p;
    p.kernel = k;
    p.C = 10;
    p.coef0 = k == KernelType::Sigmoid ? -1 : 1;
    p.gamma = k == KernelType::Sigmoid ? 0.1 : 0;
    const SvmModel m = svm_train(d, p, devs);
    EXPECT_EQ(m.labels, (std::vector<int>{5, 2, 9}));
    const auto path = (dir_ / "m.model").string();
    write_svm_model(path, m);
    const SvmModel back = read_svm_model(path);
    EXPECT_EQ(back.labels, m.labels);
    EXPECT_EQ(back.n_sv, m.n_sv);
    EXPECT_EQ(back.sv.col_idx, m.sv.col_idx);
    ASSERT_EQ(back.rho.size(), 3u);
    for (int r = 0; r < 3; ++r) EXPECT_DOUBLE_EQ(back.rho[r], m.rho[r]);
    EXPECT_EQ(svm_predict(back, d.x, devs), svm_predict(m, d.x, devs));
    if (k == KernelType::Rbf || k == KernelType::Polynomial) {
      const auto pred = svm_predict(m, d.x, devs);
      int correct = 0;
      for (std::size_t i = 0; i < pred.size(); ++i) correct += pred[i] == d.labels[i];
      EXPECT_GE(correct, 54) << "kernel " << static_cast<int>(k);
    }
  }
}

TEST_F(SvmIo, ModelErrorsNameFileAndLine) {
  const auto p = file("m.model", "svm_type nu_svm\nkernel_type rbf\n");
  try {
    read_svm_model(p);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("m.model:1"), std::string::npos) << e.what();
  }
  const auto q = file("q.model",
                      "svm_type c_svc\nkernel_type rbf\ngamma 1\nnr_class 2\ntotal_sv 2\nrho 0\nlabel 1 -1\n"
                      "nr_sv 1 1\nSV\n1 1:1\nx 1:2\n");
  try {
    read_svm_model(q);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("q.model:11"), std::string::npos) << e.what();
  }
}

// Hostile headers (issue 17): each is one InputError naming what is wrong,
// before any allocation the header sizes; never a read out of bounds.
TEST_F(SvmIo, HostileModelHeadersAreInputErrors) {
  const std::string head = "svm_type c_svc\nkernel_type rbf\ngamma 1\n";
  const struct {
    std::string text, needle;
  } cases[] = {
      {head + "nr_class 2\ntotal_sv 3\nrho 0\nlabel 1 -1\nnr_sv -1 4\nSV\n1 1:1\n1 1:2\n-1 1:3\n", "negative"},
      {head + "nr_class 2\ntotal_sv 3000000000\nrho 0\nlabel 1 -1\nnr_sv 1500000000 1500000000\nSV\n1 1:1\n",
       "total_sv"},
      {head + "nr_class 70000\ntotal_sv 1\nrho 0\nSV\n1 1:1\n", "nr_class"},
      {head + "nr_class 3\ntotal_sv 2\nrho 0 0 0\nlabel 1 2 3\nnr_sv 1 1 0\nSV\n1\n", "total_sv"},
      {"svm_type c_svc\nkernel_type rbf\ngamma 1 junk\nnr_class 2\ntotal_sv 1\nrho 0\nlabel 1 -1\nnr_sv 1 0\nSV\n1 1:1\n",
       "trailing"},
      {head + "nr_class 2 3\ntotal_sv 1\nrho 0\nlabel 1 -1\nnr_sv 1 0\nSV\n1 1:1\n", "trailing"},
  };
  for (const auto& c : cases) {
    const auto p = file("h.model", c.text);
    try {
      read_svm_model(p);
      ADD_FAILURE() << "no error for:\n" << c.text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(c.needle), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace accel
