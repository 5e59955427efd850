// A worker: joins (fresh, or resuming its snapshot), gets its task and its
// partition's data, then takes part in the rounds until the coordinator
// says the job is done. The workload comes from the task.
#include <algorithm>
#include <atomic>
#include <limits>
#include <filesystem>
#include <future>
#include <iostream>
#include <optional>
#include <set>
#include <thread>

#include "accel/error.hpp"
#include "accel/log.hpp"
#include "accel/faults.hpp"
#include "session.hpp"
#include "job_token.hpp"
#include "snapshot.hpp"
#include "memory_room.hpp"
#include "moves.hpp"

namespace accel::cluster {
namespace {

using transport::Received;

// Rows read from the input (--pull) are the coordinator's: the same digest.
void check_digest(const Task& task, std::span<const std::byte> data) {
  if (task.digest != 0 && rows_digest(data) != task.digest)
    throw InputError(task.input + ": rows [" + std::to_string(task.begin) + ", " + std::to_string(task.begin + task.rows) +
                     ") differ from the coordinator's copy (another file at this path, or one changed since the job "
                     "began)");
}

// The partition's data into s.data: read from the input file (--pull), or
// pushed by the coordinator into this buffer after a ticket, at the start
// and again when resuming from a snapshot without data.
void fetch_data(Node& node, const Workload& workload, Snapshot& s, Ms timeout) {
  s.data.resize(s.task.data_bytes);
  if (s.task.pull) {
    try {
      workload.read(s.task, s.data);
      check_digest(s.task, s.data);
    } catch (const InputError& e) {  // which member could not read its rows
      throw InputError("worker " + std::to_string(s.task.self) + ": " + e.what());
    }
    return;
  }
  if (s.data.empty()) return;
  auto& net = node.net();
  auto h = net.expect(s.data.data(), s.data.size(), transport::MemoryType::Host, node.endpoint(0));
  node.send(0, kTicket, 0, h.ticket);
  // Waits for the data, or for a reject (a resume the coordinator cannot
  // serve: its job is not the snapshot's); other messages keep their turn.
  const auto deadline = Clock::now() + timeout;
  while (!h.completion->done) {
    const auto left = ms_until(deadline);
    if (left.count() <= 0) throw InputError("receiving rows failed: timed out");
    if (!node.reachable(0)) throw CoordinatorGone("the coordinator is gone");
    if (auto r = node.receive(std::min(left, Ms(20)))) {
      if (r->message.header.type == kReject) throw Rejected();
      node.stash(std::move(*r));
    }
  }
  if (!h.completion->ok()) {
    if (!node.reachable(0)) throw CoordinatorGone("the coordinator is gone (" + h.completion->error + ")");
    throw InputError("receiving rows failed: " + h.completion->error);
  }
}

// One incarnation of a worker: join (fresh or resuming: start), then take
// part in rounds (step) until done. Throws Evicted and the other errors of
// errors.hpp for WorkerRun to rejoin or give up.
class Incarnation {
 public:
  // `reached`: set once the coordinator has answered this incarnation's
  // hello (it is there).
  Incarnation(const WorkerOptions& o, std::uint32_t incarnation, std::optional<Snapshot>& snap, Log& log,
              const Registry& reg, bool& reached, const bool& leaving)
      : o_(o), incarnation_(incarnation), snap_(snap), log_(log), reached_(reached), leaving_(leaving),
        local_{reg, o.device, {}},
        node_(transport_options(o, o.id, incarnation), Ms(o.timeout_ms), Limits{}) {}

  void start() {
    const auto [ip, port] = split_addr(o_.coordinator);
    const bool resume = snap_.has_value();
    // The front door first (bootstrap.hpp): the coordinator's UCX address
    // and this session's ticket, for the token.
    const BootReply boot = boot_connect(ip, port, o_.job, o_.id, resume, node_.net().worker_address(),
                                        Ms(std::max(o_.timeout_ms * 5, 5000)));
    node_.connect_peer(0, boot.address);
    node_.set_key(0, boot.key);  // the handshake's: what the coordinator says is sealed with it
    if (!node_.reachable(0)) throw CoordinatorGone("the coordinator's address is unreachable");
    // A resuming worker is answered within a round; a fresh one waits for
    // every worker to join and for the coordinator's measurements.
    join_ = resume ? Ms(std::max(o_.timeout_ms * 5, 5000)) : Ms(std::max(o_.timeout_ms * 10, 30000));
    if (resume) {
      if (snap_->data.size() != snap_->task.data_bytes) refetch();
      node_.send(0, kHello, 0, encode_hello(true, 0, boot.ticket));
      resume_round();
    } else {
      node_.send(0, kHello, 0, encode_hello(false, 0, boot.ticket));
      fresh_start();
    }
  }
  // One round; false when the job is over for this worker (then it waits
  // for the coordinator's done, bounded).
  bool step();

