#include <gtest/gtest.h>

#include <limits>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "accel/csr.hpp"
#include "accel/error.hpp"
#include "accel/io.hpp"

namespace fs = std::filesystem;

namespace accel {
namespace {

class IoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("accel_io_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name, const std::string& text) {
    const auto p = (dir_ / name).string();
    std::ofstream(p) << text;
    return p;
  }
  // The message must name the file and the line. `read`: the reader tried
  // (load_matrix unless named).
  template <class Read = Matrix (*)(const std::string&)>
  void expect_error(const std::string& path, const std::string& needle, Read read = load_matrix) {
    try {
      read(path);
      FAIL() << "no error for " << path;
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << msg;
      EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    }
  }
  // A float64 .npy of rows x cols values, as numpy writes it (version 1,
  // header padded to 64 bytes).
  static std::string f64_npy(std::int64_t rows, std::int64_t cols, const double* values) {
    std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                         std::to_string(cols) + "), }";
    header.append(64 - (10 + header.size() + 1) % 64, ' ');
    header.push_back('\n');
    std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
    bytes.push_back(static_cast<char>(header.size()));
    bytes.push_back(0);
    bytes += header;
    bytes.append(reinterpret_cast<const char*>(values), static_cast<std::size_t>(rows * cols) * sizeof(double));
    return bytes;
  }
  fs::path dir_;
};

TEST_F(IoTest, NpyRoundTrip) {
  const std::vector<float> v = {1, 2, 3, 4, 5, 6};
  const auto p = (dir_ / "m.npy").string();
  write_npy(p, v.data(), {2, 3});
  const Matrix m = load_matrix(p);
  EXPECT_EQ(m.rows, 2);
  EXPECT_EQ(m.cols, 3);
  EXPECT_EQ(std::vector<float>(m.values(), m.values() + 6), v);
  EXPECT_EQ(read_npy(p).data, v);
  // no temporary left behind
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator{}), 1);
}

