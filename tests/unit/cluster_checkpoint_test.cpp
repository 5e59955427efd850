// The coordinator's checkpoint on disk: what is written reads back exactly,
// only its owner can read it (it holds the job token), a damaged or foreign
// file is refused with a reason, and the interval follows Young's formula.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <tuple>

#include "accel/error.hpp"
#include "checkpoint.hpp"
#include "svm/svm_wire.hpp"

namespace fs = std::filesystem;
using namespace accel::cluster;

namespace {

Checkpoint sample() {
  Checkpoint c;
  c.job = 0x1234abcd5678ull;
  c.workload = "kmeans";
  c.units = 1000;
  c.workers = 3;
  c.listen = "127.0.0.1:4567";
  c.job_file = "/root/.accel/job-4567.token";
  c.input_fingerprint = 99;
  c.options = {{"--k", "8"}, {"--seed", "3"}};
  c.params = {std::byte{1}, std::byte{2}, std::byte{3}};
  c.round = 17;
  c.state.resize(4096);
  for (std::size_t i = 0; i < c.state.size(); ++i) c.state[i] = static_cast<std::byte>(i * 13);
  c.job_state = {std::byte{7}, std::byte{8}, std::byte{9}};
  c.begin = {0, 300, 550, 800};
  c.loads = {300, 250, 250, 200};
  c.members = {{0, 1, 3}, {2}, {}};
  c.all_lost_at = 0;
  return c;
}

class CheckpointFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("accel-ckpt-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    path_ = checkpoint_path(dir_.string());
  }
  void TearDown() override { fs::remove_all(dir_); }
  void flip(std::uintmax_t offset) {
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    char b = 0;
    f.read(&b, 1);
    f.seekp(static_cast<std::streamoff>(offset));
    b ^= 0x10;
    f.write(&b, 1);
  }
  fs::path dir_;
  std::string path_;
};

TEST_F(CheckpointFile, RoundTripsExactly) {
  const Checkpoint c = sample();
  save_checkpoint(path_, c);
  EXPECT_EQ(load_checkpoint(path_), c);
  // No temporary file is left beside it.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(CheckpointFile, OnlyItsOwnerMayReadIt) {
  save_checkpoint(path_, sample());
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(CheckpointFile, ANewOneReplacesTheOld) {
  Checkpoint c = sample();
  save_checkpoint(path_, c);
  c.round = 18;
  c.state[7] = std::byte{0xff};
  save_checkpoint(path_, c);
  EXPECT_EQ(load_checkpoint(path_), c);
}

TEST_F(CheckpointFile, AFlippedBitAnywhereIsRefused) {
  save_checkpoint(path_, sample());
  const auto size = fs::file_size(path_);
  for (std::uintmax_t off : {std::uintmax_t{3}, std::uintmax_t{9}, std::uintmax_t{17}, std::uintmax_t{40}, size / 2,
                             size - 1}) {
    save_checkpoint(path_, sample());
    flip(off);
    EXPECT_THROW(load_checkpoint(path_), accel::InputError) << "offset " << off;
  }
}

TEST_F(CheckpointFile, TruncatedOrMissingIsRefused) {
  EXPECT_THROW(load_checkpoint(path_), accel::InputError);
  save_checkpoint(path_, sample());
  fs::resize_file(path_, fs::file_size(path_) - 5);
  try {
    load_checkpoint(path_);
    FAIL() << "a truncated checkpoint was accepted";
  } catch (const accel::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("damaged checkpoint"), std::string::npos) << e.what();
  }
}

TEST_F(CheckpointFile, AnInconsistentPartitionMapIsRefused) {
  Checkpoint c = sample();
  c.loads[2] += 1;  // rows no longer add up to units
  save_checkpoint(path_, c);
  EXPECT_THROW(load_checkpoint(path_), accel::InputError);
  c = sample();
  c.begin.pop_back();  // one entry short for 3 workers
  save_checkpoint(path_, c);
  EXPECT_THROW(load_checkpoint(path_), accel::InputError);
}

