// An input file's format, from its first bytes (load.cpp): what the
// single-file readers and the part-file reader (parts.cpp) both decide by.
#pragma once

#include <string>

#include "accel/io.hpp"

namespace accel::io {

enum class Format { Npy, Idx, Csv, Libsvm };

// .npy's magic, IDX's header (plain or gzip); other text is CSV when its
// name ends in .csv or its first line has a comma, LIBSVM otherwise.
Format format_of(const std::string& path);
const char* format_name(Format f);

// The matrix of an input of part files (parts.cpp): spilled, mapped and
// checked finite; Matrix::streamed when streamed.
Matrix load_parts(const std::string& spec, bool streamed);

}  // namespace accel::io