// A float32 .npy is used in place: the values are the file's pages (no
// copy in the Matrix), and they outlive the file's name and every copy of
// the Matrix but the last.
TEST_F(IoTest, Float32NpyIsMappedNotCopied) {
  std::vector<float> v(3 * 1000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f;
  const auto p = (dir_ / "big.npy").string();
  write_npy(p, v.data(), {1000, 3});
  Matrix copy;
  {
    const Matrix m = load_matrix(p);
    ASSERT_TRUE(m.view != nullptr);
    EXPECT_TRUE(m.data.empty());
    EXPECT_EQ(m.rows, 1000);
    EXPECT_EQ(m.row(999)[2], v[2999]);
    copy = m;
  }
  fs::remove(p);
  EXPECT_EQ(std::vector<float>(copy.values(), copy.values() + v.size()), v);
  // NaN in a mapped file is refused as in a read one.
  v[1234] = std::nanf("");
  write_npy(p, v.data(), {1000, 3});
  expect_error(p, "row 412, column 2 is NaN");
}

TEST_F(IoTest, NpyFloat64AndBadDtype) {
  const double vals[2] = {1.5, -2.25};
  const std::string bytes = f64_npy(1, 2, vals);
  const auto p = (dir_ / "d.npy").string();
  std::ofstream(p, std::ios::binary) << bytes;
  const Matrix m = load_matrix(p);
  EXPECT_EQ(m.data, (std::vector<float>{1.5f, -2.25f}));  // converted, so held in memory
  EXPECT_TRUE(m.view == nullptr);

  // Converted a block (128Ki values) at a time: 200,000 values span two.
  std::vector<double> many(200000);
  for (std::size_t i = 0; i < many.size(); ++i) many[i] = static_cast<double>(i) / 3.0;
  std::ofstream((dir_ / "big64.npy").string(), std::ios::binary) << f64_npy(100000, 2, many.data());
  const Matrix b = load_matrix((dir_ / "big64.npy").string());
  ASSERT_EQ(b.data.size(), many.size());
  for (std::size_t i : {std::size_t{0}, std::size_t{131071}, std::size_t{131072}, many.size() - 1})
    EXPECT_EQ(b.data[i], static_cast<float>(many[i])) << i;

  std::string bad = bytes;
  bad.replace(bad.find("<f8"), 3, "<i8");
  std::ofstream((dir_ / "i.npy").string(), std::ios::binary) << bad;
  expect_error((dir_ / "i.npy").string(), "dtype");
}

// A worker's partition of a shared file (--pull): rows [begin, begin +
// count) of a file of a known shape, .npy read alone (float32 and float64,
// across the reader's 4 MiB blocks), other formats through load_matrix.
TEST_F(IoTest, RowsOfAFile) {
  const std::int64_t rows = 70000, cols = 20;  // 5.6 MB of float32: two blocks
  std::vector<float> v(rows * cols);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 9973) * 0.5f;
  const auto p = (dir_ / "rows.npy").string();
  write_npy(p, v.data(), {rows, cols});
  std::vector<float> out(60000 * cols);
  load_matrix_rows(p, rows, cols, 7000, 60000, out.data());
  EXPECT_TRUE(std::equal(out.begin(), out.end(), v.begin() + 7000 * cols));
  load_matrix_rows(p, rows, cols, rows, 0, out.data());  // an empty range at the end

  // float64, converted as read.
  const double d[8] = {0, 1, 2, 3, 4.5, 5, 6, 7};
  const auto p64 = (dir_ / "rows64.npy").string();
  std::ofstream(p64, std::ios::binary) << f64_npy(4, 2, d);
  std::vector<float> two(4);
  load_matrix_rows(p64, 4, 2, 2, 2, two.data());
  EXPECT_EQ(two, (std::vector<float>{4.5f, 5, 6, 7}));

  const auto csv = file("rows.csv", "1,2\n3,4\n5,6\n");
  load_matrix_rows(csv, 3, 2, 1, 1, two.data());
  EXPECT_EQ(two[0], 3);
  EXPECT_EQ(two[1], 4);

  // Another shape than the job's, a range past the end, a NaN in the rows:
  // each names the file (the NaN its row in the file).
  auto rows_of = [&](std::int64_t r, std::int64_t c, std::int64_t b, std::int64_t n) {
    return [=, &out](const std::string& path) {
      load_matrix_rows(path, r, c, b, n, out.data());
      return Matrix{};
    };
  };
  expect_error(p, "holds 70000 x 20 values, the job's input 70000 x 21", rows_of(rows, 21, 0, 10));
  expect_error(p, "rows [69990, 70010) of 70000", rows_of(rows, cols, 69990, 20));
  expect_error(csv, "holds 3 x 2 values", rows_of(4, 2, 0, 1));
  v[(40000 + 3) * cols + 5] = std::numeric_limits<float>::quiet_NaN();
  write_npy(p, v.data(), {rows, cols});
  expect_error(p, "row 40004, column 6 is NaN", rows_of(rows, cols, 39000, 2000));
  load_matrix_rows(p, rows, cols, 0, 39000, out.data());  // the NaN is not in these rows
}