 private:
  void refetch();
  void fetch_rows(Snapshot& s);
  void fresh_start();
  void fail_start(const InputError& e);
  std::unique_ptr<Partition> open_partition();
  void start_snapshot();
  void resume_round();
  RoundOutcome all_to_all_round(std::int64_t t, SyncStats& st, double& computing);
  RoundOutcome central_round(std::int64_t t, SyncStats& st, double& computing);
  RoundOutcome gathered_round(std::int64_t t, SyncStats& st, double& computing);
  Contribution own_contribution(std::int64_t t, double& computing, nlohmann::json& moved, bool idle);
  void follow(const Contribution& c, RoundOutcome& out);
  double computed_since(Clock::time_point t0, std::int64_t t) const;
  void prepare_moves(const std::vector<Move>& moves, std::uint64_t id);
  struct Pending;
  void ask_push(Pending& p, const Move& m);
  bool pushes_done(Pending& p);
  void forget_transfers();
  void say_ready();
  // Computes the first rows of its partition that both a re-split and the
  // moves leave it; returns how many.
  std::int64_t keep_first_rows() {
    const std::int64_t rows = std::min(trim_keep_, move_keep_);
    all_to_all(*part_).keep(rows);
    return rows;
  }
  void apply_moves(std::int64_t t, nlohmann::json& log);
  void wait_done();
  // The all-to-all exchange talks to every peer; the central one only to
  // the coordinator, so a dead peer's stale address is never dialled.
  void connect_peers(const std::vector<Peer>& peers) {
    if (workload().exchange() != Exchange::AllToAll) return;
    for (const auto& p : peers)
      if (p.id != 0) node_.connect_peer(p.id, p.address);
  }
  const Workload& workload() const { return workload_named(snap_->task.workload); }
  const Workload& workload_named(const std::string& name) const {
    const Workload& registered = find_workload(name);
    if (!o_.workload) return registered;
    if (typeid(*o_.workload) != typeid(registered))
      throw InputError("the task names workload '" + name + "', not the one this process runs");
    return *o_.workload;
  }
  std::int64_t room() const { return o_.memory_room ? o_.memory_room() : memory_room(); }
  // The keys of this worker's pairs with the others (bootstrap.hpp).
  void take_keys(const std::vector<transport::MacKey>& keys) {
    for (std::size_t j = 1; j < keys.size(); ++j)
      if (j != o_.id) node_.set_key(static_cast<std::uint32_t>(j), keys[j]);
  }
  void on_message(const Received& r) {
    if (r.message.header.type == kDone) {
      done_ = true;
      // Let go after a leave: this round's view no longer has it, and
      // nobody sends it the rest of the round.
      if (leave_said_) throw JobDone{};
    } else if (r.message.header.type == kReject) {
      throw Rejected();
    }
  }

