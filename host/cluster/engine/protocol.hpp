// The engine's messages (the job protocol of [Antimatroid], for any
// workload):
// application types on top of accel::transport's validated control frames.
// What a workload puts in a task, a contribution, a decision or a returning
// member's state is opaque bytes here; the workload's own codec reads them.
#pragma once

#include "bootstrap.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "codec.hpp"

namespace accel::cluster {

enum Type : std::uint16_t {
  kHello = 1,         // member -> coordinator: {resume?, iteration of its snapshot, bootstrap ticket}
  kProbe = 2,         // coordinator -> member: the workload's probe (what to measure)
  kCapability = 3,    // member -> coordinator: {units per second}
  kTask = 4,          // coordinator -> member: Task
  kTicket = 5,        // member -> coordinator: bulk ticket for its partition's data (push mode)
  kReady = 6,         // member -> coordinator: data in place
  kStart = 7,         // coordinator -> all: round 1 begins
  kContribution = 8,  // each round: Contribution (all-to-all, or to the coordinator)
  kCurrent = 9,       // coordinator -> returning member: Current
  kResync = 10,       // returning member -> coordinator: synchronized
  kDone = 11,         // coordinator -> all: finished
  kReject = 12,       // coordinator -> member: unknown job or id; discard the snapshot
  kDecision = 13,     // coordinator -> members (Central exchange): Contribution carrying the decision
  kEvicted = 14,      // coordinator -> member it no longer counts (Central exchange): rejoin
  kCounted = 15,      // coordinator -> members: what it counted for a member in a round (see Node::sync)
  kNeed = 16,         // member -> coordinator: which member's contribution of the round it lacks
  kLeave = 17,        // member -> coordinator: it leaves at a round boundary (SIGTERM); answered by kDone
  kMovesReady = 18,   // member -> coordinator: {plan id}: the rows a plan of moves gives it are read
  kFailed = 19,       // member -> coordinator: {text}: it cannot read its rows; the job ends before round 1
  kMoveTicket = 20,   // member -> coordinator (push mode): {home, begin, rows, bulk ticket}: push a piece a plan gives it
  kPartial = 21,      // member -> its tree parent or the coordinator (Task::tree): Partial (tree.hpp)
  kAsk = 22,          // coordinator -> member (Task::tree): send your own contribution of the round to me
  // Task::confirmed: coordinator -> members: the ids it counted in the
  // round; member -> coordinator, without a payload: send it (again).
  kConfirm = 23,
};
const char* type_name(std::uint16_t t);

struct Peer {
  std::uint32_t id = 0;
  std::vector<std::byte> address;  // UCX worker address
  bool operator==(const Peer&) const = default;
};

struct Membership {
  std::vector<std::uint32_t> active, inactive, recovering;
  bool operator==(const Membership&) const = default;
};

// A member's task: which workload, which rows, the workload's parameters.
// A cheap digest of a partition's bytes: crc32 of all of them up to 4 MiB;
// past that, of the first and last 64 KiB and 62 blocks of 64 KiB spread
// evenly between (4 MiB read, wherever the rows lie), mixed with the size.
// Never 0. What it can miss: a change confined to the bytes between those
// blocks of a larger partition. `read` is called after each block with its
// offset and size: a caller whose bytes are a file mapping gives the pages
// back there (a touch maps the page cache's whole folio, up to megabytes,
// so 64 blocks of a mapping would otherwise hold some 70 MB at once).
std::uint64_t rows_digest(std::span<const std::byte> data,
                          const std::function<void(std::size_t at, std::size_t n)>& read = {});

// What a participant counted in a round: crc32 over each member's id and
// workload bytes in id order (members that count nothing left out), mixed
// with their number. Never 0, which a contribution sends for "did not count
// the round before".
std::uint64_t counted_digest(const std::map<std::uint32_t, std::span<const std::byte>>& members);
std::uint64_t counted_digest(const std::map<std::uint32_t, std::vector<std::byte>>& members);

struct Task {
  std::string workload;           // registered name (workload.hpp)
  std::uint32_t self = 0;         // the receiver's id
  std::int64_t units = 0;         // rows of the whole job
  std::int64_t begin = 0, rows = 0;  // this member's partition
  std::int64_t max_rounds = 0;
  std::uint64_t data_bytes = 0;   // the partition's data, in the workload's layout
  std::string input;              // for --pull: the member reads its data itself
  bool pull = false;
  // An all-to-all workload's rounds go through the coordinator (gathered):
  // members send it their contribution and adopt the shared state it
  // sends back, instead of exchanging contributions with each other.
  bool gathered = false;
  // ... and go up a tree of members, each adding its children's partial
  // sums to its own (tree.hpp), past the coordinator's --tree-from.
  bool tree = false;
  // An all-to-all workload whose members count a round only as the
  // coordinator confirms it counted it (Job::confirmed): what they absorb
  // goes out to their users, so none may count otherwise even for a round.
  bool confirmed = false;
  // --pull: rows_digest of the partition's data as the coordinator reads
  // the input (0: none). A member whose copy differs (another file at the
  // path, or one changed since the job began) computes nothing on it.
  std::uint64_t digest = 0;
  Bytes params;                   // the workload's parameters
  std::vector<Peer> peers;        // every participant but the receiver
  // The receiver's keys with every worker, by id (bootstrap.hpp); entry 0,
  // the coordinator's, is the handshake's and stays zero here.
  std::vector<transport::MacKey> pair_keys;
  bool operator==(const Task&) const = default;
};

// Rows of a member's partition that another computes: [begin, begin +
// rows) of `home`'s, `bytes` of them in the workload's layout, read from
// the input by worker `by` (--pull: the rows of a lost member go to the
// survivors, not to the coordinator).
struct Move {
  std::uint32_t home = 0, by = 0;
  std::int64_t begin = 0, rows = 0;
  std::uint64_t digest = 0;  // rows_digest of the rows, as for a Task
  std::uint64_t bytes = 0;
  bool operator==(const Move&) const = default;
};

// One round's message. `data` is the workload's; the rest is the engine's.
struct Contribution {
  Bytes data;
  bool has_view = false;  // set by the coordinator: the membership of this round
  Membership view;
  std::vector<std::byte> reply_address;  // set by a returning member
  // Set by the coordinator (all-to-all): the contributions it computes for
  // lost members from their rows, counted in their place.
  std::vector<std::pair<std::uint32_t, Bytes>> stand_ins;
  // Every member: the rows it computed this round and how long that took (the measured speed of [SysInfo], collected by the coordinator).
  std::int64_t work_rows = 0;
  double work_seconds = 0;
  // Every worker: bytes of memory it can still take for rows (memory_room),
  // -1 where it says nothing. A plan of moves gives it no more.
  std::int64_t room = -1;
  // Set by the coordinator (all-to-all): members that keep only the first
  // `rows` of their partition from the next round on (the coordinator
  // computes the rest), when the measured speeds call for a new split.
  std::vector<std::pair<std::uint32_t, std::int64_t>> trims;
  // Set by the coordinator (all-to-all), in two steps. A plan (has_moves:
  // every move, and the plan's id): the workers read the rows it gives
  // them beside the rounds (--pull: from the input; pushed: the
  // coordinator pushes them, kMoveTicket) and say so (kMovesReady). Its commit
  // (commit_moves: the id), once they all have: in effect from round
  // `moves_from` on every side. A worker then computes the rows of the
  // moves `by` it besides its own, and no longer those it had before that
  // the plan leaves out.
  bool has_moves = false;
  std::vector<Move> moves;
  std::uint64_t moves_id = 0, commit_moves = 0;
  std::int64_t moves_from = 0;
  // Set by the coordinator: the addresses of the members active this round
  // that were not the round before, so that members that came back or
  // joined at the same time reach each other (neither was in the other's
  // view when it announced itself).
  std::vector<Peer> peers;
  // Every participant: counted_digest of what it counted in the round
  // before, or 0 where it did not count it (it was returning, or is a
  // resumed coordinator). A participant that counted otherwise than the
  // coordinator has left the others' state: its contribution is refused,
  // and it rejoins on seeing the coordinator's (node.cpp).
  std::uint64_t counted = 0;
};

struct Current {
  std::int64_t round = 0;
  Bytes state;  // the workload's shared state (Partition::shared_state)
  Membership view;
  std::vector<Peer> peers;
  // The member counts from `round` on (every member returning together to
  // a resumed coordinator); else it first follows a round it does not count.
  bool counts = false;
  std::vector<transport::MacKey> pair_keys;  // as in Task
};

// Bounds on what a payload may claim.
struct Limits {
  std::int64_t max_peers = 4096;
  std::size_t max_address = 4096, max_path = 4096, max_name = 64;
  std::size_t max_data = std::size_t{1} << 30;  // a workload's bytes in one message
};

Bytes encode(const Task& t);
Bytes encode(const Contribution& c);
Bytes encode(const Current& c);
// Each throws InputError on a truncated payload or a count beyond `limits`.
Task decode_task(std::span<const std::byte> in, const Limits& limits);
Contribution decode_contribution(std::span<const std::byte> in, const Limits& limits);
Current decode_current(std::span<const std::byte> in, const Limits& limits);

// Small fixed payloads.
// The ticket is the bootstrap's (bootstrap.hpp): it binds the hello to the
// worker that authenticated, and to the address it authenticated with.
Bytes encode_hello(bool resume, std::int64_t iteration, const Ticket& ticket);
void decode_hello(std::span<const std::byte> in, bool& resume, std::int64_t& iteration, Ticket& ticket);
// kCounted: the member, and the contribution the coordinator counted for it
// (its own, or one computed from its rows), or nothing (left out).
Bytes encode_counted(std::uint32_t member, const Bytes* data);
std::pair<std::uint32_t, std::optional<Bytes>> decode_counted(std::span<const std::byte> in, const Limits& limits);
// kConfirm: the ids the coordinator counted in a round, ascending.
Bytes encode_ids(const std::vector<std::uint32_t>& ids);
std::vector<std::uint32_t> decode_ids(std::span<const std::byte> in, const Limits& limits);
Bytes encode_u32(std::uint32_t v);
std::uint32_t decode_u32(std::span<const std::byte> in);

}  // namespace accel::cluster