// Text partitions: a worker keeps its rows alone, as the whole file reads
// them (a CSV header and blank lines skipped, LIBSVM densified to the
// file's columns); bad data outside the range is not its to report, but
// the file's shape still is.
TEST_F(IoTest, RowsOfATextFileAreTheWholeFilesRows) {
  std::string text = "a,b,c\n";
  for (int i = 0; i < 500; ++i) {
    if (i % 97 == 3) text += "\n";
    text += std::to_string(i) + "," + std::to_string(i * 0.25) + "," + std::to_string(-i) + "\n";
  }
  const auto csv = file("part.csv", text);
  const Matrix all = load_matrix(csv);
  std::vector<float> out(3 * 100);
  load_matrix_rows(csv, 500, 3, 250, 100, out.data());
  EXPECT_TRUE(std::equal(out.begin(), out.end(), all.row(250)));
  std::int64_t total = 0;
  EXPECT_EQ(read_csv_rows(csv, 499, 1, &total).rows, 1);
  EXPECT_EQ(total, 500);
  const auto bad = file("bad.csv", "1,2\n3,4\nx,6\n7,8\n");
  load_matrix_rows(bad, 4, 2, 0, 2, out.data());  // the bad line is another worker's
  EXPECT_EQ(out[2], 3);
  expect_error(bad, "bad.csv:3", [&](const std::string& p) {
    load_matrix_rows(p, 4, 2, 2, 2, out.data());
    return Matrix{};
  });
  expect_error(bad, "holds 4 x 2 values", [&](const std::string& p) {
    load_matrix_rows(p, 5, 2, 0, 1, out.data());
    return Matrix{};
  });

  const auto svm = file("part.svm", "1 1:1 3:3\n-1 2:2\n1 4:4\n-1 1:5 4:6\n");
  const Matrix dense = load_matrix(svm);
  std::vector<float> two(2 * 4);
  load_matrix_rows(svm, 4, 4, 1, 2, two.data());
  EXPECT_TRUE(std::equal(two.begin(), two.end(), dense.row(1)));
}

// A text input read streamed is parsed into a spill file, not held: the
// same values as the plain read, with marks every 4096 rows; a reader of
// some rows (a --pull worker) seeks to the mark before them, and gets the
// same rows, its errors naming the file's true line.
TEST_F(IoTest, StreamedTextIsSpilledAndItsRowsReadFromTheirMarks) {
  constexpr int kRows = 10000;
  std::string csv_text = "a,b,c\r\n", svm_text = "# comment\n";
  for (int i = 0; i < kRows; ++i) {
    if (i % 997 == 5) csv_text += "\n", svm_text += "\n";
    csv_text += std::to_string(i) + "," + std::to_string(i * 0.25) + "," + std::to_string(-i) + "\r\n";
    svm_text += "1 " + (i % 3 ? "1:" + std::to_string(i) + " " : std::string()) + "4:" + std::to_string(i * 0.5) + "\n";
  }
  for (const auto& [name, text, cols] : {std::tuple{"t.csv", csv_text, 3}, std::tuple{"t.svm", svm_text, 4}}) {
    const auto p = file(name, text);
    const Matrix all = load_matrix(p), spilled = load_matrix_streamed(p);
    ASSERT_TRUE(spilled.streamed) << name;
    ASSERT_EQ(spilled.rows, kRows);
    ASSERT_EQ(spilled.cols, cols);
    EXPECT_TRUE(std::equal(all.values(), all.values() + all.rows * all.cols, spilled.values())) << name;
    ASSERT_EQ(spilled.marks.offset.size(), 3u);  // rows 0, 4096, 8192
    EXPECT_EQ(spilled.marks.file_bytes, static_cast<std::int64_t>(fs::file_size(p)));
    for (const auto& [begin, count] : {std::pair{0, 1}, {4095, 2}, {4000, 5000}, {8192, 1808}, {9999, 1}}) {
      std::vector<float> out(static_cast<std::size_t>(count * cols));
      load_matrix_rows(p, kRows, cols, begin, count, out.data(), &spilled.marks);
      EXPECT_TRUE(std::equal(out.begin(), out.end(), all.row(begin))) << name << " rows " << begin;
    }
    std::ofstream(p, std::ios::app) << "\n";  // one byte more than the job's
    std::vector<float> one(static_cast<std::size_t>(cols));
    expect_error(p, "changed since the job began", [&](const std::string& q) {
      load_matrix_rows(q, kRows, cols, 5, 1, one.data(), &spilled.marks);
      return Matrix{};
    });
  }
  // A bad line past a mark: its true line number (1 header + 5000 rows +
  // the blank lines before it).
  std::string bad = csv_text;
  const std::size_t at = bad.find("\r\n5000,");
  bad.replace(at + 2, 4, "50x0");
  const auto p = file("bad.csv", bad);
  const auto line = std::count(bad.begin(), bad.begin() + static_cast<std::ptrdiff_t>(at) + 2, '\n') + 1;
  expect_error(p, "bad.csv:" + std::to_string(line) + ": not a number", load_matrix_streamed);
  const Matrix good = load_matrix_streamed(file("good.csv", csv_text));
  std::ofstream(p, std::ios::trunc) << bad.substr(0, static_cast<std::size_t>(good.marks.file_bytes));
  std::vector<float> out(3 * 10);
  expect_error(p, "bad.csv:" + std::to_string(line) + ": not a number", [&](const std::string& q) {
    load_matrix_rows(q, kRows, 3, 4995, 10, out.data(), &good.marks);
    return Matrix{};
  });
}