TEST_F(CheckpointFile, AnUnwritableDirectoryIsAnError) {
  EXPECT_THROW(save_checkpoint((dir_ / "missing" / "coordinator.checkpoint").string(), sample()), accel::InputError);
}

// A small tmpfs over dir (read-only, or of `bytes`): a checkpoint
// directory that is full or read-only even to root, which file modes are
// not. Empty when this process may not mount (no CAP_SYS_ADMIN): the tests
// then skip, saying so.
std::string mount_tmpfs(const fs::path& dir, const std::string& options, unsigned long flags = 0) {
  fs::create_directories(dir);
  if (::mount("tmpfs", dir.c_str(), "tmpfs", flags, options.c_str()) != 0)
    return std::string("cannot mount a tmpfs here: ") + std::strerror(errno);
  return {};
}

TEST_F(CheckpointFile, AReadOnlyDirectoryIsAnErrorNamingIt) {
  const fs::path ro = dir_ / "ro";
  if (const auto why = mount_tmpfs(ro, "size=64k", MS_RDONLY); !why.empty()) GTEST_SKIP() << why;
  try {
    save_checkpoint(checkpoint_path(ro.string()), sample());
    ADD_FAILURE() << "no error";
  } catch (const accel::InputError& e) {
    EXPECT_NE(std::string(e.what()).find(ro.string()), std::string::npos) << e.what();
  }
  ::umount(ro.c_str());
}

TEST_F(CheckpointFile, AFullDirectoryIsAnErrorAndLeavesTheOldOne) {
  const fs::path full = dir_ / "full";
  if (const auto why = mount_tmpfs(full, "size=16k"); !why.empty()) GTEST_SKIP() << why;
  Checkpoint small = sample();
  small.state.resize(16);
  save_checkpoint(checkpoint_path(full.string()), small);
  Checkpoint big = sample();
  big.state.assign(64 << 10, std::byte{5});  // more than the tmpfs holds
  EXPECT_THROW(save_checkpoint(checkpoint_path(full.string()), big), accel::InputError);
  EXPECT_EQ(load_checkpoint(checkpoint_path(full.string())), small);  // the old one, whole
  for (const auto& e : fs::directory_iterator(full))  // no temporary left behind
    EXPECT_EQ(e.path().filename().string(), "coordinator.checkpoint");
  ::umount(full.c_str());
}

TEST(YoungInterval, IsTheSquareRootOfTwiceCostTimesMtbf) {
  EXPECT_DOUBLE_EQ(young_interval(0.002, 3600), std::sqrt(2 * 0.002 * 3600));
  EXPECT_DOUBLE_EQ(young_interval(0.5, 0.25), 0.5);
  EXPECT_DOUBLE_EQ(young_interval(0, 3600, 0.1), 0.1);  // the floor
  EXPECT_GT(young_interval(0.01, 3600), young_interval(0.001, 3600));
}

TEST(CheckpointFingerprint, SeesSizeHeadAndTail) {
  std::vector<std::byte> a(3 << 20, std::byte{1});
  const auto base = checkpoint_fingerprint(a);
  auto b = a;
  b.front() = std::byte{2};
  EXPECT_NE(checkpoint_fingerprint(b), base);
  b = a;
  b.back() = std::byte{2};
  EXPECT_NE(checkpoint_fingerprint(b), base);
  b = a;
  b.pop_back();
  EXPECT_NE(checkpoint_fingerprint(b), base);
  EXPECT_EQ(checkpoint_fingerprint(a), base);
}