  const WorkerOptions& o_;
  const std::uint32_t incarnation_;
  std::optional<Snapshot>& snap_;
  Log& log_;
  bool& reached_;
  const bool& leaving_;    // asked to leave (WorkerRun::leave)
  bool leave_said_ = false;  // kLeave sent
  Local local_;
  // Moves announced and not yet in effect, with the reads of their new
  // pieces running beside the rounds. Declared before the node: buffers
  // the coordinator may still be pushing into go after its transport.
  struct Pending {
    std::vector<Move> moves;
    std::uint64_t id = 0;
    std::int64_t from = 0;  // once committed: the round it takes effect
    bool ready_said = false;
    std::set<std::uint32_t> same;        // homes whose piece here stays as it is
    std::map<std::uint32_t, Move> fresh;  // new pieces, by home
    std::future<std::map<std::uint32_t, Bytes>> data;  // theirs, read one after another (--pull)
    // Pushed by the coordinator instead: each piece's buffer and transfer.
    std::map<std::uint32_t, Bytes> pushed;
    std::vector<std::pair<std::uint32_t, transport::BulkReceiveHandle>> transfers;
  };
  std::optional<Pending> pending_;
  // The buffer of a fetch that failed part way: a snapshot whose data has
  // the task's size is taken as whole by the next incarnation, so it must
  // not keep this one; kept here, before the node, in case a sender is
  // still writing into it.
  Blob failed_fetch_;
  Node node_;
  Ms join_{0};
  std::int64_t t_ = 1;
  Membership view_;
  // Other members' rows this worker computes (--pull: moves), by their
  // home, with their bytes; declared before the partition, which reads them.
  std::map<std::uint32_t, std::pair<Move, Bytes>> pieces_;
  // The first rows of its partition this worker computes: as a re-split by
  // speed left them (trims), and before the first it gave away (moves).
  std::int64_t trim_keep_ = std::numeric_limits<std::int64_t>::max();
  std::int64_t move_keep_ = std::numeric_limits<std::int64_t>::max();
  std::unique_ptr<Partition> part_;
  bool recovering_ = false, done_ = false, over_ = false;
  // Declared after what it uses: joined first when the incarnation ends.
  std::atomic<bool> snapshot_done_ = false;
  bool snapshot_logged_ = false;
  double snapshot_seconds_ = 0;
  std::jthread snapshot_writer_;
};

// A snapshot without data (snapshot.hpp): get it back before saying hello,
// so that the recovery handshake itself is as quick as ever.
void Incarnation::refetch() {
  const auto t0 = Clock::now();
  fetch_rows(*snap_);
  log_.write({{"event", "rows_fetched"}, {"rows", snap_->task.rows}, {"seconds", secs(t0, Clock::now())},
              {"from", snap_->task.pull ? "input file" : "coordinator"}});
}

// A fetch that fails (the coordinator gone mid-push, a read cut short)
// leaves s without data: a later incarnation fetches again rather than
// compute on the rows that never arrived (seed 6101 of the simulator: a
// worker whose coordinator died while pushing its rows resumed on an
// uninitialised buffer, and the centroids went to 1e35).
void Incarnation::fetch_rows(Snapshot& s) {
  try {
    fetch_data(node_, workload_named(s.task.workload), s, join_);
  } catch (...) {
    failed_fetch_ = std::move(s.data);
    s.data = Blob{};
    throw;
  }
}

// Before round 1 (the rows unreadable, an output this member cannot
// write, its split uncountable): the job cannot be the whole input's; the
// coordinator ends it with this member's reason rather than wait for it.
void Incarnation::fail_start(const InputError& e) {
  Out why;
  why.text(e.what());
  node_.send(0, kFailed, 0, why.b);
  node_.net().progress_until([] { return false; }, Ms(50));  // let it leave
}

// The probe names the workload and what to measure (kProbe: {workload
// name, the job's probe}); the task follows once every worker has answered.
void Incarnation::fresh_start() {
  std::optional<Received> first;
  try {
    first = expect_msg(node_, kProbe, join_, "the coordinator's probe", [](const Received& r) {
      if (r.message.header.type == kTask && r.message.header.sender == 0) throw JoinMidJob{r.message.payload};
    });
  } catch (const CoordinatorGone& e) {
    throw NotListening(e.what());
  }
  const Received& probe = *first;
  reached_ = true;
  In in(probe.message.payload);
  const std::string name = in.text(node_.limits().max_name);
  const Bytes spec = in.bytes(node_.limits().max_data);
  const Bytes survey = in.bytes(node_.limits().max_data);
  in.end();
  Out capability;  // {rows per second, its count of its split}
  capability.put(workload_named(name).measure(spec, local_));
  try {
    capability.bytes(survey.empty() ? Bytes{} : workload_named(name).survey(survey));
  } catch (const InputError& e) {
    fail_start(e);
    throw;
  }
  node_.send(0, kCapability, 0, capability.b);
  const Received tr = expect_msg(node_, kTask, join_, "the task");
  Snapshot s;
  s.job = o_.job;
  s.id = o_.id;
  s.incarnation = incarnation_;
  s.task = decode_task(tr.message.payload, node_.limits());
  if (s.task.workload != name) throw InputError("the task's workload differs from the probe's");
  take_keys(s.task.pair_keys);
  try {
    fetch_rows(s);
    snap_ = std::move(s);
    part_ = open_partition();
  } catch (const InputError& e) {
    fail_start(e);
    throw;
  }
  start_snapshot();
  connect_peers(snap_->task.peers);
  node_.send(0, kReady, 0, {});
  expect_msg(node_, kStart, join_, "the start", [&](const Received& r) {
    if (r.message.header.type == kContribution || r.message.header.type == kDecision) node_.stash(r);
  });
  // Everyone starts active: the coordinator (among the peers) and this worker.
  std::set<std::uint32_t> all{0, o_.id};
  for (const auto& p : snap_->task.peers) all.insert(p.id);
  view_.active.assign(all.begin(), all.end());
}

// The task's partition; an InputError says which member could not open it
// (an output it cannot write).
std::unique_ptr<Partition> Incarnation::open_partition() {
  try {
    return workload().open(snap_->task, snap_->data, local_);
  } catch (const InputError& e) {
    throw InputError("worker " + std::to_string(snap_->task.self) + ": " + e.what());
  }
}

// The snapshot (the task, and the data with --snapshot-rows; fsynced) is
// written beside the first rounds rather than before this worker says it is
// ready: with many rows that write would hold the whole job's start.
// Nor does any round wait for it: it waits on the disk (an fsync), which
// can take several rounds of a fast job. From the round it lands in
// (logged as the "snapshot" event) a restarted worker can resume;
// a crash before then leaves no snapshot (the rename keeps the file whole or
// absent) and the job goes on without this member.
// In virtual time (a simulated process: clock_hook()) the write runs at
// once instead: a thread outside the world's turns would have a restart
// find the snapshot or not as the host's scheduling goes.
void Incarnation::start_snapshot() {
  if (o_.snapshot_dir.empty()) return;
  auto write = [this] {
    const auto t0 = Clock::now();
    try {
      save_snapshot(snapshot_path(o_.snapshot_dir, o_.id), *snap_, o_.snapshot_rows);
    } catch (const std::exception& e) {
      log::warn("accel worker " + std::to_string(o_.id)) << "no snapshot: " << e.what();
    }
    snapshot_seconds_ = secs(t0, Clock::now());
    snapshot_done_ = true;
  };
  if (accel::clock_hook()) write();
  else snapshot_writer_ = std::jthread(write);
}

// recovery as in [Antimatroid]: wait to be told the current round
// and the shared state.
void Incarnation::resume_round() {
  const Received cr = expect_msg(node_, kCurrent, join_, "the coordinator's current iteration", [&](const Received& r) {
    if (r.message.header.type == kContribution || r.message.header.type == kDecision) node_.stash(r);
  });
  const Current cur = decode_current(cr.message.payload, node_.limits());
  reached_ = true;
  take_keys(cur.pair_keys);
  t_ = cur.round;
  view_ = cur.view;
  connect_peers(cur.peers);
  part_ = open_partition();
  part_->adopt(cur.state);
  recovering_ = !cur.counts;
  log_.write({{"event", "resumed"}, {"worker", o_.id}, {"incarnation", incarnation_}, {"iteration", t_}});
}

bool Incarnation::step() {
  if (over_ || t_ > snap_->task.max_rounds || done_) {
    wait_done();
    return false;
  }
  if (leaving_ && !leave_said_ && !recovering_) {
    node_.send(0, kLeave, t_, {});
    leave_said_ = true;
    log_.write({{"event", "leaving"}, {"worker", o_.id}, {"iteration", t_}});
  }
  const bool central = workload().exchange() == Exchange::Central;
  SyncStats st;
  double computing = 0;
  const RoundOutcome out = central                ? central_round(t_, st, computing)
                           : snap_->task.gathered ? gathered_round(t_, st, computing)
                                                  : all_to_all_round(t_, st, computing);
  if (snapshot_done_ && !snapshot_logged_) {
    if (snapshot_writer_.joinable()) snapshot_writer_.join();
    log_.write({{"event", "snapshot"}, {"iteration", t_}, {"seconds", snapshot_seconds_}});
    snapshot_logged_ = true;
  }
  if (recovering_) {
    node_.send(0, kResync, t_, {});
    recovering_ = false;
  }
  nlohmann::json line = {{"iteration", t_},
                         {"participant", o_.id},
                         {"computing_s", computing},
                         {"synchronizing_s", st.notify_seconds + st.wait_seconds},
                         {"barrier_wait_s", st.wait_seconds},
                         {"members", view_json(view_)},
                         {"evicted", st.evicted}};
  line.update(out.log);
  log_.write(line);
  if (out.stop) {
    over_ = true;
  } else {
    ++t_;
    if (out.last) over_ = true;
  }
  return true;
}

// The seconds this member computed round t since t0, slowed by the fault
// when it is injected (inside the timed part: the rates see it).
double Incarnation::computed_since(Clock::time_point t0, std::int64_t t) const {
  const double s = secs(t0, Clock::now());
  return recovering_ || !faults().rounds.at(t) ? s : faults().rounds.slow(s);  // a test's slow member
}

// Returning: no member counts this node's contribution of the current
// round, so it only asks for theirs (an idle contribution with its reply
// address) and computes from the next round on.
RoundOutcome Incarnation::all_to_all_round(std::int64_t t, SyncStats& st, double& computing) {
  nlohmann::json moved = nlohmann::json::object();
  Contribution mine = own_contribution(t, computing, moved, true);
  const bool member = std::find(view_.active.begin(), view_.active.end(), o_.id) != view_.active.end();
  if (!member) mine.reply_address = node_.net().worker_address();  // returning: peers answer it
  node_.confirm_rounds(snap_->task.confirmed);
  const auto got = node_.sync(
      t, mine, view_, [&](std::span<const std::byte> b) { part_->validate(b); },
      [&](const Received& r) { on_message(r); }, st,
      [&](std::uint32_t q) { return recovering_ ? nullptr : all_to_all(*part_).addressed(q); });
  std::map<std::uint32_t, Bytes> members;
  for (const auto& [id, c] : got) members[id] = c.data;
  node_.counted_round(t, all_to_all(*part_).counted(members));
  RoundOutcome out = all_to_all(*part_).absorb(t, members);
  if (auto c = got.find(0); c != got.end()) follow(c->second, out);
  out.log.update(moved);
  return out;
}

// The start of a round in either exchange: the moves due now applied, and
// this member's contribution with its rate and memory room. A returning
// member computes nothing: its data are the workload's idle bytes (`idle`:
// the all-to-all, whose peers answer them) or none (gathered).
Contribution Incarnation::own_contribution(std::int64_t t, double& computing, nlohmann::json& moved, bool idle) {
  if (pending_ && pending_->from > 0 && t >= pending_->from) apply_moves(t, moved);
  say_ready();
  const auto t0 = Clock::now();
  Contribution mine;
  if (!recovering_) {
    all_to_all(*part_).members(view_.active);
    mine.data = part_->contribute(t);
  } else if (idle) {
    mine.data = part_->idle();
  }
  computing = computed_since(t0, t);
  mine.work_rows = recovering_ || !all_to_all(*part_).timed() ? 0 : all_to_all(*part_).rows();
  mine.work_seconds = computing;
  mine.room = room();
  return mine;
}

// The coordinator's word on the rows, in its contribution (all-to-all) or
// its decision (gathered): a re-split by measured speed, from the next
// round on which this member keeps the first rows of its partition, and
// the plans of moves and their commits.
void Incarnation::follow(const Contribution& c, RoundOutcome& out) {
  for (const auto& [id, rows] : c.trims)
    if (id == o_.id) {
      trim_keep_ = rows;
      keep_first_rows();
      out.log["kept_rows"] = rows;
    }
  if (c.has_moves && !recovering_) prepare_moves(c.moves, c.moves_id);
  if (c.commit_moves != 0 && pending_ && pending_->id == c.commit_moves) pending_->from = c.moves_from;
  say_ready();
}

// The gathered exchange (Task::gathered): this member's contribution goes
// to the coordinator alone, and its decision brings the state every member
// adopts, the round's outcome and the coordinator's word on the rows. A
// returning member sends nothing and adopts the state as the others do.
RoundOutcome Incarnation::gathered_round(std::int64_t t, SyncStats& st, double& computing) {
  nlohmann::json moved = nlohmann::json::object();
  const Contribution mine = own_contribution(t, computing, moved, false);
  Gathered g;
  const Validate decided = [&](std::span<const std::byte> b) { g = decode_gathered(b, node_.limits().max_data); };
  const Other other = [&](const Received& r) { on_message(r); };
  const Contribution* own = recovering_ ? nullptr : &mine;
  const Contribution decision =
      snap_->task.tree
          ? node_.exchange_in_tree(
                t, own, tree_spot(view_.active, o_.id).value_or(TreeSpot{}),
                [&](std::span<const std::byte> a, std::span<const std::byte> b) {
                  return all_to_all(*part_).combine(a, b);
                },
                [&](std::span<const std::byte> b) { part_->validate(b); }, decided, other, st)
          : node_.exchange_with_coordinator(t, own, decided, other, st);
  for (const auto& p : decision.peers)  // new in the view: a tree parent passes it the next decisions
    if (p.id != o_.id) node_.ensure_peer(p.id, p.address);
  view_ = decision.view;
  part_->adopt(g.state);
  RoundOutcome out = std::move(g.outcome);
  follow(decision, out);
  out.log.update(moved);
  return out;
}

// The coordinator's plan of moves: the pieces new to this worker are read
// from the input (the task's, --pull) in the background while it computes
// its rows as they are; the plan takes effect once the coordinator commits
// it.
void Incarnation::prepare_moves(const std::vector<Move>& moves, std::uint64_t id) {
  Pending p;
  p.moves = moves;
  p.id = id;
  std::vector<Task> reads;
  for (const auto& m : moves) {
    if (m.by != o_.id || m.home == o_.id) continue;
    if (p.same.count(m.home) || p.fresh.count(m.home))
      throw InputError("the coordinator moved two pieces of worker " + std::to_string(m.home) + " here");
    if (m.begin > snap_->task.units - m.rows) throw InputError("a move past the input's rows");
    if (const auto had = pieces_.find(m.home); had != pieces_.end() && had->second.first == m) {
      p.same.insert(m.home);
      continue;
    }
    p.fresh.emplace(m.home, m);
    if (!snap_->task.pull) {
      ask_push(p, m);
      continue;
    }
    Task task = snap_->task;
    task.self = m.home;  // which piece (the reader's own id is not needed)
    task.begin = m.begin;
    task.rows = m.rows;
    task.data_bytes = m.bytes;
    task.digest = m.digest;
    reads.push_back(std::move(task));
  }
  // One thread, the pieces one after another: the disk reads them no
  // faster in parallel, and the readers share no state. In virtual time
  // (clock_hook(): a simulated process), at once, as the snapshot is.
  const auto how = accel::clock_hook() ? std::launch::deferred : std::launch::async;
  if (!reads.empty())
    p.data = std::async(how, [w = &workload(), reads = std::move(reads)] {
      std::map<std::uint32_t, Bytes> out;
      for (const Task& task : reads) {
        Bytes b(task.data_bytes);
        w->read(task, b);
        check_digest(task, b);
        out.emplace(task.self, std::move(b));
      }
      return out;
    });
  if (p.data.valid() && how == std::launch::deferred) p.data.wait();
  forget_transfers();
  pending_ = std::move(p);
}

// Push mode: a buffer for the piece, and its ticket to the coordinator,
// which pushes the rows from its mapping beside the rounds.
void Incarnation::ask_push(Pending& p, const Move& m) {
  Bytes& buf = p.pushed[m.home];
  buf.resize(m.bytes);
  auto h = node_.net().expect(buf.data(), buf.size(), transport::MemoryType::Host, node_.endpoint(0));
  Out o;
  o.put(m.home);
  o.put(m.begin);
  o.put(m.rows);
  o.put<std::uint64_t>(h.ticket.size());
  o.b.insert(o.b.end(), h.ticket.begin(), h.ticket.end());
  node_.send(0, kMoveTicket, t_, o.b);
  p.transfers.emplace_back(m.home, std::move(h));
}

// Whether every piece pushed to this worker is in place (and checked
// against the coordinator's digest).
bool Incarnation::pushes_done(Pending& p) {
  for (const auto& [home, h] : p.transfers) {
    if (!h.completion->done) return false;
    if (!h.completion->ok()) throw InputError("receiving moved rows failed: " + h.completion->error);
  }
  for (const auto& [home, h] : p.transfers) {
    const Move& m = p.fresh.at(home);
    Task piece = snap_->task;
    piece.begin = m.begin;
    piece.rows = m.rows;
    piece.digest = m.digest;
    check_digest(piece, p.pushed.at(home));
  }
  p.transfers.clear();
  return true;
}

// Transfers into a pending plan's buffers that have not finished are
// dropped before the buffers go (a new plan, or the incarnation's end).
void Incarnation::forget_transfers() {
  if (!pending_) return;
  for (const auto& [home, h] : pending_->transfers)
    if (!h.completion->done) node_.net().forget(h.transfer_id);
  pending_->transfers.clear();
}

// Once the pending plan's reads are done, the coordinator hears so (once).
void Incarnation::say_ready() {
  if (!pending_ || pending_->ready_said) return;
  if (pending_->data.valid() && pending_->data.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
  if (!pushes_done(*pending_)) return;
  Out o;
  o.put(pending_->id);
  node_.send(0, kMovesReady, t_, o.b);
  pending_->ready_said = true;
}

// The pending moves take effect: this worker keeps its first rows up to the
// first piece it gave, drops the pieces the plan leaves out and adds the
// new ones (waiting for their reads if they are not done yet).
void Incarnation::apply_moves(std::int64_t t, nlohmann::json& log) {
  Pending p = std::move(*pending_);
  pending_.reset();
  const auto t0 = Clock::now();
  const std::int64_t keep = own_rows(o_.id, snap_->task.begin, snap_->task.rows, p.moves);
  if (keep != std::min(move_keep_, snap_->task.rows)) {
    move_keep_ = keep;
    log["kept_rows"] = keep_first_rows();
  }
  for (auto it = pieces_.begin(); it != pieces_.end();) {
    if (p.same.count(it->first)) {
      ++it;
      continue;
    }
    all_to_all(*part_).drop_extra(it->first);
    it = pieces_.erase(it);
  }
  std::map<std::uint32_t, Bytes> data = std::move(p.pushed);
  try {
    if (p.data.valid()) data = p.data.get();
  } catch (const InputError& e) {
    throw InputError("worker " + std::to_string(o_.id) + ": " + e.what());
  }
  std::int64_t rows = 0;
  for (auto& [home, m] : p.fresh) {
    auto& piece = pieces_[home];
    piece.first = m;
    piece.second = std::move(data.at(home));
    if (!all_to_all(*part_).add_extra(home, m.begin, m.rows, piece.second))
      throw InputError("this workload cannot compute another member's rows");
    rows += m.rows;
  }
  if (rows > 0) log["moved_in"] = {{"rows", rows}, {"waited_s", secs(t0, Clock::now())}, {"iteration", t}};
}

// Returning: the coordinator sends this node the round's decision although
// it does not count it yet; it applies it to stay in step.
RoundOutcome Incarnation::central_round(std::int64_t t, SyncStats& st, double& computing) {
  const auto t0 = Clock::now();
  Contribution mine;
  if (!recovering_) mine.data = part_->contribute(t);
  computing = computed_since(t0, t);
  Contribution decision = node_.exchange_with_coordinator(
      t, recovering_ ? nullptr : &mine, [&](std::span<const std::byte> b) { star(*part_).validate_decision(b); },
      [&](const Received& r) { on_message(r); }, st);
  view_ = decision.view;
  const auto t1 = Clock::now();
  RoundOutcome out = star(*part_).apply(t, decision.data);
  out.log["applying_s"] = secs(t1, Clock::now());
  return out;
}

// The coordinator says when it is over; wait for that (bounded), so a
// worker that finished on its own rule does not leave early.
void Incarnation::wait_done() {
  if (done_) return;
  try {
    expect_msg(node_, kDone, Ms(o_.timeout_ms * 2), "the coordinator's done");
  } catch (const JobDone&) {
  } catch (const InputError&) {
  }
}

// The new incarnation goes into the snapshot on disk too; when the disk
// refuses (full, or gone), the worker still rejoins with the snapshot it
// holds in memory: only a later restart from disk would resume with the
// older incarnation (and be fenced until it rejoins afresh).
void save_incarnation(const WorkerOptions& o, std::optional<Snapshot>& snap, std::uint32_t incarnation) {
  snap->incarnation = incarnation;
  if (o.snapshot_dir.empty()) return;
  try {
    save_snapshot(snapshot_path(o.snapshot_dir, o.id), *snap, o.snapshot_rows);
  } catch (const std::exception& e) {
    log::warn("accel worker " + std::to_string(o.id)) << "could not update the snapshot (" << e.what()
              << "); rejoining with the one in memory";
  }
}

std::optional<Snapshot> load_own_snapshot(const WorkerOptions& o) {
  if (o.snapshot_dir.empty()) return std::nullopt;
  std::filesystem::create_directories(o.snapshot_dir);
  try {
    auto snap = load_snapshot(snapshot_path(o.snapshot_dir, o.id));
    if (snap && snap->job == o.job) return snap;  // else another job's: stale
  } catch (const InputError& e) {
    log::warn("accel worker") << "discarding a damaged snapshot: " << e.what();
  }
  return std::nullopt;
}

}  // namespace

// The job token of a worker not given --job (job_token.hpp): --job-file,
// ACCEL_JOB_TOKEN, or the coordinator's default file for its port; a file
// the coordinator has not written yet (a launcher starts every rank at
// once) is waited for until `deadline`.
std::uint64_t find_job_token(const WorkerOptions& o, Clock::time_point deadline) {
  if (o.job != 0) return o.job;
  if (o.job_file.empty())
    if (const auto env = env_job_token()) return *env;
  const std::string path = o.job_file.empty() ? default_job_file(split_addr(o.coordinator).second) : o.job_file;
  for (;;) {
    if (const auto t = read_job_file(path)) return *t;
    if (Clock::now() >= deadline)
      throw InputError("no job token: " + path + " does not exist (give --job, --job-file or ACCEL_JOB_TOKEN)");
    sleep_for(Ms(100));
  }
}

struct WorkerRun::Impl {
  const WorkerOptions given;  // as the caller gave them
  WorkerOptions o;            // the job token resolved
  Clock::time_point token_deadline, join_deadline;
  Log log;
  const Registry reg = Registry::discover_all();
  std::optional<Snapshot> snap;
  std::uint32_t incarnation = 1;
  // Since when the job's coordinator has been out of reach (unset: it is
  // not); reset whenever an incarnation gets through to it.
  std::optional<Clock::time_point> lost_since;
  bool ever_reached = false, reached = false;
  bool leaving = false;  // WorkerRun::leave
  int evictions = 0;  // evictions and rejected resumes so far
  std::unique_ptr<Incarnation> inc;
  std::optional<int> code;  // set: this worker is done
  bool begun = false;

