// One place every diagnostic line of the library and the CLI goes through:
// the CLI's errors, the cluster engine's membership news, the transport's
// drops. Each line has a level and a source ("accel coordinator", "accel
// transport", ...); the default sink writes "SOURCE: TEXT" to stderr, and
// lines below the threshold (ACCEL_LOG_LEVEL=error|warn|info|debug, default
// info) are not formatted at all. A program embedding the library sets its
// own sink (Python's logging, a file) with set_sink.
//
//   accel::log::warn("accel coordinator") << "worker " << id << " is gone";
#pragma once

#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

namespace accel::log {

enum class Level { Error = 0, Warn = 1, Info = 2, Debug = 3 };

using Sink = std::function<void(Level, std::string_view source, std::string_view text)>;
// nullptr: back to the default (stderr).
void set_sink(Sink sink);
void set_level(Level level);
Level level();  // from ACCEL_LOG_LEVEL until set_level
std::optional<Level> parse_level(std::string_view name);
const char* to_string(Level level);

// One line to the sink, when `level` passes the threshold.
void write(Level level, std::string_view source, std::string_view text);

// A line built with <<, written when it goes out of scope.
class Line {
 public:
  Line(Level level, std::string_view source) : level_(level), source_(source), on_(level <= log::level()) {}
  ~Line() {
    if (on_) write(level_, source_, out_.str());
  }
  Line(const Line&) = delete;
  Line& operator=(const Line&) = delete;
  template <class T>
  Line& operator<<(const T& v) {
    if (on_) out_ << v;
    return *this;
  }

 private:
  Level level_;
  std::string source_;
  bool on_;
  std::ostringstream out_;
};

inline Line error(std::string_view source) { return Line(Level::Error, source); }
inline Line warn(std::string_view source) { return Line(Level::Warn, source); }
inline Line info(std::string_view source) { return Line(Level::Info, source); }
inline Line debug(std::string_view source) { return Line(Level::Debug, source); }

}  // namespace accel::log
