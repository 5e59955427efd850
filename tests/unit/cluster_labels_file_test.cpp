// --output-labels' shared file (labels_file.hpp): created with every label
// -1, written by members at their rows' offsets, checked for rows nobody
// labelled, renamed whole, and removed when the job fails.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <vector>

#include "accel/error.hpp"
#include "accel/io.hpp"
#include "kmeans/labels_file.hpp"

using namespace accel;
using namespace accel::cluster;
namespace fs = std::filesystem;

namespace {

// This process's scratch folder, removed when the tests are done.
struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("accel-labels-" + std::to_string(::getpid()));
  ~Scratch() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
};

fs::path scratch(const char* name) {
  static Scratch s;
  fs::create_directories(s.dir);
  return s.dir / name;
}

// The labels of a committed file, read as numpy would (through its header).
std::vector<std::int32_t> read_labels(const fs::path& p, std::int64_t n) {
  const std::string header = npy_header({n}, "<i4");
  EXPECT_EQ(fs::file_size(p), header.size() + n * 4);
  std::ifstream in(p, std::ios::binary);
  std::string got(header.size(), '\0');
  in.read(got.data(), static_cast<std::streamsize>(got.size()));
  EXPECT_EQ(got, header);
  std::vector<std::int32_t> l(static_cast<std::size_t>(n));
  in.read(reinterpret_cast<char*>(l.data()), n * 4);
  return l;
}

}  // namespace

TEST(ClusterLabelsFile, MembersWriteTheirRowsAndTheFileIsCommittedWhole) {
  const fs::path out = scratch("whole.npy");
  const std::int64_t n = 300000;  // more than one block of the -1 fill and the check
  LabelsFile file(out.string(), n, false);
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(file.unlabelled(), n);
  LabelsWriter a(file.partial(), n), b(file.partial(), n);
  std::vector<std::int32_t> first(100000, 7), rest(n - 100000, 3);
  b.write(100000, rest);
  a.write(0, first);
  a.sync();
  b.sync();
  EXPECT_EQ(file.unlabelled(), 0);
  file.commit();
  EXPECT_FALSE(fs::exists(file.partial()));
  const auto l = read_labels(out, n);
  EXPECT_EQ(l[0], 7);
  EXPECT_EQ(l[99999], 7);
  EXPECT_EQ(l[100000], 3);
  EXPECT_EQ(l[n - 1], 3);
}

TEST(ClusterLabelsFile, RowsNobodyLabelledAreCountedAndAFailedJobLeavesNothing) {
  const fs::path out = scratch("failed.npy");
  std::string partial;
  {
    LabelsFile file(out.string(), 1000, false);
    partial = file.partial();
    LabelsWriter w(partial, 1000);
    w.write(10, std::vector<std::int32_t>(990, 1));
    EXPECT_EQ(file.unlabelled(), 10);
  }  // never committed
  EXPECT_FALSE(fs::exists(partial));
  EXPECT_FALSE(fs::exists(out));
}

TEST(ClusterLabelsFile, AResumedCoordinatorKeepsWhatMembersWrote) {
  const fs::path out = scratch("resumed.npy");
  auto file = std::make_unique<LabelsFile>(out.string(), 100, false);
  LabelsWriter(file->partial(), 100).write(0, std::vector<std::int32_t>(50, 2));
  // The coordinator dies (its file object is not destroyed); a resumed one
  // keeps the partial file, a fresh one starts it again.
  const std::string partial = file->partial();
  fs::copy_file(partial, partial + ".saved");
  file.reset();
  fs::rename(partial + ".saved", partial);
  fs::copy_file(partial, partial + ".saved");
  {
    LabelsFile resumed(out.string(), 100, true);
    EXPECT_EQ(resumed.unlabelled(), 50);
  }
  fs::rename(partial + ".saved", partial);
  LabelsFile fresh(out.string(), 100, false);
  EXPECT_EQ(fresh.unlabelled(), 100);
}

TEST(ClusterLabelsFile, AMemberRefusesAMissingOrForeignFile) {
  const fs::path out = scratch("refused.npy");
  try {
    LabelsWriter w((out.string() + ".partial"), 10);
    FAIL() << "opened a file that does not exist";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("refused.npy.partial"), std::string::npos) << e.what();
  }
  LabelsFile file(out.string(), 10, false);
  EXPECT_THROW(LabelsWriter(file.partial(), 11), InputError);
}
