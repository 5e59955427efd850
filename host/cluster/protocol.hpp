// The distributed k-means job's messages (seeds/000): application types on
// top of accel::transport's validated control frames, with payload codecs
// that bound every count they read.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace accel::cluster {

enum Type : std::uint16_t {
  kHello = 1,       // worker -> coordinator: {resume?, iteration of its snapshot, worker address}
  kProbe = 2,       // coordinator -> worker: {d, k}: measure your kmeans_assign throughput
  kCapability = 3,  // worker -> coordinator: {rows per second, device names}
  kTask = 4,        // coordinator -> worker: Task
  kTicket = 5,      // worker -> coordinator: bulk ticket for its partition (push mode)
  kReady = 6,       // worker -> coordinator: data in place, snapshot written
  kStart = 7,       // coordinator -> all: iteration 1 begins
  kPartial = 8,     // all-to-all each iteration: Partial
  kCurrent = 9,     // coordinator -> recovering worker: Current
  kResync = 10,     // recovering worker -> coordinator: notified everyone, synchronized
  kDone = 11,       // coordinator -> all: finished
  kReject = 12,     // coordinator -> worker: unknown job or id; discard the snapshot
};
const char* type_name(std::uint16_t t);

struct Peer {
  std::uint32_t id = 0;
  std::vector<std::byte> address;  // UCX worker address
};

struct Task {
  std::int64_t n_total = 0, d = 0, k = 0, max_iter = 0;
  double tol = 0;
  std::int64_t row_begin = 0, rows = 0;
  std::string input;     // for --pull: the worker reads its rows itself
  bool pull = false;
  bool bounds = false;  // keep Yinyang bounds between iterations (--algorithm)
  std::vector<float> centroids;  // k x d
  std::vector<Peer> peers;       // every participant but the receiver
};

struct Membership {
  std::vector<std::uint32_t> active, inactive, recovering;
};

struct Partial {
  std::vector<double> sums;
  std::vector<std::int64_t> counts;
  double inertia = 0;
  std::int64_t rows = 0;
  bool has_view = false;  // set by the coordinator: the membership of this iteration
  Membership view;
  std::vector<std::byte> reply_address;  // set by a recovering worker
};

struct Current {
  std::int64_t iteration = 0;
  std::vector<float> centroids;
  Membership view;
  std::vector<Peer> peers;
};

// Bounds on what a payload may claim, from the job's shape.
struct Limits {
  std::int64_t max_k = 1 << 16, max_d = 1 << 16, max_peers = 4096;
  std::size_t max_address = 4096, max_path = 4096;
};

std::vector<std::byte> encode(const Task& t);
std::vector<std::byte> encode(const Partial& p);
std::vector<std::byte> encode(const Current& c);
// Each throws InputError on a truncated payload or a count beyond `limits`.
Task decode_task(std::span<const std::byte> in, const Limits& limits);
Partial decode_partial(std::span<const std::byte> in, std::int64_t k, std::int64_t d, const Limits& limits);
Current decode_current(std::span<const std::byte> in, std::int64_t k, std::int64_t d, const Limits& limits);

// Small fixed payloads.
std::vector<std::byte> encode_hello(bool resume, std::int64_t iteration, std::span<const std::byte> address);
void decode_hello(std::span<const std::byte> in, bool& resume, std::int64_t& iteration, std::vector<std::byte>& address,
                  const Limits& limits);
std::vector<std::byte> encode_i64s(const std::vector<std::int64_t>& v);
std::vector<std::int64_t> decode_i64s(std::span<const std::byte> in, std::size_t expect);
std::vector<std::byte> encode_f64(double v);
double decode_f64(std::span<const std::byte> in);

}  // namespace accel::cluster