// Issue 34: rows changed in the middle of an input (same size) had been
// invisible to a fingerprint of the first and last MiB, and the resume
// went on with the checkpoint's state on the changed rows.
TEST(CheckpointFingerprint, SeesTheMiddleOfTheInput) {
  std::vector<std::byte> a(3 << 20, std::byte{1});
  const auto base = checkpoint_fingerprint(a);
  auto b = a;
  b[(3 << 20) / 2] = std::byte{2};
  EXPECT_NE(checkpoint_fingerprint(b), base);
}

// Past 256 MiB, sampled blocks: a change inside one of them is seen. The
// input is anonymous memory (zero pages until written), so the test costs
// the pages it touches, not 256 MiB (sanitizer builds run it too).
TEST(CheckpointFingerprint, PastItsWholeSizeSamplesBlocks) {
  const std::size_t size = (std::size_t{256} << 20) + 4096;
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  const std::span<std::byte> a(static_cast<std::byte*>(p), size);
  const auto base = checkpoint_fingerprint(a);
  const std::size_t pitch = (size - (64 << 10)) / 4095;
  a[1000 * pitch + 5] = std::byte{8};  // inside the 1000th sampled block
  EXPECT_NE(checkpoint_fingerprint(a), base);
  a[1000 * pitch + 5] = std::byte{0};
  EXPECT_EQ(checkpoint_fingerprint(a), base);
  a[size - 1] = std::byte{8};
  EXPECT_NE(checkpoint_fingerprint(a), base);
  ::munmap(p, size);
}

}  // namespace

// Sharded SVM rounds carry rows: a decision's and a report's come back
// exactly, and rows that are not CSR as the solver keeps it (columns out
// of order or past the width, offsets that do not add up, a value that is
// not finite) are refused.
TEST(SvmWireRows, RoundTripAndRefusal) {
  accel::svm_parallel::Op op;
  op.kind = accel::svm_parallel::Op::Supply;
  op.want = {4, 9};
  op.rows.vars = {2, 7};
  op.rows.x.add_row({{0, 1.5f}, {3, -2.0f}});
  op.rows.x.add_row({{1, 0.25f}});
  op.rows.x.cols = 5;
  const auto d = svm_wire::decode_decision(svm_wire::encode_decision({false, {op}}), 10);
  ASSERT_EQ(d.ops.size(), 1u);
  EXPECT_EQ(d.ops[0].want, op.want);
  EXPECT_EQ(d.ops[0].rows.vars, op.rows.vars);
  EXPECT_EQ(d.ops[0].rows.x.row_ptr, op.rows.x.row_ptr);
  EXPECT_EQ(d.ops[0].rows.x.col_idx, op.rows.x.col_idx);
  EXPECT_EQ(d.ops[0].rows.x.values, op.rows.x.values);
  accel::svm_parallel::Report r;
  r.rows = op.rows;
  r.need = {3};
  const auto back = svm_wire::decode_report(svm_wire::encode_report(r), 10);
  EXPECT_EQ(back.need, r.need);
  EXPECT_EQ(back.rows.x.values, r.rows.x.values);
  const auto refused = [](accel::svm_parallel::Op bad) {
    return svm_wire::decode_decision(svm_wire::encode_decision({false, {bad}}), 10);
  };
  auto bad = op;
  std::swap(bad.rows.x.col_idx[0], bad.rows.x.col_idx[1]);
  EXPECT_THROW(refused(bad), accel::InputError) << "columns out of order";
  bad = op;
  bad.rows.x.cols = 2;
  EXPECT_THROW(refused(bad), accel::InputError) << "a column past the width";
  bad = op;
  bad.rows.x.row_ptr[1] = 3;
  EXPECT_THROW(refused(bad), accel::InputError) << "offsets that do not add up";
  bad = op;
  bad.rows.x.values[2] = std::nanf("");
  EXPECT_THROW(refused(bad), accel::InputError) << "a value that is not finite";
  bad = op;
  bad.rows.vars[1] = 10;
  EXPECT_THROW(refused(bad), accel::InputError) << "a variable past the problem";
}