// A float64 .npy read streamed is converted into a spill file a block at
// a time (it was read whole into memory).
TEST_F(IoTest, StreamedFloat64NpyIsSpilled) {
  std::vector<double> v(3 * 300000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.5 * static_cast<double>(i % 1000) - 7;
  const auto p = file("d.npy", f64_npy(300000, 3, v.data()));
  const Matrix all = load_matrix(p), streamed = load_matrix_streamed(p);
  EXPECT_TRUE(streamed.streamed);
  EXPECT_TRUE(all.view == nullptr);  // the plain read converts into memory
  ASSERT_EQ(streamed.rows, 300000);
  EXPECT_TRUE(std::equal(all.values(), all.values() + all.rows * all.cols, streamed.values()));
}

// Part files (a glob or a directory) are one matrix, their rows in name
// order; a member reads any range of it from the parts that hold it.
// Byte splits of a text file, counted apart (as cluster members count
// theirs) and numbered in order, are the file: every data row once, the
// widest row's columns, and rows read through the splits' marks equal the
// whole file's, wherever the cuts fall.
std::vector<InputPart> counted_splits(const std::string& path, int n, std::int64_t* rows, std::int64_t* cols) {
  const auto size = static_cast<std::int64_t>(fs::file_size(path));
  std::vector<InputPart> parts;
  std::int64_t lines = 0, expect_first = 0;
  *rows = *cols = 0;
  for (int j = 0; j < n; ++j) {
    TextSplit s = count_text_split(path, size, size * j / n, size * (j + 1) / n);
    EXPECT_EQ(s.first, expect_first) << path << " split " << j << " of " << n;
    expect_first = s.stop;
    for (auto& l : s.marks.line) l += lines;
    lines += s.lines;
    *rows += s.rows;
    *cols = std::max(*cols, s.cols);
    parts.push_back({path, s.rows, size, s.marks, s.first, s.stop, s.sample});
  }
  EXPECT_EQ(expect_first, size);
  return parts;
}

TEST_F(IoTest, TextSplitsCountEveryRowOnceWhereverCut) {
  std::string csv = "x,y,z\r\n", svm = "# made for the test\n";
  for (int i = 0; i < 9000; ++i) {
    csv += std::to_string(i) + "," + std::to_string(i % 13) + ".5," + std::to_string(-i) + (i % 3 ? "\n" : "\r\n");
    svm += std::to_string(i % 2) + (i == 17 ? "" : " 2:" + std::to_string(i)) + (i % 5 ? "" : " 9:1.5") + "\n";
    if (i % 1000 == 0) csv += "\n", svm += "\n  # between the rows\n\r\n";
  }
  csv.pop_back();  // no newline at the end
  for (const auto& path : {file("t.csv", csv), file("t.svm", svm)}) {
    const Matrix whole = load_matrix(path);
    for (int n : {1, 2, 3, 7, 64}) {
      std::int64_t rows = 0, cols = 0;
      const auto parts = counted_splits(path, n, &rows, &cols);
      ASSERT_EQ(rows, whole.rows) << path << " in " << n;
      ASSERT_EQ(cols, whole.cols) << path << " in " << n;
      std::vector<float> got(static_cast<std::size_t>(rows * cols));
      load_parts_rows(parts, cols, 0, rows, got.data());
      ASSERT_TRUE(std::equal(got.begin(), got.end(), whole.values())) << path << " in " << n;
      load_parts_rows(parts, cols, 4095, 4098, got.data());  // across marks and splits
      ASSERT_TRUE(std::equal(got.begin(), got.begin() + 4098 * cols, whole.row(4095))) << path << " in " << n;
    }
  }
  // Two splits cut at every byte of a small file.
  const std::string small = file("s.csv", "a,b\n1,2\n\n3,4\r\n5,6\n7,8");
  const auto size = static_cast<std::int64_t>(fs::file_size(small));
  for (std::int64_t c = 0; c <= size; ++c) {
    const TextSplit p = count_text_split(small, size, 0, c), q = count_text_split(small, size, c, size);
    EXPECT_EQ(p.stop, q.first) << c;
    EXPECT_EQ(p.rows + q.rows, 4) << c;
    EXPECT_EQ(p.lines + q.lines, 6) << c;
  }
}

TEST_F(IoTest, TextSplitsNameTheFilesLineAndRefuseOtherBytes) {
  std::string csv;
  for (int i = 0; i < 10000; ++i) csv += (i == 8500 ? std::string("1,x") : std::to_string(i) + ",1") + "\n";
  const std::string path = file("b.csv", csv);
  std::int64_t rows = 0, cols = 0;
  auto parts = counted_splits(path, 3, &rows, &cols);
  std::vector<float> got(static_cast<std::size_t>(rows * cols));
  try {
    load_parts_rows(parts, cols, 8000, 2000, got.data());
    FAIL() << "no error for the bad value";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":8501: not a number"), std::string::npos) << e.what();
  }
  csv[csv.size() - 3] = '7';  // the same size, other bytes in the last split
  file("b.csv", csv);
  try {
    load_parts_rows(parts, cols, 9990, 10, got.data());
    FAIL() << "no error for the changed file";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("differ from the job's"), std::string::npos) << e.what();
  }
  EXPECT_THROW(count_text_split(path, 5, 0, 5), InputError);  // not the job's size
  EXPECT_THROW(count_text_split(file("x.npy", f64_npy(1, 1, std::vector<double>{1.0}.data())), 0, 0, 0),
               InputError);
}

