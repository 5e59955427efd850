// What coordinator and member share around the node: the JSON-lines log,
// addresses, transport options, and waiting for one message type.
#pragma once

#include <chrono>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "accel/json_lines.hpp"
#include "engine.hpp"
#include "node.hpp"

namespace accel::cluster {

inline double secs(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The per-round log (--log-json): JSON lines appended as they happen.
using Log = JsonLines;

std::pair<std::string, std::uint16_t> split_addr(const std::string& s);
transport::Options transport_options(const Common& c, std::uint32_t id, std::uint32_t incarnation);
nlohmann::json view_json(const Membership& v);

// Waits for one message of `type` (others go to `other`); throws InputError
// on timeout. On a worker: Rejected, JobDone, or CoordinatorGone when the
// coordinator refuses, finishes, or is gone.
transport::Received expect_msg(Node& node, std::uint16_t type, Ms timeout, const std::string& what,
                               const Other& other = {});

}  // namespace accel::cluster
