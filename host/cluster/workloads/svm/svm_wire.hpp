// The distributed SVM's bytes: the training set as pushed to every member,
// the parameters members need, the coordinator's decisions, the members'
// reports, and the shared state a returning member adopts. Every decoder
// bounds what it reads by the training set's size and throws InputError.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "accel/io.hpp"
#include "accel/svm_parallel.hpp"
#include "codec.hpp"

namespace accel::cluster::svm_wire {

using svm_parallel::Op;
using svm_parallel::Report;

// What a member needs: the kernel and the cache budget for its kernel
// rows; sharded (--pull), the training file's marks and width, from which
// it reads the rows it owns.
struct TaskParams {
  SvmParams params;
  bool sharded = false;
  // The training file, or its part files: each one's path, rows, size and
  // marks (members that read their own rows, or the whole file).
  std::vector<InputPart> parts;
  std::int64_t cols = 0;
};
Bytes encode_params(const TaskParams& p);
TaskParams decode_params(std::span<const std::byte> in);

// A decision: the ops, or the end of training.
struct Decision {
  bool end = false;
  std::vector<Op> ops;
};
Bytes encode_decision(const Decision& d);
// max_vars bounds every count (two variables per row for SVR).
Decision decode_decision(std::span<const std::byte> in, std::int64_t max_vars);

Bytes encode_report(const Report& r);
Report decode_report(std::span<const std::byte> in, std::int64_t max_vars);

// The problem being solved (its Start op, owners current) and every
// multiplier: what a returning member starts again from.
struct Shared {
  std::optional<Op> start;
  std::vector<double> alpha;
};
Bytes encode_shared(const Shared& s);
Shared decode_shared(std::span<const std::byte> in, std::int64_t max_vars);

// The coordinator's own part of a checkpoint (Job::saved): every dual
// problem solved so far, in the order svm_train solved them.
Bytes encode_solved(const std::vector<BinarySolution>& solved);
std::vector<BinarySolution> decode_solved(std::span<const std::byte> in, std::int64_t max_vars);

}  // namespace accel::cluster::svm_wire