TEST_F(IoTest, PartFilesAreOneMatrixAndRangesReadFromTheirParts) {
  constexpr int kRows = 9000;
  std::vector<double> v(2 * kRows);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.25 * static_cast<double>(i % 977) - 3;
  std::string csv, svm;
  for (int i = 0; i < kRows; ++i) {
    csv += std::to_string(v[2 * i]) + "," + std::to_string(v[2 * i + 1]) + "\n";
    svm += "1 1:" + std::to_string(v[2 * i]) + (i == 4100 ? "" : " 2:" + std::to_string(v[2 * i + 1])) + "\n";
  }
  const std::vector<int> cuts{0, 4100, 4100, 4101, 9000};  // an empty part, a part of one row
  auto lines = [](const std::string& t, int a, int b) {
    std::size_t from = 0, to = 0;
    for (int k = 0; k < b; ++k) (k < a ? from : to) = t.find('\n', k < a ? from : to) + 1, to = std::max(to, from);
    return t.substr(from, to - from);
  };
  fs::create_directories(dir_ / "n");
  fs::create_directories(dir_ / "c");
  fs::create_directories(dir_ / "s");
  for (std::size_t k = 0; k + 1 < cuts.size(); ++k) {
    const std::string name = "part-" + std::to_string(k);
    file("n/" + name + ".npy", f64_npy(cuts[k + 1] - cuts[k], 2, v.data() + 2 * cuts[k]));
    file("c/" + name + ".csv", lines(csv, cuts[k], cuts[k + 1]));
    file("s/" + name, lines(svm, cuts[k], cuts[k + 1]));
  }
  const Matrix dense = load_matrix(file("all.csv", csv)), sparse = load_matrix(file("all.svm", svm));
  for (const std::string spec : {(dir_ / "n/part-*.npy").string(), (dir_ / "c").string(), (dir_ / "s/part-?").string()}) {
    const Matrix& whole = spec.back() == '?' ? sparse : dense;  // row 4100's LIBSVM part is one column wide
    ASSERT_TRUE(names_parts(spec));
    const Matrix m = load_matrix_streamed(spec);
    ASSERT_EQ(m.rows, kRows) << spec;
    ASSERT_EQ(m.cols, 2) << spec;
    ASSERT_EQ(m.parts.size(), 4u) << spec;
    EXPECT_EQ(m.parts[2].rows, 1);
    EXPECT_TRUE(std::equal(whole.values(), whole.values() + 2 * kRows, m.values())) << spec;
    for (const auto& [begin, count] : {std::pair{0, 9000}, {4099, 3}, {4100, 1}, {4101, 4899}, {10, 4500}}) {
      std::vector<float> out(static_cast<std::size_t>(2 * count));
      load_parts_rows(m.parts, 2, begin, count, out.data());
      EXPECT_TRUE(std::equal(out.begin(), out.end(), whole.row(begin))) << spec << " rows " << begin;
    }
    std::vector<float> out(2);
    EXPECT_THROW(load_parts_rows(m.parts, 2, 8999, 2, out.data()), InputError);
    std::ofstream(m.parts[3].path, std::ios::app) << "\n";  // a part changed since the job began
    expect_error(m.parts[3].path, "changed since the job began", [&](const std::string&) {
      load_parts_rows(m.parts, 2, 5000, 1, out.data());
      return Matrix{};
    });
  }
  expect_error((dir_ / "none-*.npy").string(), "matches no file");
  file("c/part-9.csv", "1,2,3\n");
  expect_error((dir_ / "c/part-9.csv").string(), "3 columns, the parts before it 2",
               [&](const std::string&) { return load_matrix((dir_ / "c").string()); });
  file("n/part-9.npy", "1,2\n");
  expect_error((dir_ / "n/part-9.npy").string(), "CSV, the part", [&](const std::string&) {
    return load_matrix((dir_ / "n/*").string());
  });
  // A file whose name looks like a glob is that file.
  const auto odd = file("x[1].csv", "1,2\n");
  EXPECT_FALSE(names_parts(odd));
  EXPECT_EQ(load_matrix(odd).rows, 1);
}

