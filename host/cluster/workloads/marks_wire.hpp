// A text input's marks (accel/io.hpp's TextMarks) in a task's parameters:
// a --pull member seeks to the mark before its rows and reads those lines
// alone. Shared by the workloads that read text inputs.
#pragma once

#include <string>

#include "accel/error.hpp"
#include "accel/io.hpp"
#include "codec.hpp"

namespace accel::cluster {

inline void put_marks(Out& o, const TextMarks& m) {
  o.put(m.file_bytes);
  o.array(m.offset);
  o.array(m.line);
}

// Offsets and lines strictly increasing, inside the file; `what` names the
// task in the error.
inline TextMarks get_marks(In& i, const std::string& what) {
  TextMarks m;
  m.file_bytes = i.get<std::int64_t>();
  constexpr std::uint64_t kMaxMarks = (std::uint64_t{1} << 40) / TextMarks::kStride;
  m.offset = i.array<std::int64_t>(kMaxMarks);
  m.line = i.exactly<std::int64_t>(m.offset.size(), "text marks");
  for (std::size_t k = 0; k < m.offset.size(); ++k)
    if (m.offset[k] < 0 || m.offset[k] > m.file_bytes || m.line[k] < 0 ||
        (k > 0 && (m.offset[k] <= m.offset[k - 1] || m.line[k] <= m.line[k - 1])))
      throw InputError(what + " with impossible text marks");
  return m;
}

}  // namespace accel::cluster
