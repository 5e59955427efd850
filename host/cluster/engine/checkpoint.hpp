// The coordinator's checkpoint, so that a coordinator killed mid-job is
// restarted with `accel coordinator --resume DIR` and the job goes on
// ([GraphLab12] checkpoints the whole
// state of a distributed job so a failure costs the work since the last one).
//
// What the coordinator alone knows: the job token, the round it completed,
// the shared state after it (k-means: the centroids; SVM: the current dual
// problem and its multipliers), the job's own state (SVM: the dual problems
// already solved), the partition map and the membership. The workers keep
// their tasks and rows in memory (and in their snapshots); after a resume
// each rejoins as a returning member, takes the checkpoint's state and
// recomputes from the round after it. k-means: the job's result is the
// failure-free one. SVM: the problem in progress starts again from the
// checkpoint's multipliers (a warm start), so its solution is the
// failure-free one within the solver's stopping tolerance, not bit for bit.
//
// How often: Young's interval, sqrt(2 * C * MTBF) (J. W. Young, "A first
// order approximation to the optimum checkpoint interval", CACM 1974), with
// C the measured cost of the last checkpoint and MTBF the operator's
// estimate (--mtbf). The first checkpoint is written before round 1, so a
// resume is possible from the start.
//
// On disk: magic, payload length, crc32 of the payload, payload. Written to
// a temporary file with mode 0600 (it holds the job token), fsynced,
// renamed: a crash leaves the old checkpoint or the new one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codec.hpp"
#include "protocol.hpp"

namespace accel::cluster {

struct Checkpoint {
  std::uint64_t job = 0;
  std::string workload;
  std::int64_t units = 0;
  std::uint32_t workers = 0;
  std::string listen;    // the address workers know, ADDR:PORT as bound
  std::string job_file;  // where the drawn token was written (empty: given by the operator)
  std::uint64_t input_fingerprint = 0;  // of the job's data (checkpoint_fingerprint)
  std::vector<std::pair<std::string, std::string>> options;  // Job::result_options()
  Bytes params;                          // every task's parameters, as first sent
  std::int64_t round = 0;                // rounds completed; the state is after it
  Bytes state;                           // the coordinator partition's shared_state()
  Bytes job_state;                       // the job's own (Job::saved(); SVM: the problems solved)
  std::vector<std::int64_t> begin, loads;
  Membership members;
  std::int64_t all_lost_at = 0;
  bool operator==(const Checkpoint&) const = default;
};

std::string checkpoint_path(const std::string& dir);
// Throws InputError when the file cannot be written.
void save_checkpoint(const std::string& path, const Checkpoint& c);
// Throws InputError for a missing, foreign or damaged file.
Checkpoint load_checkpoint(const std::string& path);

// Young's interval in seconds for a checkpoint costing `cost_s`, at least
// `floor_s`.
double young_interval(double cost_s, double mtbf_s, double floor_s = 0);

// A fingerprint of a job's input, so that a resume with another input is
// refused rather than mixed: crc32 of every byte up to 256 MiB (a small
// cost beside reading the input); past that, of 4096 blocks of 64 KiB
// spread evenly, the first and the last MiB, and the size. A change
// confined to the bytes between those blocks of an input over 256 MiB
// goes unseen (docs/cluster.md).
std::uint64_t checkpoint_fingerprint(std::span<const std::byte> data);

}  // namespace accel::cluster