TEST_F(IoTest, SpillFileThatCannotBeMadeIsOneError) {
  const auto p = file("s.csv", "1,2\n3,4\n");
  ::setenv("ACCEL_SPILL_DIR", (dir_ / "missing").c_str(), 1);
  expect_error(p, "spill file in", load_matrix_streamed);
  ::unsetenv("ACCEL_SPILL_DIR");
  EXPECT_EQ(load_matrix_streamed(p).rows, 2);
}

TEST_F(IoTest, NpyOneDimensionalIsRejected) {
  const std::vector<float> v = {1, 2, 3};
  const auto p = (dir_ / "v.npy").string();
  write_npy(p, v.data(), {3});
  expect_error(p, "2-D");
}

TEST_F(IoTest, CsvWithHeader) {
  const Matrix m = load_matrix(file("a.csv", "x,y\n1,2\n3.5,-4\n"));
  EXPECT_EQ(m.rows, 2);
  EXPECT_EQ(m.data, (std::vector<float>{1, 2, 3.5f, -4}));
}

TEST_F(IoTest, CsvErrorsNameTheLine) {
  expect_error(file("b.csv", "1,2\n3,abc\n"), ":2:");
  expect_error(file("c.csv", "1,2\n3\n"), ":2:");
  expect_error(file("nan.csv", "1,2\n3,nan\n"), "row 2, column 2 is NaN");
  expect_error(file("inf.csv", "1,inf\n"), "Inf");
}

// Issue 34: a directory read as "no data rows", and a NUL byte inside a
// value cut the message short at the NUL.
// A directory is an input of part files (its files); one without any is
// called what it is.
TEST_F(IoTest, ADirectoryIsCalledADirectory) {
  const auto d = (dir_ / "a_directory").string();
  fs::create_directories(d);
  expect_error(d, "a directory with no files");
  expect_error(d, "a directory with no files", read_libsvm_csr);
}

