// A text input's marks (accel/io.hpp's TextMarks) and an input's part
// files in a task's parameters: a --pull member seeks to the mark before
// its rows and reads those lines alone, from the parts that hold them.
// Shared by the workloads that read text inputs.
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

// An input of part files (Matrix::parts): each part's path, rows and marks.
inline void put_parts(Out& o, const std::vector<InputPart>& parts) {
  o.put<std::uint64_t>(parts.size());
  for (const auto& p : parts) {
    o.text(p.path);
    o.put(p.rows);
    o.put(p.file_bytes);
    put_marks(o, p.marks);
    o.put(p.first_byte);
    o.put(p.stop_byte);
    o.put(p.sample);
  }
}

inline std::vector<InputPart> get_parts(In& i, const std::string& what) {
  const auto n = i.get<std::uint64_t>();
  if (n > (std::uint64_t{1} << 20)) throw InputError(what + " with " + std::to_string(n) + " part files");
  std::vector<InputPart> parts(static_cast<std::size_t>(n));
  for (auto& p : parts) {
    p.path = i.text(4096);
    p.rows = i.get<std::int64_t>();
    p.file_bytes = i.get<std::int64_t>();
    if (p.path.empty() || p.rows < 0 || p.file_bytes < 0) throw InputError(what + " with an impossible part file");
    p.marks = get_marks(i, what);
    p.first_byte = i.get<std::int64_t>();
    p.stop_byte = i.get<std::int64_t>();
    p.sample = i.get<std::uint32_t>();
    if (p.first_byte < 0 || p.stop_byte < p.first_byte || p.stop_byte > p.file_bytes)
      throw InputError(what + " with an impossible split of " + p.path);
  }
  return parts;
}

}  // namespace accel::cluster
