// A member's task on disk, so a restarted worker resumes ([Antimatroid];
// [GraphLab12]). Written to a temporary file, fsynced, renamed: a crash leaves
// the old snapshot or the new one. Layout: magic, job, id, incarnation, task,
// data length (0: the data is not in the file), crc32 of everything before
// it and crc32 of the data, zeros up to a multiple of 4096 bytes, the data.
// A file whose checksums disagree is refused: a flipped bit in the rows
// would otherwise enter every later round unnoticed.
//
// By default the data stays out of the file: a resume needs the coordinator
// alive anyway (it confirms the task and the current iteration), and the
// coordinator holds every row for the whole job, so the resuming worker asks
// it for its partition again, as Spark recomputes a lost cached partition
// from its source. Writing the rows here would cost a short job a sizeable
// share of its time (the disk's emulation competes with the computing
// cores), for a file that a job without failures never reads.
// --snapshot-rows keeps them in the file, for a resume that must not
// depend on the network.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "protocol.hpp"

namespace accel::cluster {

// Rows live in page-aligned memory that resize() leaves uninitialised:
// aligned so the snapshot can write them with O_DIRECT (no copy through the
// page cache on the worker's busy core), uninitialised because they are
// written at once by the receive or the read (zeroing them first would
// add a pass over every row to every job's start).
template <class T>
struct RowAllocator {
  using value_type = T;
  static constexpr std::size_t kAlign = 4096;
  RowAllocator() = default;
  template <class U>
  RowAllocator(const RowAllocator<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kAlign))); }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t(kAlign)); }
  template <class U>
  void construct(U* p) {
    ::new (static_cast<void*>(p)) U;  // default-initialised: no store
  }
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
  template <class U>
  bool operator==(const RowAllocator<U>&) const {
    return true;
  }
};
// A partition's data in the workload's layout (k-means: float rows).
using Blob = std::vector<std::byte, RowAllocator<std::byte>>;

struct Snapshot {
  std::uint64_t job = 0;
  std::uint32_t id = 0;
  std::uint32_t incarnation = 0;
  Task task;
  Blob data;  // task.data_bytes
};

std::string snapshot_path(const std::string& dir, std::uint32_t id);
// with_data: write s.data too (else the file records none).
void save_snapshot(const std::string& path, const Snapshot& s, bool with_data);
// nullopt when there is none; throws InputError for a damaged one.
std::optional<Snapshot> load_snapshot(const std::string& path);

}  // namespace accel::cluster
