// JSON lines: one object per line, each stamped with t_s (seconds since the
// writer was made, so a run's phases line up on one time axis). The one
// writer of every machine-readable log: `accel kmeans --log-json` and the
// cluster's per-round logs of coordinator and workers. Header-only: it
// needs nlohmann-json, which the runtime library does not.
#pragma once

#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "accel/clock.hpp"
#include "accel/error.hpp"

namespace accel {

class JsonLines {
 public:
  // Writes nowhere.
  JsonLines() = default;
  // Appends to `path` (nothing when empty), flushed per line: a crash keeps
  // what was logged. Throws InputError when the file cannot be opened.
  explicit JsonLines(const std::string& path) {
    if (path.empty()) return;
    file_ = std::make_unique<std::ofstream>(path, std::ios::app);
    if (!*file_) throw InputError(path + ": cannot write the log");
    out_ = file_.get();
  }
  // Into a stream the caller owns (and outlives this writer).
  explicit JsonLines(std::ostream& out) : out_(&out) {}

  void write(nlohmann::json j) {
    if (!out_) return;
    j["t_s"] = std::chrono::duration<double>(Clock::now() - start_).count();
    *out_ << j.dump() << "\n";
    if (file_) out_->flush();
  }

 private:
  std::unique_ptr<std::ofstream> file_;
  std::ostream* out_ = nullptr;
  Clock::time_point start_ = Clock::now();
};

}  // namespace accel
