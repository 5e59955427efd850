// The worker's snapshot on disk: what is written reads back exactly (rows
// through O_DIRECT where the file system takes it, plain writes where not;
// or no rows at all, the default), and a damaged file is refused with a
// reason instead of trusted.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "accel/error.hpp"
#include "snapshot.hpp"

namespace fs = std::filesystem;
using namespace accel::cluster;

namespace {

Snapshot sample(std::int64_t rows, std::int64_t d) {
  Snapshot s;
  s.job = 77;
  s.id = 3;
  s.incarnation = 2;
  s.task.workload = "kmeans";
  s.task.self = 3;
  s.task.input = "/data/x.npy";
  s.task.peers = {{0, {std::byte{1}, std::byte{2}}}, {5, {std::byte{9}}}};
  s.task.units = rows * 4;
  s.task.begin = rows;
  s.task.rows = rows;
  s.task.max_rounds = 40;
  s.task.data_bytes = rows * d * sizeof(float);
  s.task.params.resize(5 * d * sizeof(float));
  for (std::size_t i = 0; i < s.task.params.size(); ++i) s.task.params[i] = static_cast<std::byte>(i * 7);
  s.data.resize(s.task.data_bytes);
  auto* f = reinterpret_cast<float*>(s.data.data());
  for (std::int64_t i = 0; i < rows * d; ++i) f[i] = static_cast<float>(i) * 0.5f - 3.0f;
  return s;
}

void expect_same(const Snapshot& a, const Snapshot& b) {
  EXPECT_EQ(a.job, b.job);
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.incarnation, b.incarnation);
  EXPECT_TRUE(a.task == b.task) << "a field of the task did not survive the snapshot";
  ASSERT_EQ(a.data.size(), b.data.size());
  EXPECT_TRUE(std::equal(a.data.begin(), a.data.end(), b.data.begin()));
}

class SnapshotFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("accel-snapshot-test-" + std::to_string(::getpid()));
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  fs::path dir;
};

}  // namespace

TEST_F(SnapshotFile, RoundTripsWholePagesAndAPartialOne) {
  // 3001 x 7 floats: 20 whole pages of rows and a partial last one.
  const Snapshot s = sample(3001, 7);
  const std::string path = snapshot_path(dir.string(), s.id);
  save_snapshot(path, s, true);
  const auto back = load_snapshot(path);
  ASSERT_TRUE(back.has_value());
  expect_same(s, *back);
  EXPECT_EQ(fs::file_size(path) % 4096, (3001u * 7 * 4) % 4096) << "the rows start on a page";
}

TEST_F(SnapshotFile, RoundTripsOnTmpfsWhereODirectIsRefused) {
  if (!fs::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm (tmpfs) on this machine";
  const fs::path shm = fs::path("/dev/shm") / ("accel-snapshot-test-" + std::to_string(::getpid()));
  fs::create_directories(shm);
  const Snapshot s = sample(1024, 16);
  const std::string path = snapshot_path(shm.string(), s.id);
  save_snapshot(path, s, true);
  const auto back = load_snapshot(path);
  fs::remove_all(shm);
  ASSERT_TRUE(back.has_value());
  expect_same(s, *back);
}

TEST_F(SnapshotFile, WithoutRowsKeepsTheTaskOnly) {
  // The default (snapshot.hpp): the rows come back from the coordinator.
  const Snapshot s = sample(3001, 7);
  const std::string path = snapshot_path(dir.string(), s.id);
  save_snapshot(path, s, false);
  EXPECT_LT(fs::file_size(path), 8192u) << "no rows in the file";
  const auto back = load_snapshot(path);
  ASSERT_TRUE(back.has_value());
  Snapshot want = s;
  want.data.clear();
  expect_same(want, *back);
  { std::ofstream(path, std::ios::app) << "x"; }
  EXPECT_THROW(load_snapshot(path), accel::InputError) << "a trailing byte after a task-only snapshot";
}

TEST_F(SnapshotFile, MissingIsNoSnapshot) {
  EXPECT_FALSE(load_snapshot((dir / "none.snapshot").string()).has_value());
}

TEST_F(SnapshotFile, DamagedFilesAreRefused) {
  const Snapshot s = sample(100, 3);
  const std::string path = snapshot_path(dir.string(), s.id);
  save_snapshot(path, s, true);
  const auto size = fs::file_size(path);
  auto expect_refused = [&](const std::string& why) {
    try {
      load_snapshot(path);
      ADD_FAILURE() << "a damaged snapshot was accepted (" << why << ")";
    } catch (const accel::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  };
  fs::resize_file(path, size - 4);
  expect_refused("last row cut short");
  fs::resize_file(path, 100);
  expect_refused("cut inside the task");
  save_snapshot(path, s, true);
  { std::ofstream(path, std::ios::app) << "x"; }
  expect_refused("a trailing byte");
  save_snapshot(path, s, true);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(7);
    f.put('9');
  }
  expect_refused("wrong magic");
}

TEST_F(SnapshotFile, AFlippedValueIsRefusedByItsChecksum) {
  // A float of the rows set to 1e30 (issue 17's silent corruption): the data
  // checksum refuses it; a byte of the task: the header checksum does.
  const Snapshot s = sample(100, 3);
  const std::string path = snapshot_path(dir.string(), s.id);
  auto flip_at = [&](std::uint64_t offset, float value) {
    save_snapshot(path, s, true);
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(reinterpret_cast<const char*>(&value), sizeof value);
  };
  save_snapshot(path, s, true);
  const std::uint64_t data_at = fs::file_size(path) - s.data.size();
  flip_at(data_at + 40, 1e30f);
  try {
    load_snapshot(path);
    ADD_FAILURE() << "a snapshot with a changed row was accepted";
  } catch (const accel::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("data checksum"), std::string::npos) << e.what();
  }
  flip_at(60, 1e30f);
  try {
    load_snapshot(path);
    ADD_FAILURE() << "a snapshot with a changed task was accepted";
  } catch (const accel::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
  }
}