TEST_F(IoTest, ANulByteInAValueIsShownNotACut) {
  const std::string text("1,2\n3,4\0" "5\n", 9);
  expect_error(file("nul.csv", text), "'4\\x005'");
}

TEST_F(IoTest, LibsvmDensified) {
  const Matrix m = load_matrix(file("a.svm", "+1 1:0.5 3:2\n-1 2:1 # comment\n"));
  EXPECT_EQ(m.rows, 2);
  EXPECT_EQ(m.cols, 3);
  EXPECT_EQ(m.data, (std::vector<float>{0.5f, 0, 2, 0, 1, 0}));
}

TEST_F(IoTest, LibsvmErrorsNameTheLine) {
  expect_error(file("m.svm", "1 1:2\n1 2 3:4\n"), ":2:");
  expect_error(file("n.svm", "1 1:x\n"), ":1:");
  expect_error(file("o.svm", "1 3:1 2:1\n"), "does not increase");
  expect_error(file("p.svm", "abc 1:1\n"), "label");
  expect_error(file("q.svm", ""), "no data");
}

TEST_F(IoTest, IdxGzip) {
  const auto p = (dir_ / "t-idx3-ubyte.gz").string();
  gzFile f = gzopen(p.c_str(), "wb");
  const unsigned char head[] = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2};
  const unsigned char px[] = {0, 1, 2, 255, 4, 5, 6, 7};
  gzwrite(f, head, sizeof head);
  gzwrite(f, px, sizeof px);
  gzclose(f);
  const Matrix m = load_matrix(p);
  EXPECT_EQ(m.rows, 2);
  EXPECT_EQ(m.cols, 4);
  EXPECT_EQ(m.data[3], 255.0f);
}

TEST_F(IoTest, IdxTruncated) {
  const auto p = (dir_ / "u-idx3-ubyte.gz").string();
  gzFile f = gzopen(p.c_str(), "wb");
  const unsigned char head[] = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2};
  gzwrite(f, head, sizeof head);
  gzclose(f);
  expect_error(p, "truncated");
}

// Hostile headers (issue 17 #6): one InputError naming the file, before
// anything the header sizes is allocated.
std::string npy_with_shape(const std::string& shape) {
  std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(h.size() & 0xff);
  out += static_cast<char>(h.size() >> 8);
  return out + h + std::string(16, '\0');  // four floats of data
}

TEST_F(IoTest, NpyHeadersThatLieAreInputErrors) {
  const struct {
    std::string shape, needle;
  } cases[] = {
      {"(1000000000, 4)", "needs 16000000000 bytes"},
      {"(4294967296, 4294967296)", "overflows"},
      {"(99999999999999999999, 4)", "is not a size"},
      {"(-1, 4)", "is not a size"},
      {"(4, -1)", "is not a size"},
  };
  for (const auto& c : cases) {
    const auto p = (dir_ / "h.npy").string();
    std::ofstream(p, std::ios::binary) << npy_with_shape(c.shape);
    expect_error(p, c.needle);
  }
  const auto ok = (dir_ / "ok.npy").string();
  std::ofstream(ok, std::ios::binary) << npy_with_shape("(2, 2)");
  EXPECT_EQ(load_matrix(ok).rows, 2);
}

TEST_F(IoTest, IdxHeadersThatLieAreInputErrors) {
  auto idx = [&](const std::string& name, std::vector<unsigned char> head) {
    const auto p = (dir_ / name).string();
    gzFile f = gzopen(p.c_str(), "wb");
    gzwrite(f, head.data(), static_cast<unsigned>(head.size()));
    gzclose(f);
    return p;
  };
  // 4 x 2^32 x 2^32 x 2^32 values.
  expect_error(idx("a-idx4-ubyte.gz", {0, 0, 8, 4, 0, 0, 0, 4, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
                                       255}),
               "overflow");
  // 2^31 x 4 promised, 2 bytes there: fails at the end of the data, never allocating the promise.
  expect_error(idx("b-idx2-ubyte.gz", {0, 0, 8, 2, 128, 0, 0, 0, 0, 0, 0, 4, 1, 2}), "truncated");
  expect_error(idx("c-idx1-ubyte.gz", {0, 0, 0x0B, 1, 0, 0, 0, 1, 0, 0}), "0x0B");
}

