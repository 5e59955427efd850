// Sparse rows in compressed-sparse-row form (Narasimhan et al. 2014 keep samples this way:
// most real data sets are far from dense) and the LIBSVM text reader that
// produces them. Column indices are 0-based here; LIBSVM files are 1-based.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace accel {

struct CsrMatrix {
  std::int64_t rows = 0;
  std::int64_t cols = 0;                  // 1 + largest column index seen (0 when empty)
  std::vector<std::int64_t> row_ptr{0};   // rows + 1 entries
  std::vector<std::int32_t> col_idx;      // strictly increasing within a row
  std::vector<float> values;

  std::int64_t nnz() const { return static_cast<std::int64_t>(values.size()); }
  std::int64_t row_nnz(std::int64_t i) const { return row_ptr[i + 1] - row_ptr[i]; }

  // Appends a row given as (column, value) pairs in any order: the kernels
  // merge by index, so the pairs are sorted here. A repeated column throws
  // std::invalid_argument (the caller knows the file and line to name).
  void add_row(std::vector<std::pair<std::int32_t, float>> entries);
  // Appends row i of another matrix (already sorted).
  void add_row_from(const CsrMatrix& other, std::int64_t i);

  // ||x_i||^2 in double for every row: the RBF kernel uses
  // ||u - v||^2 = ||u||^2 + ||v||^2 - 2 u.v.
  std::vector<double> sq_norms() const;
};

// A LIBSVM text file: "label index:value index:value ...", indices 1-based
// and increasing. Every malformed line throws InputError "path:line: ...".
struct LabeledCsr {
  std::vector<double> labels;
  CsrMatrix x;
  std::string source;               // file name, for error messages
  std::vector<std::int64_t> lines;  // line number of each row (blank and comment lines skipped)
};
// Appends from's rows, labels and lines to to's.
void append_rows(LabeledCsr& to, const LabeledCsr& from);
// A file, or part files (io.hpp's names_parts: a glob or a directory, each
// part parsed alone and the rows joined in name order; empty parts allowed).
LabeledCsr read_libsvm_csr(const std::string& path);
// Like read_libsvm_csr, keeping the values of the rows `keep` says yes to (by row
// index) and leaving the others empty: every line is still checked, and
// labels, lines and cols are the whole file's. nonzeros (optional): the
// whole file's count; offsets (optional): each row's line's byte offset.
// The distributed SVM's coordinator reads the labels this way.
LabeledCsr read_libsvm_rows(const std::string& path, const std::function<bool(std::int64_t)>& keep,
                           std::int64_t* nonzeros = nullptr, std::vector<std::int64_t>* offsets = nullptr);
// read_libsvm_rows keeping no values: the labels, lines and shape (every
// line still checked), the nonzeros and each row's line offset, parsed in
// pieces of whole lines on every thread. What a coordinator that holds no
// rows reads.
LabeledCsr read_libsvm_labels(const std::string& path, std::int64_t* nonzeros = nullptr,
                              std::vector<std::int64_t>* offsets = nullptr);
// Rows read back by where read_libsvm_rows found them (offsets: their
// lines' byte offsets; lines: their line numbers, for errors), in that
// order: the support vectors' rows, without parsing the file again.
LabeledCsr read_libsvm_lines(const std::string& path, const std::vector<std::int64_t>& offsets,
                             const std::vector<std::int64_t>& lines);
// Up to max_rows data rows from `in`, which stands at a line start after
// line `line` of `path` (for errors): a block of a file read from a mark
// (io.hpp's TextMarks). The stream then stands right after the last row's
// line.
LabeledCsr read_libsvm_block(std::istream& in, const std::string& path, std::int64_t line, std::int64_t max_rows);
// LIBSVM text already in memory (a file's bytes pushed to a worker); errors
// name `source`.
LabeledCsr parse_libsvm_csr(std::span<const std::byte> text, const std::string& source);

}  // namespace accel
