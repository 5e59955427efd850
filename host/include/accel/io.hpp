// Reading inputs and writing outputs. Every reader throws InputError naming
// the file (and line or offset) on malformed data; every writer goes through
// a temporary file and a rename, so a failure never leaves half an output.
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "accel/csr.hpp"

namespace accel {

// Where a text input's data rows start, so that a reader of some of them
// seeks to the mark before them instead of reading the file from its start
// (as Hadoop's input splits do: a reader owns whole lines). The mark of
// every kStride-th data row: its line's byte offset and the number of the
// line before it. With the file's size, which a reader checks (a file
// changed since the marks were taken is refused).
struct TextMarks {
  static constexpr std::int64_t kStride = 4096;
  std::int64_t file_bytes = 0;
  std::vector<std::int64_t> offset, line;
  bool empty() const { return offset.empty(); }
};

// One file of an input given as part files (a glob or a directory): its
// rows follow the rows of the parts before it, in name order.
//
// A split of one text file (count_text_split) is a part too: its rows are
// the lines that start in its bytes, and `sample` (nonzero) is the crc of
// bytes sampled from [first_byte, stop_byte), which a reader checks before
// it reads them (a member never computes on other bytes).
struct InputPart {
  std::string path;  // absolute
  std::int64_t rows = 0, file_bytes = 0;
  TextMarks marks;  // text: where its rows start (empty: .npy)
  std::int64_t first_byte = 0, stop_byte = 0;
  std::uint32_t sample = 0;  // 0: a whole file
};

// A byte split of a CSV or LIBSVM text file, as Hadoop's input splits: the
// lines that start in [begin, end). Counting finds where its rows are
// (its marks, their lines counted from the split's first) without parsing
// their values; the reader of a row parses it.
struct TextSplit {
  std::int64_t rows = 0, lines = 0;
  // CSV: the fields of its first data row; LIBSVM: its largest index.
  std::int64_t cols = 0;
  std::int64_t first = 0, stop = 0;  // the bytes of its whole lines
  std::uint32_t sample = 0;          // text_split_sample of them
  TextMarks marks;
};
// InputError naming the file when it is not text, or not file_bytes long.
TextSplit count_text_split(const std::string& path, std::int64_t file_bytes, std::int64_t begin, std::int64_t end);
// InputError naming the file when rows x cols floats are far more than
// its file_bytes (LIBSVM text too sparse to densify for k-means).
void check_densify_text(const std::string& path, std::int64_t rows, std::int64_t cols, std::int64_t file_bytes);
// crc32 of 16 blocks of 4 KiB spread over [first, stop) (all of it when
// smaller), never 0.
std::uint32_t text_split_sample(const std::string& path, std::int64_t first, std::int64_t stop);

// Dense float32 matrix, row-major. Its values are `data`, or, when `view`
// is set, a read-only view that another owner keeps alive (a memory-mapped
// .npy: map_npy). Read them through values() or row().
struct Matrix {
  std::int64_t rows = 0, cols = 0;
  std::vector<float> data;
  std::shared_ptr<const float> view;
  // A mapped view whose pages the passes over it give back as they go
  // (release_rows): the process holds the rows it reads now, not the file.
  bool streamed = false;
  // A text file read streamed: where its rows start (empty otherwise).
  TextMarks marks;
  // An input of part files: each one's rows (empty: one file).
  std::vector<InputPart> parts;
  const float* values() const { return view ? view.get() : data.data(); }
  const float* row(std::int64_t i) const { return values() + i * cols; }
};

// Whether an --input names part files: a glob (*, ? or [) or a directory
// (its files, hidden ones aside), unless a file of that very name exists.
bool names_parts(const std::string& spec);
// The files it names in name order, absolute (a single file: itself);
// InputError naming spec when it matches none.
std::vector<std::string> input_files(const std::string& spec);

// By the file's first bytes: .npy (float32/float64, 2-D, C order; read as
// map_npy does), IDX (gzip or raw), CSV (a .csv name or a comma in the first
// line), anything else as LIBSVM text (densified). Rejects NaN and Inf,
// naming the row and column.
// Part files (names_parts) are one matrix, their rows in name order: all
// .npy with the same columns, all CSV with the same, or all LIBSVM
// (densified to the widest); spilled into one file and mapped (see below),
// each part's rows and marks in Matrix::parts.
Matrix load_matrix(const std::string& path);
// The same, streamed where the file is mapped (Matrix::streamed): the
// checks and the k-means seeding read it a block at a time and give each
// block's pages back, so a process that computes on few of the rows (a
// cluster coordinator) never holds the file. CSV and LIBSVM text is parsed
// once into a float32 spill file (unlinked at once, in ACCEL_SPILL_DIR,
// TMPDIR or /var/tmp) mapped the same way, with its rows' marks; a float64
// .npy is converted into one a block at a time. IDX is in memory.
Matrix load_matrix_streamed(const std::string& path);
// The same without the pass that reads the values to check them finite,
// for a caller that checks the rows it uses (a --pull coordinator that
// seeds from few rows).
Matrix load_matrix_streamed_unchecked(const std::string& path);
// Gives back the pages of rows [begin, end) of a streamed matrix (the
// whole pages inside them); they are read again from the page cache or the
// file when next touched. Nothing for any other matrix.
void release_rows(const Matrix& m, std::int64_t begin, std::int64_t end);

// .npy into memory (float64 converted a block at a time).
Matrix read_npy(const std::string& path);
// .npy in place: float32 in C order is memory-mapped (Matrix::view), no
// copy of the values; float64 (or a misaligned file) is read as read_npy.
Matrix map_npy(const std::string& path);
Matrix read_csv(const std::string& path);
Matrix read_libsvm_dense(const std::string& path);
// Rows [begin, begin + count) alone (count < 0: all), with the file's row
// count in *total and its columns: what a worker holds of a text input.
Matrix read_csv_rows(const std::string& path, std::int64_t begin, std::int64_t count, std::int64_t* total);
Matrix read_libsvm_dense_rows(const std::string& path, std::int64_t begin, std::int64_t count, std::int64_t* total);
Matrix read_idx(const std::string& path);

// Throws InputError naming path, row and column of the first NaN or Inf;
// m's rows are the file's from first_row on.
void check_finite(const Matrix& m, const std::string& path, std::int64_t first_row = 0);

// .npy writers (little-endian, C order).
void write_npy(const std::string& path, const float* data, const std::vector<std::int64_t>& shape);
void write_npy(const std::string& path, const std::int32_t* data, const std::vector<std::int64_t>& shape);
void write_npy(const std::string& path, const std::int64_t* data, const std::vector<std::int64_t>& shape);

// Rows [begin, begin + count) of a 2-D .npy holding rows x cols values into
// out (count x cols floats), reading only their bytes; InputError naming
// the file when it holds another shape.
void read_npy_rows(const std::string& path, std::int64_t rows, std::int64_t cols, std::int64_t begin,
                   std::int64_t count, float* out);
// The same for any format load_matrix reads: .npy reads only the rows'
// bytes; text with the marks of a streamed read of it (Matrix::marks) only
// the lines from the mark before them; other formats are read whole and
// the rows copied out. Rejects NaN and Inf in those rows, naming the
// file's row.
void load_matrix_rows(const std::string& path, std::int64_t rows, std::int64_t cols, std::int64_t begin,
                      std::int64_t count, float* out, const TextMarks* marks = nullptr);

// The same for an input of part files (Matrix::parts): each part's share
// of the rows from that part alone; InputError naming the part when its
// size is not the job's.
void load_parts_rows(const std::vector<InputPart>& parts, std::int64_t cols, std::int64_t begin, std::int64_t count,
                     float* out);

// The same rows as a streamed matrix (Matrix::streamed): read a block at a
// time into a spill file and mapped, so that the caller holds the pages it
// touches, not the rows (a cluster coordinator standing in for a member).
Matrix stream_parts_rows(const std::vector<InputPart>& parts, std::int64_t cols, std::int64_t begin,
                         std::int64_t count);
// Whether path is one CSV or LIBSVM text file (by its first bytes, as
// load_matrix decides); InputError when it cannot be read.
bool text_file(const std::string& path);

// InputError naming the file when its size is not `bytes`, the job's
// (another file at the path, or one changed since the job began).
void check_file_bytes(const std::string& path, std::int64_t bytes);
// InputError naming the file when its size is not the marks' (another
// file at the path, or one changed since the marks were taken).
void check_marked_file(const std::string& path, const TextMarks& marks);
// Rows [begin, begin + count) of a LIBSVM text file whose marks are
// `marks`, as CSR, read from the mark before them alone; InputError when
// the file's size is not the marks' or it ends before them.
LabeledCsr read_libsvm_range(const std::string& path, const TextMarks& marks, std::int64_t begin, std::int64_t count);

// A 1-D float32 .npy (or a 2-D one, flattened), e.g. a gradient tensor.
std::vector<float> read_npy_vector(const std::string& path);

// Bytes from the stream's read position to its end (0 when unknown): what
// a header's sizes are checked against before anything is allocated.
std::int64_t bytes_left(std::istream& in);

// A whole file mapped read-only: its bytes without a copy, and release()
// gives the pages read so far back (they are read again from storage, or
// the page cache, when next touched). The distributed SVM's coordinator
// pushes its training file this way without holding it.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);  // InputError naming the file
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::span<const std::byte> bytes() const;
  void release() const;
  // The pages wholly inside `part` (a span of bytes()).
  void release(std::span<const std::byte> part) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  void* base_ = nullptr;
  std::size_t size_ = 0;
};

