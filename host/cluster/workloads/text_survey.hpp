// A text input counted by the members (Job::survey): launch worker j of N
// counts byte split j of the file ([size (j-1)/N, size j/N), Hadoop's
// input splits: the lines that start in it), and the coordinator learns
// each split's rows and marks, never its rows. The splits then are the
// input's parts (accel/io.hpp's InputPart): rows numbered in file order,
// lines the file's, each split's bytes sampled so a reader knows it reads
// the job's file. Shared by the workloads that read text inputs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "accel/io.hpp"
#include "codec.hpp"

namespace accel::cluster {

// Member j's request, of N (path absolute).
Bytes text_split_request(const std::string& path, std::int64_t file_bytes, std::uint32_t member, int members);
// A member's answer (Workload::survey): its split counted.
Bytes count_requested_split(std::span<const std::byte> request);

struct SurveyedText {
  std::vector<InputPart> parts;  // one per split, in file order
  std::int64_t rows = 0, cols = 0;
};
// The splits from the members' answers; one missing is counted here (a
// resumed coordinator counts them all, the same splits). InputError naming
// the member whose answer does not fit its neighbours', or the file when
// it holds no data rows.
SurveyedText surveyed_text(const std::string& path, std::int64_t file_bytes, int members,
                           const std::map<std::uint32_t, Bytes>& answers);

}  // namespace accel::cluster