  Impl(const WorkerOptions& g) : given(g), o(g), log(g.log_json) {}
  // At the first step, not in the constructor: a library's worker waits
  // for its coordinator's token file only when it first takes part.
  void begin() {
    token_deadline = Clock::now() + Ms(std::max(o.timeout_ms * 10, 30000));
    o.job = find_job_token(given, token_deadline);
    snap = o.id == 0 ? std::nullopt : load_own_snapshot(o);  // id 0: a new member, nothing to resume
    incarnation = snap ? snap->incarnation + 1 : 1;
    join_deadline = Clock::now() + Ms(std::max(o.timeout_ms * 10, 30000));
    begun = true;
  }
  // No id (elastic membership): the coordinator gives one.
  void assign_id() {
    if (o.id != 0) return;
    const auto [ip, port] = split_addr(o.coordinator);
    o.id = boot_assign_id(ip, port, o.job, Ms(std::max(o.timeout_ms * 5, 5000)));
    log::info("accel worker") << "joining as worker " << o.id;
  }
  // A refused token read from a file may be an earlier job's on the same
  // port until this job's coordinator writes its own: read it again and
  // say to retry, unless the token was given or the deadline has passed.
  bool reread_token() {
    if (given.job != 0 || Clock::now() >= token_deadline) return false;
    sleep_for(Ms(200));
    o.job = find_job_token(given, token_deadline);
    return true;
  }
  bool waited_out() const { return Clock::now() - *lost_since >= Ms(o.coordinator_timeout_ms); }
  std::optional<int> recover();
};

// What the last incarnation's failure means: an exit code (this worker is
// done), or nothing (a new incarnation tries again).
std::optional<int> WorkerRun::Impl::recover() {
  const std::string me = "accel worker " + std::to_string(o.id);
  try {
    throw;
  } catch (const JobDone&) {
    return kExitOk;

  } catch (const NotListening& e) {
    // Before the job: the launcher started this worker first. During it:
    // the coordinator is down, and may come back (--resume) within
    // --coordinator-timeout.
    if (reached) lost_since.reset();
    if (!lost_since && (reached || ever_reached)) lost_since = Clock::now();
    if (lost_since ? waited_out() : Clock::now() >= join_deadline) {
      log::error(me) << "no coordinator at " << o.coordinator << " (" << e.what() << ")"
                     << (lost_since ? " within --coordinator-timeout" : "") << "; exiting";
      return kExitLostJob;
    }
    sleep_for(Ms(200));
  } catch (const CoordinatorGone& e) {
    if (leaving) return kExitOk;  // nothing to rejoin for
    ever_reached = true;
    // The endpoint failed. That is also what a worker stopped past the
    // keepalive finds (the coordinator closed on it): try to rejoin, once
    // or for --coordinator-timeout; a coordinator that is really gone
    // refuses the connection.
    if (reached) lost_since.reset();
    if (!snap || (lost_since && waited_out())) {
      log::error(me) << e.what() << "; exiting";
      return kExitLostJob;
    }
    if (!lost_since) lost_since = Clock::now();
    save_incarnation(o, snap, ++incarnation);
    log::info(me) << e.what() << "; trying to rejoin as incarnation " << incarnation;
  } catch (const Evicted& e) {
    if (leaving) return kExitOk;
    ever_reached = true;
    if (evictions++ >= 5 || !snap) {
      log::error(me) << e.what() << "; " << (snap ? "could not rejoin" : "no task to resume") << "; exiting";
      return kExitLostJob;
    }
    log::info(me) << e.what() << "; rejoining as incarnation " << incarnation + 1;
    save_incarnation(o, snap, ++incarnation);
  } catch (const JoinMidJob& j) {
    // No snapshot, the job running: its task becomes this worker's
    // snapshot (rows fetched again), and it rejoins as a resuming worker.
    Snapshot s;
    s.job = o.job;
    s.id = o.id;
    s.task = decode_task(j.task, Limits{});
    snap = std::move(s);
    save_incarnation(o, snap, ++incarnation);
    log::info(me) << "the job is running; joining it with its task as incarnation " << incarnation;
  } catch (const Rejected& e) {
    // A rejected resume: the snapshot belongs to a job that is over (or to
    // an earlier job with the same token). Discard it and join afresh,
    // once: a fresh join that is rejected too ends here.
    if (!snap) throw InputError(e.what());
    if (!o.snapshot_dir.empty()) std::filesystem::remove(snapshot_path(o.snapshot_dir, o.id));
    log::info(me) << "stale snapshot discarded; joining afresh";
    snap.reset();
    ++incarnation;
    ++evictions;
  }
  return std::nullopt;
}

WorkerRun::WorkerRun(const WorkerOptions& given) {
  if (given.timeout_ms < 1) throw InputError("--timeout-ms must be positive");
  impl_ = std::make_unique<Impl>(given);
}

WorkerRun::~WorkerRun() = default;

bool WorkerRun::step() {
  Impl& w = *impl_;
  if (!w.begun) w.begin();
  while (!w.code) {
    try {
      if (!w.inc) {
        w.assign_id();
        w.reached = false;
        w.inc = std::make_unique<Incarnation>(w.o, w.incarnation, w.snap, w.log, w.reg, w.reached, w.leaving);
        w.inc->start();
      }
      if (w.inc->step()) return true;
      w.inc.reset();
      if (!w.o.snapshot_dir.empty()) std::filesystem::remove(snapshot_path(w.o.snapshot_dir, w.o.id));
      w.code = kExitOk;
    } catch (const TokenRefused& e) {
      w.inc.reset();
      if (!w.reread_token()) throw InputError(e.what());
    } catch (...) {
      w.inc.reset();
      w.code = w.recover();
    }
  }
  return false;
}

std::uint32_t WorkerRun::id() {
  Impl& w = *impl_;
  if (!w.begun) w.begin();
  while (w.o.id == 0) {
    try {
      w.assign_id();
    } catch (const NotListening& e) {  // a launcher started this worker first
      if (Clock::now() >= w.join_deadline)
        throw InputError("accel worker: no coordinator at " + w.o.coordinator + " (" + e.what() + ")");
      sleep_for(Ms(200));
    } catch (const TokenRefused&) {
      if (!w.reread_token()) throw;
    }
  }
  return w.o.id;
}

int WorkerRun::exit_code() const { return impl_->code.value_or(kExitOk); }

void WorkerRun::leave() { impl_->leaving = true; }

int run_worker(const WorkerOptions& o) {
  WorkerRun run(o);
  while (run.step()) {
  }
  return run.exit_code();
}

}  // namespace accel::cluster
