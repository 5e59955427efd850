// --output-labels across nodes: one preallocated int32 .npy that every
// member writes its own rows' labels into, in parallel, at their global
// row ids (Hadoop's output committer in miniature). The coordinator
// creates `FILE.partial` with the header and every label -1 before round 1,
// checks at the end that no -1 is left (a row nobody labelled is an error,
// not a silent 0), and renames it over FILE; a job that fails removes it.
// Members open it for writing only: it lives on storage they share.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace accel::cluster {

// The coordinator's half.
class LabelsFile {
 public:
  // Creates path.partial for `rows` labels, all -1. keep: a coordinator
  // resumed from a checkpoint keeps a partial file of the right size (the
  // members may have written into it before the restart).
  LabelsFile(std::string path, std::int64_t rows, bool keep);
  ~LabelsFile();
  LabelsFile(const LabelsFile&) = delete;
  LabelsFile& operator=(const LabelsFile&) = delete;
  static std::string partial_of(const std::string& path) { return path + ".partial"; }
  const std::string& partial() const { return partial_; }
  // Labels still -1, read back a block at a time.
  std::int64_t unlabelled() const;
  void commit();

 private:
  std::string path_, partial_;
  std::int64_t rows_;
  bool committed_ = false;
};

// A member's half: labels of rows [begin, begin + n) of a `units`-row file.
class LabelsWriter {
 public:
  // Throws InputError naming the file when it cannot be opened for writing.
  LabelsWriter(std::string partial, std::int64_t units);
  ~LabelsWriter();
  LabelsWriter(const LabelsWriter&) = delete;
  LabelsWriter& operator=(const LabelsWriter&) = delete;
  void write(std::int64_t begin, std::span<const std::int32_t> labels);
  // On storage before the member says it wrote them.
  void sync();

 private:
  std::string partial_;
  std::int64_t units_, offset_;
  int fd_ = -1;
};

}  // namespace accel::cluster
