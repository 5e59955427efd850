// What the text readers share (text_readers.cpp, text_spill.cpp, load.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "accel/io.hpp"

namespace accel::io {

// A line every text reader skips.
inline bool blank_line(const std::string& line) { return line.empty() || line == "\r"; }
// One CSV line's fields into row; false, with the bad field, when one is
// not a number.
bool csv_fields(std::string_view line, std::vector<float>& row, std::string& bad);
// A first line none of whose fields starts like a number: a header.
bool csv_header(const std::string& line);

// CSV (csv) or LIBSVM text, densified, parsed into a spill file and mapped:
// a streamed Matrix with its marks (text_spill.cpp).
Matrix spill_text(const std::string& path, bool csv);
// The pieces of that read, for inputs spilled into one file (parts.cpp).
class SpillFile;
// CSV: the data rows into spill; rows, columns and marks, no view.
Matrix spill_csv(const std::string& path, SpillFile& spill);
// LIBSVM's first pass: rows, columns and marks, no values.
Matrix scan_libsvm(const std::string& path);
// Its second: the rows densified to cols columns into spill.
void spill_libsvm_rows(const std::string& path, const TextMarks& marks, std::int64_t cols, SpillFile& spill);
// InputError naming path when rows x cols floats are far more than its
// file_bytes: a set too sparse to densify.
void check_densify(const std::string& path, std::int64_t rows, std::int64_t cols, std::int64_t file_bytes);
// Rows [begin, begin + count) of such text from the mark before them, into
// out (count x cols); InputError when the file's size is not the marks'.
void read_text_rows(const std::string& path, bool csv, const TextMarks& marks, std::int64_t begin, std::int64_t count,
                    std::int64_t cols, float* out);

}  // namespace accel::io