// Text part files as the bytes of one file: each part's bytes in order, a
// newline after any part but the last that lacks one, so that no line runs
// from one part into the next (one part: its bytes as they are). What a
// coordinator pushes to members that parse the whole set, written to an
// unlinked file in the spill directory and mapped; InputError naming a
// part whose size is not its file_bytes.
std::unique_ptr<MappedFile> map_joined_text(const std::vector<InputPart>& parts);
// The same bytes read into out, which must be their size: what a --pull
// member of such a job reads itself. InputError naming spec otherwise.
void read_joined_text(const std::vector<InputPart>& parts, std::span<std::byte> out, const std::string& spec);

// A .npy file's header for `shape` and a numpy descr ("<i4", "<f4"): the
// data follow it, 64-byte aligned. Members that write their rows into one
// preallocated file (the cluster's --output-labels) place them after it.
std::string npy_header(const std::vector<std::int64_t>& shape, const char* descr);

// The same, into a stream (for an OutputSet).
void write_npy(std::ostream& out, const float* data, const std::vector<std::int64_t>& shape);
void write_npy(std::ostream& out, const std::int32_t* data, const std::vector<std::int64_t>& shape);
void write_npy(std::ostream& out, const std::int64_t* data, const std::vector<std::int64_t>& shape);

// A command's outputs as a set: add() writes each to `path.tmp.<pid>`;
// commit() renames them all once every one is written, so an error leaves
// none of them, old or new, half replaced (a kill between two renames is a
// window of microseconds, not of a whole write). Temporaries of an
// uncommitted set are removed when it is destroyed, and add() removes the
// stale temporaries of `path` left by processes that no longer exist.
class OutputSet {
 public:
  OutputSet() = default;
  ~OutputSet();
  OutputSet(const OutputSet&) = delete;
  OutputSet& operator=(const OutputSet&) = delete;
  void add(const std::string& path, const std::function<void(std::ostream&)>& fill);
  void commit();

 private:
  std::vector<std::pair<std::string, std::string>> files_;  // final path, temporary
  bool committed_ = false;
};

// One file through an OutputSet.
void atomic_write(const std::string& path, const std::function<void(std::ostream&)>& fill);

}  // namespace accel