TEST_F(IoTest, LibsvmTooWideToDensifyIsAnInputError) {
  // 14 bytes naming column 2e8: dense consumers refuse it up front; the
  // SVM reader, which stays sparse, takes it.
  const auto p = file("wide.svm", "1 200000000:1\n");
  expect_error(p, "densifying");
  const LabeledCsr sparse = read_libsvm_csr(p);
  EXPECT_EQ(sparse.x.cols, 200000000);
}

// Outputs as a set (issue 17 #9): a failure while writing any of them
// replaces none, leaves no temporaries, and stale temporaries of dead
// processes are removed.
TEST_F(IoTest, OutputSetReplacesAllOrNothing) {
  const auto a = file("a.out", "old a"), b = file("b.out", "old b");
  EXPECT_THROW(
      {
        OutputSet set;
        set.add(a, [](std::ostream& o) { o << "new a"; });
        set.add(b, [](std::ostream&) { throw InputError("disk full"); });
        set.commit();
      },
      InputError);
  auto text = [](const std::string& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(text(a), "old a");
  EXPECT_EQ(text(b), "old b");
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  {
    OutputSet set;
    set.add(a, [](std::ostream& o) { o << "new a"; });
    set.add(b, [](std::ostream& o) { o << "new b"; });
    set.commit();
  }
  EXPECT_EQ(text(a), "new a");
  EXPECT_EQ(text(b), "new b");
}

TEST_F(IoTest, StaleTemporariesOfDeadProcessesAreRemoved) {
  const auto out = (dir_ / "c.npy").string();
  const auto dead = file("c.npy.tmp.999999999", "left by a kill");  // beyond pid_max: no such process
  const auto alive = file("c.npy.tmp.1", "init's: a live process");
  const float v[2] = {1, 2};
  write_npy(out, v, {2});
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(alive));
  EXPECT_EQ(read_npy_vector(out).size(), 2u);
}

// Input quirks (issue 17 #10).
TEST_F(IoTest, CsvFirstRowWithANumberIsDataNotAHeader) {
  expect_error(file("e.csv", "1e39,2\n3,4\n"), ":1:");
  expect_error(file("x.csv", "3x,2\n3,4\n"), ":1:");
  const Matrix m = load_matrix(file("h.csv", "alpha,beta\n1,2\n"));
  EXPECT_EQ(m.rows, 1);
}

TEST_F(IoTest, FormatsAreDetectedByContentNotName) {
  const auto p = (dir_ / "images.gz").string();  // IDX without "idx" in its name
  gzFile f = gzopen(p.c_str(), "wb");
  const unsigned char idx[] = {0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3, 4};
  gzwrite(f, idx, sizeof idx);
  gzclose(f);
  EXPECT_EQ(load_matrix(p).cols, 2);
  const Matrix l = load_matrix(file("my_idx_notes.txt", "1 1:0.5 2:2\n"));  // LIBSVM, "idx" in its name
  EXPECT_EQ(l.cols, 2);
  const Matrix c = load_matrix(file("table.txt", "1,2,3\n4,5,6\n"));  // CSV without .csv
  EXPECT_EQ(c.cols, 3);
}

TEST_F(IoTest, MissingFile) { expect_error((dir_ / "nope.npy").string(), "no such file"); }

TEST_F(IoTest, AtomicWriteLeavesNothingOnFailure) {
  const auto p = (dir_ / "out.bin").string();
  EXPECT_THROW(atomic_write(p, [](std::ostream& o) {
                 o << "partial";
                 throw InputError("stop");
               }),
               InputError);
  EXPECT_FALSE(fs::exists(p));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator{}), 0);
}

}  // namespace
}  // namespace accel
