#include "text_survey.hpp"

#include <filesystem>

#include "accel/error.hpp"
#include "marks_wire.hpp"

namespace accel::cluster {
namespace {

std::int64_t split_at(std::int64_t file_bytes, std::int64_t j, int members) {
  return static_cast<std::int64_t>(static_cast<__int128>(file_bytes) * j / members);
}

Bytes encode(const TextSplit& s) {
  Out o;
  o.put(s.rows);
  o.put(s.lines);
  o.put(s.cols);
  o.put(s.first);
  o.put(s.stop);
  o.put(s.sample);
  put_marks(o, s.marks);
  return std::move(o.b);
}

TextSplit decode(std::span<const std::byte> b, const std::string& what) {
  In i(b);
  TextSplit s;
  s.rows = i.get<std::int64_t>();
  s.lines = i.get<std::int64_t>();
  s.cols = i.get<std::int64_t>();
  s.first = i.get<std::int64_t>();
  s.stop = i.get<std::int64_t>();
  s.sample = i.get<std::uint32_t>();
  s.marks = get_marks(i, what);
  i.end();
  const auto marks = static_cast<std::int64_t>(s.marks.offset.size());
  if (s.rows < 0 || s.lines < s.rows || s.cols < 0 || s.cols > (std::int64_t{1} << 31) || s.first < 0 ||
      s.stop < s.first || marks != (s.rows + TextMarks::kStride - 1) / TextMarks::kStride ||
      (marks > 0 && (s.marks.offset.front() < s.first || s.marks.offset.back() >= s.stop ||
                     s.marks.line.back() >= s.lines)))
    throw InputError(what + " does not add up");
  return s;
}

}  // namespace

Bytes text_split_request(const std::string& path, std::int64_t file_bytes, std::uint32_t member, int members) {
  Out o;
  o.text(path);
  o.put(file_bytes);
  o.put(split_at(file_bytes, member - 1, members));
  o.put(split_at(file_bytes, member, members));
  return std::move(o.b);
}

Bytes count_requested_split(std::span<const std::byte> request) {
  In i(request);
  const std::string path = i.text(4096);
  const auto file_bytes = i.get<std::int64_t>(), begin = i.get<std::int64_t>(), end = i.get<std::int64_t>();
  i.end();
  return encode(count_text_split(path, file_bytes, begin, end));
}

SurveyedText surveyed_text(const std::string& path, std::int64_t file_bytes, int members,
                           const std::map<std::uint32_t, Bytes>& answers) {
  SurveyedText out;
  std::int64_t lines = 0, expect_first = 0;
  for (int j = 1; j <= members; ++j) {
    const auto it = answers.find(static_cast<std::uint32_t>(j));
    const std::string what = "worker " + std::to_string(j) + "'s count of " + path;
    TextSplit s = it != answers.end() && !it->second.empty()
                      ? decode(it->second, what)
                      : count_text_split(path, file_bytes, split_at(file_bytes, j - 1, members),
                                         split_at(file_bytes, j, members));
    if (s.first != expect_first || s.marks.file_bytes != file_bytes || (j == members && s.stop != file_bytes))
      throw InputError(what + " does not meet its neighbours' (another file at that path?)");
    expect_first = s.stop;
    for (auto& l : s.marks.line) l += lines;  // the file's line numbers
    lines += s.lines;
    out.rows += s.rows;
    out.cols = std::max(out.cols, s.cols);
    InputPart p;
    p.path = path;
    p.rows = s.rows;
    p.file_bytes = file_bytes;
    p.marks = std::move(s.marks);
    p.first_byte = s.first;
    p.stop_byte = s.stop;
    p.sample = s.sample;
    out.parts.push_back(std::move(p));
  }
  if (out.rows == 0) throw InputError(path + ": no data rows");
  out.cols = std::max<std::int64_t>(out.cols, 1);
  return out;
}

}  // namespace accel::cluster
