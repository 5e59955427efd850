// A worker's task on disk, so a restarted worker resumes instead of being
// sent its partition again (seeds/000, seeds/002). Written to a temporary
// file, fsynced, renamed: a crash leaves the old snapshot or the new one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "protocol.hpp"

namespace accel::cluster {

struct Snapshot {
  std::uint64_t job = 0;
  std::uint32_t id = 0;
  std::uint32_t incarnation = 0;
  Task task;
  std::vector<float> rows;  // task.rows x task.d
};

std::string snapshot_path(const std::string& dir, std::uint32_t id);
void save_snapshot(const std::string& path, const Snapshot& s);
// nullopt when there is none; throws InputError for a damaged one.
std::optional<Snapshot> load_snapshot(const std::string& path);

}  // namespace accel::cluster
