// What coordinator and member share around the node: the JSON-lines log,
// addresses, transport options, and waiting for one message type.
#pragma once

#include <chrono>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "engine.hpp"
#include "node.hpp"

namespace accel::cluster {

inline double secs(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// JSON lines, appended as they happen (a crash keeps what was logged).
class Log {
 public:
  explicit Log(const std::string& path);
  // Every line carries t_s, seconds since this process opened its log, so a
  // run's phases can be laid out on one time axis.
  void write(nlohmann::json j);

 private:
  std::ofstream out_;
  Clock::time_point start_ = Clock::now();
};

std::pair<std::string, std::uint16_t> split_addr(const std::string& s);
transport::Options transport_options(const Common& c, std::uint32_t id, std::uint32_t incarnation);
nlohmann::json view_json(const Membership& v);

// Waits for one message of `type` (others go to `other`); throws InputError
// on timeout. On a worker: Rejected, JobDone, or CoordinatorGone when the
// coordinator refuses, finishes, or is gone.
transport::Received expect_msg(Node& node, std::uint16_t type, Ms timeout, const std::string& what,
                               const Other& other = {});

}  // namespace accel::cluster