// A task's training files (one file, or part files) come back with their
// rows, sizes and marks; a part with negative rows, or marks out of order,
// is refused.
TEST(SvmWireParams, PartsRoundTripAndRefusal) {
  svm_wire::TaskParams t;
  t.sharded = true;
  t.cols = 7;
  t.parts = {{"/d/part-0", 5000, 900, {}}, {"/d/part-1", 0, 0, {}}, {"/d/part-2", 3, 40, {}}};
  t.parts[0].marks = {900, {0, 700}, {0, 4096}};
  t.parts[2].marks = {40, {0}, {2}};
  const auto back = svm_wire::decode_params(svm_wire::encode_params(t));
  ASSERT_EQ(back.parts.size(), 3u);
  for (std::size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(back.parts[k].path, t.parts[k].path);
    EXPECT_EQ(back.parts[k].rows, t.parts[k].rows);
    EXPECT_EQ(back.parts[k].file_bytes, t.parts[k].file_bytes);
    EXPECT_EQ(back.parts[k].marks.offset, t.parts[k].marks.offset);
    EXPECT_EQ(back.parts[k].marks.line, t.parts[k].marks.line);
  }
  auto bad = t;
  bad.parts[1].rows = -1;
  EXPECT_THROW(svm_wire::decode_params(svm_wire::encode_params(bad)), accel::InputError);
  bad = t;
  bad.parts[0].marks.offset = {700, 0};
  EXPECT_THROW(svm_wire::decode_params(svm_wire::encode_params(bad)), accel::InputError);
  bad = t;
  bad.parts.clear();
  EXPECT_THROW(svm_wire::decode_params(svm_wire::encode_params(bad)), accel::InputError) << "no training file";
}

// The distributed SVM's part of a checkpoint: every solved problem's
// multipliers and statistics come back exactly; bytes that are not a
// solution list are refused.
TEST(SvmSolved, RoundTripsExactly) {
  std::vector<accel::BinarySolution> solved(2);
  solved[0].alpha = {0, 0.5, 1, 0.25};
  solved[0].stats.class_a = 3, solved[0].stats.class_b = -1, solved[0].stats.iterations = 1234;
  solved[0].stats.obj = -17.5, solved[0].stats.rho = 0.125, solved[0].stats.shrink = "multi2";
  solved[0].stats.kernel_values = std::int64_t{1} << 40;
  solved[1].alpha = {1e-300, 2};
  solved[1].stats.reconstructions = 4, solved[1].stats.r = 0.5;
  const auto back = svm_wire::decode_solved(svm_wire::encode_solved(solved), 8);
  ASSERT_EQ(back.size(), 2u);
  for (std::size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(back[k].alpha, solved[k].alpha);
    const auto &a = back[k].stats, &b = solved[k].stats;
    EXPECT_EQ(std::tie(a.class_a, a.class_b, a.iterations, a.kernel_values, a.reconstructions, a.shrink),
              std::tie(b.class_a, b.class_b, b.iterations, b.kernel_values, b.reconstructions, b.shrink));
    EXPECT_EQ(std::tie(a.obj, a.rho, a.r), std::tie(b.obj, b.rho, b.r));
  }
  EXPECT_TRUE(svm_wire::decode_solved(svm_wire::encode_solved({}), 8).empty());
}

TEST(SvmSolved, ForeignBytesAreRefused) {
  std::vector<accel::BinarySolution> solved(1);
  solved[0].alpha = {0, 1, 2};
  const auto good = svm_wire::encode_solved(solved);
  EXPECT_THROW(svm_wire::decode_solved(good, 2), accel::InputError);  // more multipliers than the set has
  auto truncated = good;
  truncated.pop_back();
  EXPECT_THROW(svm_wire::decode_solved(truncated, 8), accel::InputError);
  solved[0].alpha[1] = std::nan("");
  EXPECT_THROW(svm_wire::decode_solved(svm_wire::encode_solved(solved), 8), accel::InputError);
}
