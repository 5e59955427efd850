// The coordinator: joins the workers, partitions the rows by measured speed (Algorithm 1 of [SysInfo]), distributes tasks and data, runs the rounds
// with its own partition as a member, and ends the job. One method per phase.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <set>

#include "accel/error.hpp"
#include "accel/log.hpp"
// rebalance(): Algorithm 1 of [SysInfo]
#include "accel/perf_model.hpp"
#include "checkpoint.hpp"
#include "job_token.hpp"
#include "moves.hpp"
#include "rates.hpp"
#include "session.hpp"
#include "snapshot.hpp"

namespace accel::cluster {
namespace {

using transport::Received;

class Coordinator {
 public:
  Coordinator(const CoordinatorOptions& o, bool write_token, Job& job, std::optional<Checkpoint> resume)
      : o_(o), write_token_(write_token), job_(job), workload_(find_workload(job.workload())), log_(o.log_json),
        registry_(Registry::discover_all()), local_{registry_, o.device, {}}, N_(o.workers),
        M_(std::max(o.workers, o.max_workers)),
        resume_(std::move(resume)) {}

  ~Coordinator() {
    if (!token_file_.empty()) std::remove(token_file_.c_str());  // this job's; the next draws its own
  }

  // Listens, then joins, measures, partitions and distributes (or
  // resumes from the checkpoint).
  void start() {
    t_start_ = Clock::now();
    if (resume_) {
      job_.surveyed(N_, {});  // the input counted here, as the launch's workers counted it
      check_resumable();
    }
    listen();
    if (resume_) {
      resume();
    } else {
      join();
      survey();
      partition();
      distribute();
      for (int i = 0; i <= N_; ++i) active_.insert(i);
      checkpoint(0, true);
      for (const auto& [id, r] : std::exchange(early_joiners_, {})) on_hello(r);
    }
    next_t_ = first_round_;
  }
  bool step();
  int finish();

 private:
  void listen();
  void join();
  void on_join_message(const Received& r);
  void survey();
  std::map<std::uint32_t, Received> early_joiners_;  // hellos of elastic ids before round 1, answered after
  std::optional<Admission> admitted(const Received& r, bool& resume);
  void say_refusals();
  void partition();
  Task task_for(std::uint32_t w) const;
  transport::CompletionRef push(std::uint32_t w, std::span<const std::byte> ticket, std::span<const std::byte> data);
  std::uint64_t digest_of(std::int64_t begin, std::int64_t end) const;
  std::vector<transport::MacKey> pair_keys_of(std::uint32_t w) const;
  void distribute();
  void push_rows(std::uint32_t w, std::set<std::uint32_t>& ready);
  std::unique_ptr<Partition> open_own();
  void welcome_back(std::int64_t t);
  void checkpoint(std::int64_t t, bool must);
  void check_resumable();
  void resume();
  std::set<std::uint32_t> regather();
  RoundOutcome all_to_all_round(std::int64_t t, const Membership& view, SyncStats& st);
  RoundOutcome central_round(std::int64_t t, const Membership& view, SyncStats& st);
  RoundOutcome gathered_round(std::int64_t t, const Membership& view, SyncStats& st);
  Contribution own_contribution(std::int64_t t, const Membership& view);
  std::map<std::uint32_t, Bytes> count_round(std::int64_t t, const Membership& view,
                                             const std::map<std::uint32_t, Contribution>& got, SyncStats& st,
                                             const std::set<std::uint32_t>* summed = nullptr);
  std::map<std::uint32_t, Contribution> gather_round(std::int64_t t, const Membership& view, SyncStats& st,
                                                     std::set<std::uint32_t>& summed);
  void send_decision(std::int64_t t, const Bytes& payload, const Membership& decided);
  // The tree (Task::tree): the members of the last decision's view, whose
  // tree carries the next decision down; the members asked for their own
  // contribution this round; and the last decision, for a member that
  // asks for it again (its parent died before passing it on).
  std::vector<std::uint32_t> tree_active_;
  std::set<std::uint32_t> asked_;
  std::pair<std::int64_t, Bytes> last_decision_{-1, {}};
  bool gathered() const {
    return workload_.exchange() == Exchange::AllToAll && workload_.gathers() && o_.gather_from > 0 &&
           M_ + 1 >= o_.gather_from;
  }
  bool tree() const { return gathered() && o_.tree_from > 0 && M_ + 1 >= o_.tree_from; }
  void on_message(const Received& r);
  void on_hello(const Received& r);
  void on_ticket(const Received& r);
  void on_move_ticket(const Received& r);
  void on_resync(const Received& r);
  void on_need(const Received& r);
  void confirm(std::int64_t t, const Membership& view);
  Bytes confirmation(std::int64_t t) const;
  void on_confirm_ask(const Received& r);
  void on_leave(const Received& r);
  void depart(std::uint32_t w, std::int64_t t);
  bool survivors_take() const;
  void tell_counted(std::uint32_t to, std::int64_t t, std::uint32_t q);
  void keep_counted(std::int64_t t, const std::map<std::uint32_t, Bytes>& members, const Membership& view,
                    const std::vector<std::uint32_t>& evicted);
  std::vector<std::uint32_t> evict_rejoined(const Membership& view, SyncStats& st);
  bool take_over(std::uint32_t q, std::int64_t t);
  using Ranges = std::vector<std::pair<std::int64_t, std::int64_t>>;  // (begin, rows)
  Ranges ranges_of(std::uint32_t q) const;
  std::vector<Move> plan_moves() const;
  std::int64_t most_rows(std::uint32_t w) const;
  void announce_moves(Contribution& mine, std::int64_t t);
  void commit_plan(Contribution& mine, std::int64_t t);
  void lose(std::uint32_t q);
  void apply_moves(std::int64_t t);
  bool moved(std::uint32_t w) const;
  void apply_trims(const std::vector<std::pair<std::uint32_t, std::int64_t>>& trims, std::int64_t t);
  void measure(const std::map<std::uint32_t, Contribution>& got, std::int64_t t);
  bool checkpointing() const { return !o_.checkpoint_dir.empty(); }
  bool known_worker(std::uint32_t id) const { return id >= 1 && id <= static_cast<std::uint32_t>(M_); }
  Membership membership() const {
    return {{active_.begin(), active_.end()}, {inactive_.begin(), inactive_.end()},
            {recovering_.begin(), recovering_.end()}};
  }

  const CoordinatorOptions o_;  // its job token resolved (run_coordinator)
  bool write_token_ = false;    // drawn here: handed to workers in a file
  std::string token_file_;      // that file, removed when the job ends
  Job& job_;
  const Workload& workload_;
  Log log_;
  Registry registry_;
  Local local_;
  const int N_;  // workers at the start
  const int M_;  // the most ids: those above N_ are given to workers that join a running job
  std::optional<Checkpoint> resume_;  // --resume: the checkpoint the job continues from
  Bytes params_;                      // every task's (the checkpoint's on a resume)
  std::string listen_address_;        // ADDR:PORT as bound
  std::int64_t first_round_ = 1;
  std::int64_t next_t_ = 1;  // the round step() runs next
  bool over_ = false;        // the last round ran
  Clock::time_point last_checkpoint_;
  double checkpoint_cost_ = 0;        // seconds the last checkpoint took (Young's C)
  bool checkpoint_failed_ = false;
  std::optional<std::uint64_t> fingerprint_;  // of the input, taken once
  std::unique_ptr<Node> node_;
  std::unique_ptr<FrontDoor> boot_;  // the front door (bootstrap.hpp); no UCX listener
  const JobSecret secret_ = random_job_secret();  // the workers' pair keys (never sent)
  std::map<std::uint32_t, std::vector<std::byte>> address_;
  std::map<std::uint32_t, double> capability_;
  std::map<std::uint32_t, Bytes> surveys_;  // each launch worker's count of its split (Job::survey)
  std::vector<std::int64_t> loads_, begin_;
  std::vector<std::int64_t> kept_;  // rows each worker computes now (its partition's first ones; the coordinator the rest)
  RateCollector rates_;
  std::map<std::uint32_t, std::int64_t> room_;  // by worker: memory room it last told (Contribution::room)
  DriftPolicy drift_;  // 20% over the mean for 3 rounds
  SwingDamper swings_;
  std::vector<std::pair<std::uint32_t, std::int64_t>> pending_trims_;
  std::unique_ptr<Partition> own_;
  std::set<std::uint32_t> active_, inactive_, recovering_, resynced_, taken_over_;
  std::set<std::uint32_t> rejoined_active_;  // said hello while counted in this round (evict_rejoined)
  std::set<std::uint32_t> leaving_;  // asked to leave (kLeave), still active
  std::map<std::uint32_t, Ranges> stood_;  // the rows of each member stood in for
  // --pull: rows workers compute beyond their own (Move): the plan in
  // effect, the one sent and not yet in effect (plan_id_, reading_,
  // announced_from_), and whether membership changed since the last plan.
  std::vector<Move> moves_;
  std::optional<std::vector<Move>> announced_;  // a plan sent, not in effect yet
  std::uint64_t plan_id_ = 0;                   // its id
  std::set<std::uint32_t> reading_;             // the workers still reading the rows it gives them
  std::int64_t announced_from_ = 0;             // once committed: the round it takes effect (else 0)
  bool replan_ = false;
  std::vector<std::uint32_t> last_active_;  // the last all-to-all round's active members
  std::map<std::uint32_t, Clock::time_point> returned_at_;
  std::int64_t current_t_ = 0, rounds_done_ = 0;
  Membership current_view_;
  // What this node counted for each member in the last rounds (all-to-all),
  // and the members that asked for it before their round was settled.
  std::map<std::int64_t, std::map<std::uint32_t, Bytes>> counted_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> needs_;  // (asker, member) of current_t_
  std::set<std::uint32_t> confirm_asks_;  // Job::confirmed: members that asked for current_t_'s confirmation
  bool converged_ = false;
  bool rounds_started_ = false;
  std::int64_t all_lost_at_ = 0;  // the first round in which no worker counted (0: never)
  Clock::time_point t_start_;
  double waiting_ = 0, sharing_ = 0, computing_ = 0;
  double counting_ = 0;          // the workers' count of the input (Job::survey)
  Clock::time_point t_probed_;  // every worker joined: the probes out
};

void Coordinator::listen() {
  if (N_ < 1) throw InputError("--workers must be at least 1");
  if (o_.timeout_ms < 1) throw InputError("--timeout-ms must be positive");
  if (checkpointing()) {
    std::error_code ec;
    std::filesystem::create_directories(o_.checkpoint_dir, ec);
    if (ec) throw InputError("--checkpoint-dir " + o_.checkpoint_dir + ": " + ec.message());
  }
  auto topts = transport_options(o_, 0, 1);
  topts.block_bytes = o_.block_size;
  topts.protocol = transport::parse_bulk_protocol(o_.protocol);
  node_ = std::make_unique<Node>(topts, Ms(o_.timeout_ms), Limits{});
  const auto [ip, port] = split_addr(o_.listen);
  if (o_.max_workers != 0 && o_.max_workers < N_)
    throw InputError("--max-workers " + std::to_string(o_.max_workers) + " is below --workers " + std::to_string(N_));
  boot_ = open_front_door(ip, port, o_.job, static_cast<std::uint32_t>(N_), node_->net().worker_address(),
                          static_cast<std::uint32_t>(M_));
  const auto bound = boot_->port();
  listen_address_ = ip + ":" + std::to_string(bound);
  if (write_token_) {
    token_file_ = o_.job_file.empty() ? default_job_file(bound) : o_.job_file;
    write_job_file(token_file_, o_.job);
    log::info("accel coordinator") << (resume_ ? "the job token is again in " : "a new job token is in ") << token_file_;
  }
  if (!o_.rendezvous_file.empty()) write_rendezvous(o_.rendezvous_file, {listen_address_, o_.job});
  log::info("accel coordinator") << "listening on " << ip << ":" << bound << " for " << N_ << " workers";
  log_.write({{"event", "listening"}, {"address", ip + ":" + std::to_string(bound)}});
}

// Connections the front door refused (a wrong token, bytes that are not a
// worker's), said from this thread.
void Coordinator::say_refusals() {
  for (const auto& line : boot_->refusals()) log::warn("accel coordinator") << line;
}

// A hello counts only with the ticket of a handshake its sender passed; the
// sender is then reached at the address it authenticated with.
std::optional<Admission> Coordinator::admitted(const Received& r, bool& resume) {
  const auto& h = r.message.header;
  std::int64_t it = 0;
  Ticket ticket{};
  try {
    decode_hello(r.message.payload, resume, it, ticket);
  } catch (const InputError& e) {
    log::warn("accel coordinator") << "dropped hello from " << h.sender << ": " << e.what();
    return std::nullopt;
  }
  auto a = boot_->admit(h.sender, ticket);
  if (!a || a->resume != resume) {
    log::warn("accel coordinator") << "dropped hello from " << h.sender << ": no handshake of its own";
    return std::nullopt;
  }
  // A hello for a member that still counts, and whose endpoint is alive,
  // is someone else holding the token: the member is not replaced.
  if (rounds_started_ && (active_.count(h.sender) || recovering_.count(h.sender)) && node_->reachable(h.sender)) {
    log::warn("accel coordinator") << "dropped a hello for worker " << h.sender << ", which still counts";
    return std::nullopt;
  }
  node_->admit_incarnation(h.sender, h.incarnation);
  node_->set_key(h.sender, a->key);  // this handshake's: the sender is bound to it from here on
  return a;
}

// Every worker says hello and measures its speed for this job's probe. The
// wait for worker processes to start is the launcher's cost, not the job's
// (Spark's executor start-up is not in its time either); the coordinator
// measures itself once every worker has joined, while the workers measure
// themselves on their own cores.
void Coordinator::join() {
  address_[0] = node_->net().worker_address();
  const auto t_waiting = Clock::now();
  const auto deadline = Clock::now() + Ms(o_.join_timeout_ms);
  while (static_cast<int>(capability_.size()) < N_ + 1) {
    const auto left = ms_until(deadline);
    if (left.count() <= 0)
      throw InputError("only " + std::to_string(address_.size() - 1) + " of " + std::to_string(N_) +
                       " workers joined within " + std::to_string(o_.join_timeout_ms) + " ms");
    if (auto r = node_->receive(std::min(left, Ms(100)))) on_join_message(*r);
    say_refusals();
    if (static_cast<int>(address_.size()) == N_ + 1 && !capability_.count(0)) {
      waiting_ = secs(t_waiting, Clock::now());
      const auto t0 = t_probed_ = Clock::now();
      // A coordinator that computes no share gets none (capability 0).
      capability_[0] = N_ == 0 || job_.coordinator_shares() ? workload_.measure(job_.probe(), local_) : 0.0;
      log_.write({{"event", "probe"}, {"seconds", secs(t0, Clock::now())}, {"rows_per_s", capability_[0]}});
    }
  }
}

void Coordinator::on_join_message(const Received& r) {
  const auto& h = r.message.header;
  if (h.type == kHello) {
    // An id the door gave beyond --workers (elastic) joins the running
    // job once it runs: counted here, it stood in for a worker of the
    // launch, the job started without that one, and then found it
    // unreachable.
    if (h.sender > static_cast<std::uint32_t>(N_) && h.sender <= static_cast<std::uint32_t>(M_)) {
      early_joiners_.insert_or_assign(h.sender, r);  // its last hello (it says it again every few seconds)
      return;
    }
    bool resume = false;
    const auto a = admitted(r, resume);
    if (!a) return;
    node_->ensure_peer(h.sender, a->address);  // not again: closing an endpoint fails the peer's matched one
    // Nothing can be resumed before the job starts: a resuming worker holds
    // a snapshot of an earlier job with the same token, which it discards
    // when rejected, and then joins afresh.
    if (resume || address_.count(h.sender)) {
      log::warn("accel coordinator") << "rejected " << (resume ? "a resume" : "hello") << " from id " << h.sender;
      node_->send(h.sender, kReject, 0, {});
      return;
    }
    address_[h.sender] = a->address;
    Out probe;  // {workload name, what to measure, what to count}
    probe.text(job_.workload());
    probe.bytes(job_.probe());
    probe.bytes(job_.survey(h.sender, N_));
    node_->send(h.sender, kProbe, 0, probe.b);
  } else if (h.type == kTicket && known_worker(h.sender)) {
    // Data asked for by a worker resuming a snapshot (see the hello above).
    if (const auto addr = boot_->address_of(h.sender)) {
      log::warn("accel coordinator") << "rejected a resume from id " << h.sender << " (no job running yet)";
      node_->ensure_peer(h.sender, *addr);
      if (const auto key = boot_->key_of(h.sender)) node_->set_key(h.sender, *key);
      node_->send(h.sender, kReject, 0, {});
    }
  } else if (h.type == kCapability && address_.count(h.sender)) {
    try {
      In in(r.message.payload);  // {rows per second, its count (the survey)}
      const double rate = in.get<double>();
      Bytes survey = in.bytes(node_->limits().max_data);
      in.end();
      capability_[h.sender] = rate;
      surveys_[h.sender] = std::move(survey);
    } catch (const InputError& e) {
      log::warn("accel coordinator") << "dropped capability from " << h.sender << ": " << e.what();
    }
  } else if (h.type == kFailed && address_.count(h.sender)) {
    // The worker could not count its split (unreadable, another file): the
    // job cannot be the whole input's.
    In in(r.message.payload);
    throw InputError("worker " + std::to_string(h.sender) + ": " + in.text(4096));
  }
}

// The workers' counts of the input (Job::survey), given to the job before
// it is partitioned.
// counting_: from the probes to the last answer (the workers measure and
// count together).
void Coordinator::survey() {
  const auto t0 = Clock::now();
  job_.surveyed(N_, surveys_);
  if (std::none_of(surveys_.begin(), surveys_.end(), [](const auto& s) { return !s.second.empty(); })) return;
  counting_ = secs(t_probed_, Clock::now());
  log_.write({{"event", "input_counted"}, {"splits", N_}, {"rows", job_.units()}, {"seconds", counting_},
              {"numbering_s", secs(t0, Clock::now())}});
}

// Partition sizes follow measured capability (Algorithm 1 of [SysInfo], starting from the uniform split [Antimatroid] uses).
void Coordinator::partition() {
  params_ = job_.params();
  const std::int64_t n = job_.units();
  loads_.assign(N_ + 1, n / (N_ + 1));
  loads_.back() += n - std::accumulate(loads_.begin(), loads_.end(), std::int64_t{0});
  std::vector<double> caps;
  for (int i = 0; i <= N_; ++i) caps.push_back(capability_[i]);
  loads_ = rebalance(loads_, caps, 0.0);
  begin_.assign(N_ + 1, 0);
  for (int i = 1; i <= N_; ++i) begin_[i] = begin_[i - 1] + loads_[i - 1];
  // Ids that may join later own no rows of their own (rows move to them).
  loads_.resize(M_ + 1, 0);
  begin_.resize(M_ + 1, n);
  kept_ = loads_;
  log_.write({{"event", "partition"}, {"rows", loads_}, {"capability_rows_per_s", caps}});
  job_.partitioned(begin_, loads_);
}

// Rows to worker w's buffer (its ticket), each block's bytes handed back to
// the job once delivered.
transport::CompletionRef Coordinator::push(std::uint32_t w, std::span<const std::byte> ticket,
                                           std::span<const std::byte> data) {
  return node_->net().push(node_->endpoint(w), ticket, data.data(), data.size(), transport::MemoryType::Host,
                           transport::BulkProtocol::Auto, job_.push_window(),
                           [this, data](std::size_t off, std::size_t n) { job_.pushed(data.subspan(off, n)); });
}

Task Coordinator::task_for(std::uint32_t w) const {
  Task task;
  task.workload = job_.workload();
  task.self = w;
  task.units = job_.units();
  task.begin = begin_[w];
  task.rows = loads_[w];
  task.max_rounds = job_.max_rounds();
  task.data_bytes = job_.data_bytes(begin_[w], begin_[w] + loads_[w]);
  if (!o_.input.empty()) task.input = std::filesystem::absolute(o_.input).string();
  task.pull = o_.pull;
  task.gathered = gathered();
  task.tree = tree();
  task.confirmed = job_.confirmed();
  if (o_.pull && w != 0) task.digest = digest_of(begin_[w], begin_[w] + loads_[w]);
  task.params = params_;
  for (const auto& [id, a] : address_)
    if (id != w) task.peers.push_back({id, a});
  task.pair_keys = pair_keys_of(w);
  return task;
}

// Worker w's keys with every other worker (bootstrap.hpp); entry 0 and its
// own stay zero.
std::vector<transport::MacKey> Coordinator::pair_keys_of(std::uint32_t w) const {
  std::vector<transport::MacKey> keys(static_cast<std::size_t>(M_) + 1, transport::MacKey{});
  for (int j = 1; j <= M_; ++j)
    if (static_cast<std::uint32_t>(j) != w) keys[j] = pair_key(secret_, w, static_cast<std::uint32_t>(j));
  return keys;
}

// The task, then the data pushed into the worker's buffer (or read by the
// worker itself with --pull); workers that got theirs say so while later
// ones are still receiving.
void Coordinator::distribute() {
  const auto t_share = Clock::now();
  std::set<std::uint32_t> ready;
  for (int w = 1; w <= N_; ++w) {
    const Task task = task_for(w);
    if (!node_->send(w, kTask, 0, encode(task))) throw InputError("worker " + std::to_string(w) + " is unreachable");
    if (!o_.pull && task.data_bytes > 0) push_rows(w, ready);
  }
  while (static_cast<int>(ready.size()) < N_)
    ready.insert(expect_msg(*node_, kReady, Ms(o_.join_timeout_ms), "workers to be ready", [](const Received& r) {
                   if (r.message.header.type != kFailed) return;
                   // A member that cannot read its rows: the job stops here,
                   // with its reason (a missing or changed input), before any
                   // output is written.
                   std::string why = "worker " + std::to_string(r.message.header.sender) + " cannot read its rows";
                   try {
                     why = In(r.message.payload).text(4096);
                   } catch (const InputError&) {
                   }
                   throw InputError(why);
                 }).message.header.sender);
  sharing_ = secs(t_share, Clock::now());
  own_ = open_own();
  for (int w = 1; w <= N_; ++w) node_->send(w, kStart, 0, {});
  // Every member starts with every launch member in its view, and so
  // knows its place in the first round's tree: the first decision goes
  // down it too. (Sent straight to all, 1,024 decisions of 65 kB kept the
  // coordinator's link busy for half a second, and members that got theirs
  // last held up the next two rounds past a quarter timeout.)
  if (tree())
    for (std::uint32_t q = 0; q <= static_cast<std::uint32_t>(N_); ++q) tree_active_.push_back(q);
}

std::unique_ptr<Partition> Coordinator::open_own() {
  const Task task = task_for(0);
  if (auto own = job_.open_own(task, local_)) return own;
  return workload_.open(task, job_.data(begin_[0], begin_[0] + loads_[0]), local_);
}

void Coordinator::push_rows(std::uint32_t w, std::set<std::uint32_t>& ready) {
  auto note_ready = [&](const Received& r) {
    if (r.message.header.type == kReady) ready.insert(r.message.header.sender);
  };
  const Received t =
      expect_msg(*node_, kTicket, Ms(o_.join_timeout_ms), "worker " + std::to_string(w) + "'s ticket", note_ready);
  const auto data = job_.data(begin_[w], begin_[w] + loads_[w]);
  const auto t0 = Clock::now();
  auto c = push(w, t.message.payload, data);
  if (!node_->net().wait(c, Ms(o_.join_timeout_ms)) || !c->ok())
    throw InputError("sending rows to worker " + std::to_string(w) + " failed: " + c->error);
  const double s = secs(t0, Clock::now());
  job_.release(begin_[w], begin_[w] + loads_[w]);
  log_.write({{"event", "transfer"}, {"worker", w}, {"bytes", data.size()}, {"block_size", o_.block_size},
              {"protocol", transport::to_string(c->protocol)}, {"seconds", s},
              {"mib_per_s", data.size() / s / (1 << 20)}});
}

// One round; false once the job is over (its rule stopped it, or its last
// round ran): finish() then ends it.
bool Coordinator::step() {
  if (over_ || next_t_ > job_.max_rounds()) {
    over_ = true;
    return false;
  }
  rounds_started_ = true;
  const std::int64_t t = next_t_++;
  say_refusals();
  welcome_back(t);
  const Membership view = membership();
  current_t_ = t;
  current_view_ = view;
  SyncStats st;
  const RoundOutcome out = workload_.exchange() == Exchange::Central ? central_round(t, view, st)
                           : gathered()                                ? gathered_round(t, view, st)
                                                                       : all_to_all_round(t, view, st);
  rounds_done_ = t;
  // Only the coordinator counts, and no one is on the way back.
  if (N_ > 0 && job_.units() > 0 && all_lost_at_ == 0 && active_.size() == 1 && recovering_.empty()) {
    all_lost_at_ = t;
    log::warn("accel coordinator") << "every worker is lost at round " << t << "; "
              << (o_.move_lost_rows ? "the coordinator computes all their rows until they return"
                                    : "their rows are left out until they return (--on-loss drop)");
  }
  nlohmann::json line = {{"iteration", t},
                         {"participant", 0},
                         {"sharing_s", t == 1 ? sharing_ : 0.0},
                         {"computing_s", computing_},
                         {"synchronizing_s", st.notify_seconds + st.wait_seconds},
                         {"barrier_wait_s", st.wait_seconds},
                         {"members", view_json(view)},
                         {"evicted", st.evicted}};
  line.update(out.log);
  log_.write(line);
  if (out.stop) {
    converged_ = true;
    over_ = true;
    return false;
  }
  checkpoint(t, false);
  if (out.last) over_ = true;
  return true;
}

// Membership at the start of round t: the plan of moves due now takes
// effect, leaving members whose rows are computed elsewhere go, and
// workers that resynced count again with their whole partition (once no
// plan in effect or sent gives their rows to others): the coordinator
// stops standing in for them.
void Coordinator::welcome_back(std::int64_t t) {
  apply_moves(t);
  // Leaving members go once workers compute their rows, or at once where
  // the coordinator stands in; and once the plan made after the leave is
  // in effect, the coordinator stands in for the rows it left them (no
  // worker had room for them: moves.hpp).
  const bool planned = !replan_ && !announced_;
  for (const auto w : std::set<std::uint32_t>(leaving_))
    if (!survivors_take() || ranges_of(w).empty() || planned) depart(w, t);
  for (auto it = resynced_.begin(); it != resynced_.end();) {
    const auto w = *it;
    // Workers compute its rows (or it computed others'): it counts from the
    // round the plan without it is in effect.
    if (moved(w)) {
      ++it;
      continue;
    }
    it = resynced_.erase(it);
    recovering_.erase(w);
    active_.insert(w);
    if (taken_over_.erase(w)) {
      all_to_all(*own_).hand_back(w);
      stood_.erase(w);
      log_.write({{"event", "rows_handed_back"}, {"worker", w}, {"iteration", t}});
    }
    if (kept_[w] != loads_[w]) {  // back with its whole partition
      all_to_all(*own_).drop_extra(w);
      job_.release(begin_[w] + kept_[w], begin_[w] + loads_[w]);
      kept_[w] = loads_[w];
    }
    replan_ = true;
  }
}

// The state after round t, when Young's interval has passed since the last
// checkpoint (always for the first: `must`, and a failure then is an
// error). A later failure (a full disk) is said once and the job goes on:
// a resume then starts from the last checkpoint that was written.
void Coordinator::checkpoint(std::int64_t t, bool must) {
  if (!checkpointing()) return;
  const auto now = Clock::now();
  if (!must && secs(last_checkpoint_, now) < young_interval(checkpoint_cost_, o_.mtbf_s)) return;
  Checkpoint c;
  c.job = o_.job;
  c.workload = job_.workload();
  c.units = job_.units();
  c.workers = static_cast<std::uint32_t>(N_);
  c.listen = listen_address_;
  c.job_file = token_file_;
  if (!fingerprint_) fingerprint_ = job_.fingerprint();
  c.input_fingerprint = *fingerprint_;
  c.options = job_.result_options();
  c.params = params_;
  c.round = t;
  c.state = own_->shared_state();
  c.job_state = job_.saved();
  // The launch's partitions (ids that joined later own no rows).
  c.begin.assign(begin_.begin(), begin_.begin() + N_ + 1);
  c.loads.assign(loads_.begin(), loads_.begin() + N_ + 1);
  c.members = membership();
  c.all_lost_at = all_lost_at_;
  try {
    save_checkpoint(checkpoint_path(o_.checkpoint_dir), c);
  } catch (const InputError& e) {
    if (must) throw;
    if (!checkpoint_failed_) log::warn("accel coordinator") << e.what() << "; the job goes on without it";
    checkpoint_failed_ = true;
    return;
  }
  last_checkpoint_ = Clock::now();
  checkpoint_cost_ = secs(now, last_checkpoint_);
  log_.write({{"event", "checkpoint"}, {"iteration", t}, {"seconds", checkpoint_cost_},
              {"next_in_s", young_interval(checkpoint_cost_, o_.mtbf_s)}});
}

// --resume: the partition, parameters and state of the checkpoint. The
// workers that come back within a few timeouts take the checkpoint's state
// and count from the round after it, all together (a member that returns
// alone first follows a round it does not count, but here no peer could
// answer it: each would be returning too); the coordinator stands in for
// the rows of those that do not come back. The result is the failure-free
// one.
// Before anything starts (nothing is written): a resume must be the same
// job, or it is refused naming what differs (a resume with another --seed
// would run on with the checkpoint's centroids and exit 0; another --k
// would start and fail rounds later).
void Coordinator::check_resumable() {
  const Checkpoint& c = *resume_;
  const std::string where = checkpoint_path(o_.checkpoint_dir) + ": ";
  if (c.workload != job_.workload() || c.units != job_.units() || c.workers != static_cast<std::uint32_t>(N_))
    throw InputError(where + "the checkpoint is of another job (" + c.workload + ", " + std::to_string(c.units) +
                     " rows, " + std::to_string(c.workers) + " workers); give the original input and --workers");
  for (const auto& [name, value] : job_.result_options()) {
    const auto it = std::find_if(c.options.begin(), c.options.end(), [&](const auto& o) { return o.first == name; });
    if (it == c.options.end() || it->second != value)
      throw InputError(where + "the checkpoint's job ran with " + name + " " +
                       (it == c.options.end() ? std::string("unset") : it->second) + ", this one asks for " + value +
                       "; resume with the original options");
  }
  fingerprint_ = job_.fingerprint();  // the next checkpoint's too
  if (c.input_fingerprint != *fingerprint_)
    throw InputError(where + job_.input_name() + " is not the input the checkpoint's job read (same size, other "
                     "contents); give the original input");
  if (c.params != job_.params())
    throw InputError(where + "the job's parameters differ from the checkpoint's (an --init file's centroids, or "
                     "another option that changes the result); resume with the original options");
}

void Coordinator::resume() {
  const Checkpoint& c = *resume_;
  const std::string where = checkpoint_path(o_.checkpoint_dir);
  params_ = c.params;
  begin_ = c.begin;
  loads_ = c.loads;
  loads_.resize(M_ + 1, 0);
  begin_.resize(M_ + 1, job_.units());
  kept_ = loads_;
  all_lost_at_ = c.all_lost_at;
  job_.partitioned(begin_, loads_);
  address_[0] = node_->net().worker_address();
  own_ = open_own();
  own_->adopt(c.state);
  job_.restore(c.job_state, c.state);
  first_round_ = current_t_ = c.round + 1;
  rounds_done_ = c.round;  // a checkpoint of the last round: nothing left but to finish
  active_ = {0};
  log::info("accel coordinator") << "resuming at round " << first_round_ << " from " << where;
  const auto back = regather();
  for (int w = 1; w <= N_; ++w) {
    if (back.count(w)) {
      active_.insert(w);
    } else {
      inactive_.insert(w);
      take_over(static_cast<std::uint32_t>(w), first_round_);
      replan_ = true;
    }
  }
  current_view_ = membership();
  for (auto w : back) {
    Current cur;
    cur.round = first_round_;
    cur.state = own_->shared_state();
    cur.view = current_view_;
    cur.counts = true;
    cur.pair_keys = pair_keys_of(w);
    for (const auto& [id, peer] : address_)
      if (id != w) cur.peers.push_back({id, peer});
    node_->send(w, kCurrent, first_round_, encode(cur));
  }
  log_.write({{"event", "resumed"}, {"iteration", first_round_}, {"workers_back", std::vector(back.begin(), back.end())}});
  last_checkpoint_ = Clock::now();
}

// The workers' hellos after a restart, for a few timeouts (each polls the
// front door while its coordinator is away). A worker that lost its task
// gets it back and says hello again; one that comes later rejoins as any
// returning worker does.
std::set<std::uint32_t> Coordinator::regather() {
  std::set<std::uint32_t> back;
  const auto deadline = Clock::now() + std::min(Ms(o_.join_timeout_ms), Ms(std::max(3 * o_.timeout_ms, 3000)));
  while (static_cast<int>(back.size()) < N_ && Clock::now() < deadline) {
    const auto left = ms_until(deadline);
    auto r = node_->receive(std::clamp(left, Ms(1), Ms(100)));
    say_refusals();
    if (!r) continue;
    const auto& h = r->message.header;
    if (h.type == kTicket) {
      on_ticket(*r);
      continue;
    }
    if (h.type != kHello) continue;
    bool resume = false;
    const auto a = admitted(*r, resume);
    if (!a) continue;
    node_->ensure_peer(h.sender, a->address);
    if (!resume) {
      node_->send(h.sender, kTask, 0, encode(task_for(h.sender)));
      continue;
    }
    address_[h.sender] = a->address;
    back.insert(h.sender);
  }
  return back;
}

void Coordinator::on_message(const Received& r) {
  switch (r.message.header.type) {
    case kHello: return on_hello(r);
    case kTicket: return on_ticket(r);
    case kMoveTicket: return on_move_ticket(r);
    case kResync: return on_resync(r);
    case kNeed: return on_need(r);
    case kConfirm: return on_confirm_ask(r);
    case kLeave: return on_leave(r);
    case kMovesReady:
      try {
        if (In(r.message.payload).get<std::uint64_t>() == plan_id_) reading_.erase(r.message.header.sender);
      } catch (const InputError&) {
      }
      return;
    case kAsk:  // the tree's decision, asked again by a member its parent did not pass it to
      if (r.message.header.iteration == static_cast<std::uint64_t>(last_decision_.first) &&
          (active_.count(r.message.header.sender) || recovering_.count(r.message.header.sender)))
        node_->send(r.message.header.sender, kDecision, last_decision_.first, last_decision_.second);
      return;
    case kContribution:
      // A member this node no longer counts (a late one, or one stopped
      // past the timeout): it must rejoin to count again.
      if (!active_.count(r.message.header.sender) && !recovering_.count(r.message.header.sender))
        node_->send(r.message.header.sender, kEvicted, r.message.header.iteration, {});
      return;
    default: return;
  }
}

// The coordinator's contribution of round t: its partial, the stand-ins
// for lost members, and the engine's word on the round (view, trims,
// moves, new peers).
Contribution Coordinator::own_contribution(std::int64_t t, const Membership& view) {
  Contribution mine;
  const auto t0 = Clock::now();
  all_to_all(*own_).members(view.active);
  mine.data = own_->contribute(t);
  mine.work_rows = all_to_all(*own_).timed() ? all_to_all(*own_).rows() : 0;
  mine.work_seconds = secs(t0, Clock::now());  // its rows' rate: stand-ins aside
  for (auto q : taken_over_) mine.stand_ins.emplace_back(q, all_to_all(*own_).stand_in(q));
  computing_ = secs(t0, Clock::now());
  mine.has_view = true;
  mine.view = view;
  mine.trims = std::move(pending_trims_);
  pending_trims_.clear();
  announce_moves(mine, t);
  for (auto q : view.active)  // new in the view: the others may not reach it yet
    if (q != 0 && !std::count(last_active_.begin(), last_active_.end(), q) && address_.count(q))
      mine.peers.push_back({q, address_.at(q)});
  last_active_ = view.active;
  return mine;
}

RoundOutcome Coordinator::all_to_all_round(std::int64_t t, const Membership& view, SyncStats& st) {
  const Contribution mine = own_contribution(t, view);
  Membership v = view;
  const auto got = node_->sync(
      t, mine, v, [&](std::span<const std::byte> b) { own_->validate(b); }, [&](const Received& r) { on_message(r); },
      st, [&](std::uint32_t q) { return all_to_all(*own_).addressed(q); });
  const auto members = count_round(t, view, got, st);
  keep_counted(t, members, view, st.evicted);
  if (job_.confirmed()) confirm(t, view);
  node_->counted_round(t, all_to_all(*own_).counted(members));
  RoundOutcome out = all_to_all(*own_).absorb(t, members);
  apply_trims(mine.trims, t);
  std::map<std::uint32_t, Contribution> measured = got;
  measured[0].work_rows = mine.work_rows;
  measured[0].work_seconds = mine.work_seconds;
  measure(measured, t);
  return out;
}

// What the coordinator counts in round t: the contributions that came,
// the lost members' stood in for from their rows (a member lost in this
// round included), and none of a member that rejoined while counted.
// summed (the tree): members whose contribution came inside a sum keyed
// by another; a rejoined member counted in the tree keeps its own (no one
// else counts, and it cannot be taken out of a sum) and gets no stand-in.
std::map<std::uint32_t, Bytes> Coordinator::count_round(std::int64_t t, const Membership& view,
                                                        const std::map<std::uint32_t, Contribution>& got,
                                                        SyncStats& st, const std::set<std::uint32_t>* summed) {
  std::map<std::uint32_t, Bytes> members;
  for (const auto& [id, c] : got)
    if (!summed || !summed->count(id)) members[id] = c.data;
  std::set<std::uint32_t> counted;
  const auto rejoined = evict_rejoined(view, st);
  for (auto q : rejoined) {
    if (summed && got.count(q)) counted.insert(q);
    else members.erase(q);  // whatever came of it this round: its stand-in counts
  }
  for (auto q : st.evicted) {
    lose(q);
    replan_ = true;
    // Lost in this round: its contribution of this round too, from its rows.
    if (std::find(view.active.begin(), view.active.end(), q) != view.active.end() && take_over(q, t) &&
        !counted.count(q))
      members[q] = all_to_all(*own_).stand_in(q);
  }
  for (auto q : rejoined) {  // lost, and already on its way back
    inactive_.erase(q);
    recovering_.insert(q);
  }
  return members;
}

// The gathered exchange (Task::gathered): the members' contributions come
// to the coordinator alone, which counts them as an all-to-all round does
// and sends each member one decision: the round's outcome, the engine's
// word (view, trims, moves) and the state the round leads to, which the
// member adopts. A member receives one message a round, whatever P.
RoundOutcome Coordinator::gathered_round(std::int64_t t, const Membership& view, SyncStats& st) {
  const Contribution mine = own_contribution(t, view);
  const auto t0 = Clock::now();
  std::set<std::uint32_t> summed;
  std::map<std::uint32_t, Contribution> got = gather_round(t, view, st, summed);
  got[0] = mine;
  for (const auto& [q, data] : mine.stand_ins) got[q].data = data;
  for (auto q : st.evicted) node_->send(q, kEvicted, t, {});  // it may wait for a decision that will not come
  const auto members = count_round(t, view, got, st, tree() ? &summed : nullptr);
  RoundOutcome out = all_to_all(*own_).absorb(t, members);
  Contribution decision = mine;
  decision.stand_ins.clear();
  if (!tree()) decision.peers.clear();  // the tree's members pass decisions to each other: they need new addresses
  decision.view.active.clear();
  for (auto q : view.active)
    if (std::find(st.evicted.begin(), st.evicted.end(), q) == st.evicted.end()) decision.view.active.push_back(q);
  decision.view.inactive.assign(inactive_.begin(), inactive_.end());
  decision.view.recovering.assign(recovering_.begin(), recovering_.end());
  decision.data = encode_gathered(out, own_->shared_state());
  send_decision(t, encode(decision), decision.view);
  st.notify_seconds = secs(t0, Clock::now()) - st.wait_seconds;
  apply_trims(mine.trims, t);
  measure(got, t);
  return out;
}

// The members' contributions of a gathered round: straight from each
// (the star), or as the tree's sums, each keyed by its least member
// (summed: the others in it), with every member's engine fields.
std::map<std::uint32_t, Contribution> Coordinator::gather_round(std::int64_t t, const Membership& view, SyncStats& st,
                                                                std::set<std::uint32_t>& summed) {
  const Validate validate = [&](std::span<const std::byte> b) { own_->validate(b); };
  const Other other = [&](const Received& r) { on_message(r); };
  if (!tree()) return node_->gather(t, view.active, validate, other, st);
  Node::TreeRound r = node_->gather_tree(t, view.active, validate, other, st);
  for (auto& [q, data] : r.sums) r.heads[q].data = std::move(data);
  summed = std::move(r.covered);
  asked_ = std::move(r.asked);
  return std::move(r.heads);
}

// A gathered round's decision, to every active and recovering member: the
// star's straight from here; the tree's to the coordinator's children,
// which pass it down the tree of the last decision's view (the one the
// members know), and straight to every member that tree would not reach:
// one new in it, one below a member lost or asked this round, a returning
// one.
void Coordinator::send_decision(std::int64_t t, const Bytes& payload, const Membership& decided) {
  std::set<std::uint32_t> to(recovering_.begin(), recovering_.end());
  if (!tree()) {
    for (auto q : active_)
      if (q != 0) to.insert(q);
  } else {
    const auto parents = tree_parents(tree_active_);
    const std::set<std::uint32_t> alive(decided.active.begin(), decided.active.end());
    // Passed down to q: its parent is a member, and q and every member
    // above it neither lost nor asked this round.
    auto passed_down = [&](std::uint32_t q) {
      if (!parents.count(q) || parents.at(q) == 0 || asked_.count(q)) return false;
      for (auto p = parents.at(q); p != 0; p = parents.at(p))
        if (!alive.count(p) || asked_.count(p)) return false;
      return true;
    };
    for (auto q : active_)
      if (q != 0 && !passed_down(q)) to.insert(q);
    tree_active_ = decided.active;
    last_decision_ = {t, payload};
  }
  for (auto q : to) node_->send(q, kDecision, t, payload);
}

// Every participant counts, for each member of round t, what this node
// counted: it says so unasked to the members it evicted (their contribution
// computed from their rows, or nothing), and on request (kNeed) to a member
// that lacks one, which a member dying in mid-send leaves behind.
// Members of this round's view that said hello during it (one that stopped
// counting: a word it needed was lost): they count no contribution of
// theirs from this round on, so this round evicts them like any member
// lost in it, and the coordinator stands in for their rows until they
// are back. Counted no more, they would leave their rows out.
std::vector<std::uint32_t> Coordinator::evict_rejoined(const Membership& view, SyncStats& st) {
  std::vector<std::uint32_t> out;
  for (auto q : rejoined_active_)
    if (std::find(view.active.begin(), view.active.end(), q) != view.active.end()) {
      out.push_back(q);
      if (std::find(st.evicted.begin(), st.evicted.end(), q) == st.evicted.end()) st.evicted.push_back(q);
    }
  rejoined_active_.clear();
  return out;
}

void Coordinator::keep_counted(std::int64_t t, const std::map<std::uint32_t, Bytes>& members, const Membership& view,
                               const std::vector<std::uint32_t>& evicted) {
  counted_[t] = members;
  while (counted_.size() > 2) counted_.erase(counted_.begin());
  for (auto q : evicted)
    if (std::find(view.active.begin(), view.active.end(), q) != view.active.end())
      for (auto w : view.active)
        if (w != 0 && w != q) tell_counted(w, t, q);
  for (const auto& [w, q] : needs_) tell_counted(w, t, q);
  needs_.clear();
}

void Coordinator::tell_counted(std::uint32_t to, std::int64_t t, std::uint32_t q) {
  const auto& m = counted_.at(t);
  const auto it = m.find(q);
  node_->send(to, kCounted, t, encode_counted(q, it == m.end() ? nullptr : &it->second));
}

// Job::confirmed: the ids counted in round t, to every member of its view
// (one evicted in it learns so, and rejoins at once) and to those that
// asked before it was counted.
void Coordinator::confirm(std::int64_t t, const Membership& view) {
  const Bytes payload = confirmation(t);
  std::set<std::uint32_t> to(view.active.begin(), view.active.end());
  to.insert(confirm_asks_.begin(), confirm_asks_.end());
  confirm_asks_.clear();
  for (auto q : to)
    if (q != 0) node_->send(q, kConfirm, t, payload);
}

// A member that lacks round t's confirmation (lost, or asked before the
// round was counted here).
void Coordinator::on_confirm_ask(const Received& r) {
  const auto& h = r.message.header;
  const auto t = static_cast<std::int64_t>(h.iteration);
  if (!job_.confirmed() || (!active_.count(h.sender) && !recovering_.count(h.sender))) return;
  if (counted_.count(t)) node_->send(h.sender, kConfirm, t, confirmation(t));
  else if (t == current_t_) confirm_asks_.insert(h.sender);
}

Bytes Coordinator::confirmation(std::int64_t t) const {
  std::vector<std::uint32_t> ids;
  for (const auto& [q, data] : counted_.at(t)) ids.push_back(q);
  return encode_ids(ids);
}

void Coordinator::on_need(const Received& r) {
  const auto& h = r.message.header;
  const auto t = static_cast<std::int64_t>(h.iteration);
  std::uint32_t q = 0;
  try {
    q = decode_u32(r.message.payload);
  } catch (const InputError&) {
    return;
  }
  if (!active_.count(h.sender) && !recovering_.count(h.sender)) return;
  if (counted_.count(t)) tell_counted(h.sender, t, q);
  else if (t == current_t_ && needs_.size() < static_cast<std::size_t>(4 * (N_ + 1) * (N_ + 1)))
    needs_.emplace_back(h.sender, q);
}

// The re-split announced in this round's contribution takes effect on every
// side from the next round: the worker keeps the first rows of its
// partition, the coordinator computes the rest.
void Coordinator::apply_trims(const std::vector<std::pair<std::uint32_t, std::int64_t>>& trims, std::int64_t t) {
  for (const auto& [w, rows] : trims) {
    if (!active_.count(w)) continue;  // lost meanwhile: stood in for instead
    job_.release(begin_[w] + kept_[w], begin_[w] + loads_[w]);  // what it computed for w until now
    kept_[w] = rows;
    if (rows < loads_[w])
      all_to_all(*own_).add_extra(w, begin_[w] + rows, loads_[w] - rows,
                      job_.data(begin_[w] + rows, begin_[w] + loads_[w]));
    else
      all_to_all(*own_).drop_extra(w);
  }
  if (trims.empty()) return;
  drift_.settle(3);
  log_.write({{"event", "resplit"}, {"iteration", t + 1}, {"kept", kept_}});
}

// [SysInfo]: each member's measured rate (rows per
// second of its work this round); when the slowest runs 20% over the mean for 3 rounds
// (DriftPolicy), Algorithm 1 on the rates gives the new split. Rows move only between a worker and
// the coordinator, which holds every row: a worker keeps up to its partition, the coordinator
// computes the rest of it.
void Coordinator::measure(const std::map<std::uint32_t, Contribution>& got, std::int64_t t) {
  for (const auto& [id, c] : got)
    if (id != 0 && c.room >= 0) room_[id] = c.room;
  // While lost members' rows are moved to workers, the re-split waits: it
  // moves the tails of whole partitions, and a worker's rows are more.
  if (!o_.move_lost_rows || !moves_.empty() || announced_) return;
  std::map<std::uint32_t, double> seconds;
  for (const auto& [id, c] : got)
    if (active_.count(id) && c.work_rows > 0 && c.work_seconds > 0) {
      if (!drift_.settling()) rates_.record(id, static_cast<double>(c.work_rows), c.work_seconds);
      seconds[id] = c.work_seconds;
    }
  if (seconds.empty() || !drift_.drifted(seconds)) return;
  std::vector<std::uint32_t> ids;
  std::vector<std::int64_t> loads;
  std::vector<double> caps;
  for (const auto& [id, s] : seconds) {
    ids.push_back(id);
    loads.push_back(id == 0 ? all_to_all(*own_).rows() : kept_[id]);
    caps.push_back(*rates_.rate(id));
  }
  const auto target = swings_.damp(ids, loads, rebalance(loads, caps, 0.05));
  bool trims = false;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == 0) continue;
    const std::int64_t keep = std::clamp<std::int64_t>(target[i], 0, loads_[ids[i]]);
    if (keep != kept_[ids[i]]) pending_trims_.emplace_back(ids[i], keep);
    trims = trims || keep != kept_[ids[i]];
  }
  if (trims) swings_.moved(ids, loads, target);
  log_.write({{"event", "drift"}, {"iteration", t}, {"ids", ids}, {"rows_per_s", caps}, {"target", target}});
}

// Nothing lost: the coordinator stands in for a lost member (workload.hpp),
// reading its rows from the input a block at a time, from the round it was
// lost until it counts again or (--pull) workers compute its rows. (A
// central workload's job moves a lost member's rows itself.)
bool Coordinator::take_over(std::uint32_t q, std::int64_t t) {
  if (!o_.move_lost_rows || q == 0 || taken_over_.count(q)) return false;
  if (workload_.exchange() != Exchange::AllToAll) return false;
  const Ranges ranges = ranges_of(q);
  if (ranges.empty()) return false;
  auto& own = all_to_all(*own_);
  std::int64_t rows = 0;
  for (const auto& [b, n] : ranges) {
    if (!own.take_over(q, b, n, job_.data(b, b + n), [this](std::int64_t from, std::int64_t to) {
          job_.release(from, to);
        })) {
      own.hand_back(q);
      return false;
    }
    rows += n;
  }
  taken_over_.insert(q);
  stood_[q] = ranges;
  log_.write({{"event", "rows_taken_over"}, {"worker", q}, {"rows", rows}, {"iteration", t}});
  return true;
}

// What member q computes now: its own rows unless workers compute them,
// and the rows moved to it.
Coordinator::Ranges Coordinator::ranges_of(std::uint32_t q) const {
  Ranges r;
  if (const auto own = own_rows(q, begin_[q], kept_[q], moves_); own > 0) r.emplace_back(begin_[q], own);
  for (const auto& m : moves_)
    if (m.by == q) r.emplace_back(m.begin, m.rows);
  return r;
}

// Whether w computes other than its kept rows under the moves in effect
// or announced.
bool Coordinator::moved(std::uint32_t w) const {
  auto in = [&](const std::vector<Move>& l) {
    return own_rows(w, begin_[w], kept_[w], l) != kept_[w] ||
           std::any_of(l.begin(), l.end(), [&](const Move& m) { return m.by == w; });
  };
  return in(moves_) || (announced_ && in(*announced_));
}

// The rows of leaving (--pull: also lost and returning) members, and the
// ends of the rows of workers above their rate target (a joiner's share),
// to the active workers (moves.hpp; the coordinator computes no more than
// its share). Each worker reads its pieces from the input itself
// (--pull), or asks the coordinator to push them from its mapping
// (on_move_ticket).
std::vector<Move> Coordinator::plan_moves() const {
  if (!o_.move_lost_rows || workload_.exchange() != Exchange::AllToAll) return {};
  MovePlanInput in;
  in.begin = begin_;
  in.kept = kept_;
  // A worker not measured yet (one that just joined) counts at the mean
  // of those that are; where none is (rounds too short to time), at its
  // probe, or at the mean of the others' probes (a joiner has none).
  double sum = 0, probes = 0;
  int known = 0, probed = 0;
  for (auto w : active_) {
    if (const auto r = rates_.rate(w)) sum += *r, ++known;
    if (const auto c = capability_.find(w); w != 0 && c != capability_.end()) probes += c->second, ++probed;
  }
  for (auto w : active_)
    if (w != 0 && !leaving_.count(w)) {
      in.workers.push_back(w);
      in.most.push_back(most_rows(w));
      const auto r = rates_.rate(w);
      in.rates.push_back(r                     ? *r
                         : known > 0           ? sum / known
                         : capability_.count(w) ? capability_.at(w)
                         : probed > 0          ? probes / probed
                                               : 1.0);
    }
  // Lost: the leaving members; with --pull also the inactive ones, and
  // the returning ones until they are back in step (resynchronized), when
  // they count from the round the plan without them is in effect. Pushed,
  // a lost member's rows stay with the coordinator, which computes them
  // from its mapping until the member returns (take_over, hand_back): a
  // push of them to a survivor would be undone by the return.
  if (o_.pull) {
    in.lost.assign(inactive_.begin(), inactive_.end());
    for (auto q : recovering_)
      if (!resynced_.count(q)) in.lost.push_back(q);
  }
  in.lost.insert(in.lost.end(), leaving_.begin(), leaving_.end());
  std::sort(in.lost.begin(), in.lost.end());
  auto plan = accel::cluster::plan_moves(in, [this](std::int64_t b, std::int64_t e) { return job_.data_bytes(b, e); });
  for (Move& m : plan) m.digest = digest_of(m.begin, m.begin + m.rows);
  return plan;
}

// The most rows of others worker w can compute: those it computes now and
// as many more as its memory room holds at 1.1x their bytes (the copy and
// what its kernels keep per row); -1 where it told no room.
std::int64_t Coordinator::most_rows(std::uint32_t w) const {
  const auto r = room_.find(w);
  const std::int64_t units = job_.units();
  if (r == room_.end() || units <= 0) return -1;
  const double row = static_cast<double>(job_.data_bytes(0, units)) / static_cast<double>(units);
  std::int64_t now = 0;
  for (const Move& m : moves_)
    if (m.by == w) now += m.rows;
  return now + static_cast<std::int64_t>(static_cast<double>(r->second) / (1.1 * std::max(row, 1.0)));
}

// rows_digest of rows [begin, end) of a worker's as the coordinator reads
// the input; the pages it touched are given back (they are not its rows).
std::uint64_t Coordinator::digest_of(std::int64_t begin, std::int64_t end) const {
  return job_.digest(begin, end);
}

nlohmann::json moves_json(const std::vector<Move>& moves) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& m : moves) out.push_back({{"home", m.home}, {"by", m.by}, {"begin", m.begin}, {"rows", m.rows}});
  return out;
}

// A new plan, when the membership changed, goes out with this round's
// contribution; the workers read the rows it gives them beside the rounds
// (a round that waited for a large read would stall every member), and
// once each has said so it is committed, in effect from the next round on
// every side. One plan is pending at a time; a change
// meanwhile is planned once it is in effect.
void Coordinator::announce_moves(Contribution& mine, std::int64_t t) {
  if (announced_) {
    if (announced_from_ > 0) return;  // committed
    std::erase_if(reading_, [&](std::uint32_t w) { return !active_.count(w); });  // lost: stood in for
    if (reading_.empty()) commit_plan(mine, t);
    return;
  }
  // A re-split by speed sent in this very contribution changes what its
  // workers keep (kept_) from the next round: a plan made now would give
  // away rows the coordinator is about to compute too. It waits a round.
  if (!replan_ || !mine.trims.empty()) return;
  replan_ = false;
  auto plan = plan_moves();
  if (plan == moves_) return;
  mine.has_moves = true;
  mine.moves = plan;
  mine.moves_id = ++plan_id_;
  reading_.clear();
  for (const auto& m : plan)
    if (std::find(moves_.begin(), moves_.end(), m) == moves_.end()) reading_.insert(m.by);
  log_.write({{"event", "rows_planned"}, {"iteration", t}, {"plan", plan_id_}, {"moves", moves_json(plan)}});
  announced_ = std::move(plan);
  announced_from_ = 0;
  if (reading_.empty()) commit_plan(mine, t);  // nothing to read: in effect from the next round
}

// The plan sent is in effect from the next round on every side.
void Coordinator::commit_plan(Contribution& mine, std::int64_t t) {
  mine.commit_moves = plan_id_;
  mine.moves_from = announced_from_ = t + 1;
  log_.write({{"event", "rows_moved"}, {"iteration", announced_from_}, {"plan", plan_id_},
              {"moves", moves_json(*announced_)}});
}

// q counts no more (lost, or gone).
void Coordinator::lose(std::uint32_t q) {
  active_.erase(q);
  recovering_.erase(q);
  leaving_.erase(q);
  inactive_.insert(q);
}

// The announced moves take effect in their round: the coordinator stands in
// for what each lost member computes now, which may be nothing.
void Coordinator::apply_moves(std::int64_t t) {
  if (!announced_ || announced_from_ == 0 || t < announced_from_) return;
  moves_ = std::move(*announced_);
  announced_.reset();
  for (const auto q : std::set<std::uint32_t>(taken_over_)) {
    if (ranges_of(q) == stood_[q]) continue;
    all_to_all(*own_).hand_back(q);
    taken_over_.erase(q);
    stood_.erase(q);
    if (!take_over(q, t)) log_.write({{"event", "rows_handed_on"}, {"worker", q}, {"iteration", t}});
  }
  // A lost or returning member whose rows the plan gives back to it is
  // stood in for until it counts again, or they would count nowhere: no
  // worker is left to take them (the last one was lost holding them), or
  // the plan that moved them to workers gave way to one without them (a
  // member that left and was started again: simulator seed 54).
  std::set<std::uint32_t> away(inactive_.begin(), inactive_.end());
  away.insert(recovering_.begin(), recovering_.end());
  for (const auto q : away)
    if (!taken_over_.count(q)) take_over(q, t);
}

// Star form: the members' contributions to this node, the job's decision,
// the decision (with the view of the members it counted) to every member,
// returning ones included, so they stay in step until they count again.
RoundOutcome Coordinator::central_round(std::int64_t t, const Membership& view, SyncStats& st) {
  std::map<std::uint32_t, Bytes> members;
  const auto t_compute = Clock::now();
  members[0] = own_->contribute(t);
  computing_ = secs(t_compute, Clock::now());
  const auto t0 = Clock::now();
  const auto got = node_->gather(
      t, view.active, [&](std::span<const std::byte> b) { own_->validate(b); },
      [&](const Received& r) { on_message(r); }, st);
  for (const auto& [id, c] : got) members[id] = c.data;
  for (auto q : st.evicted) {
    lose(q);
    node_->send(q, kEvicted, t, {});  // it may wait for a decision that will not come to it
  }
  Contribution decision;
  decision.data = job_.decide(t, members);
  decision.has_view = true;
  decision.view = view;
  decision.view.active.clear();
  for (const auto& [id, c] : members) decision.view.active.push_back(id);
  decision.view.inactive.assign(inactive_.begin(), inactive_.end());
  const auto payload = encode(decision);
  for (auto q : active_)
    if (q != 0) node_->send(q, kDecision, t, payload);
  for (auto q : recovering_) node_->send(q, kDecision, t, payload);
  st.notify_seconds = secs(t0, Clock::now()) - st.wait_seconds;
  const auto t1 = Clock::now();
  RoundOutcome out = star(*own_).apply(t, decision.data);
  out.log["applying_s"] = secs(t1, Clock::now());
  return out;
}

// A returning worker (recovery as in [Antimatroid]), told the
// current round right
// away: it asks everyone for their contributions of it (all-to-all) or
// follows the decisions (central), resynchronizes, and becomes active from
// the next view on.
void Coordinator::on_hello(const Received& r) {
  const auto& h = r.message.header;
  bool resume = false;
  const auto a = admitted(r, resume);
  if (!a) return;
  node_->ensure_peer(h.sender, a->address);  // not again: closing an endpoint fails the peer's matched one
  if (!resume) {
    // A worker without a snapshot (its disk lost, or started late): its
    // task; it fetches its rows and comes back resuming (member.cpp).
    node_->send(h.sender, kTask, 0, encode(task_for(h.sender)));
    log_.write({{"event", "task_resent"}, {"worker", h.sender}, {"iteration", current_t_}});
    return;
  }
  address_[h.sender] = a->address;
  if (active_.count(h.sender) && rounds_started_) rejoined_active_.insert(h.sender);
  active_.erase(h.sender);
  inactive_.erase(h.sender);
  recovering_.insert(h.sender);
  returned_at_[h.sender] = Clock::now();
  Current cur;
  cur.round = current_t_;
  cur.state = own_->shared_state();
  cur.view = current_view_;
  cur.pair_keys = pair_keys_of(h.sender);
  for (const auto& [id, peer] : address_)  // not the lost ones: their addresses are stale
    if (id != h.sender && !inactive_.count(id)) cur.peers.push_back({id, peer});
  node_->send(h.sender, kCurrent, current_t_, encode(cur));
  log_.write({{"event", "rejoin"}, {"worker", h.sender}, {"incarnation", h.incarnation}, {"iteration", current_t_}});
}

// A worker resuming from a snapshot without its data asks for its partition
// again before its hello. The push runs in the background (UCX progresses
// it whenever this loop receives); a malformed ticket or one of the wrong
// size is refused by push().
void Coordinator::on_ticket(const Received& r) {
  const auto w = r.message.header.sender;
  // Rows or not: an SVM worker's data is the whole training set, a joiner's too.
  if (!known_worker(w) || job_.data_bytes(begin_[w], begin_[w] + loads_[w]) == 0) return;
  const auto addr = boot_->address_of(w);  // a ticket before the hello: reached at its handshake's address
  if (!addr) return;
  node_->ensure_peer(w, *addr);
  const auto data = job_.data(begin_[w], begin_[w] + loads_[w]);
  try {
    push(w, r.message.payload, data);
    log_.write({{"event", "rows_resent"}, {"worker", w}, {"bytes", data.size()}, {"iteration", current_t_}});
  } catch (const std::exception& e) {
    log::warn("accel coordinator") << "dropped ticket from " << w << ": " << e.what();
  }
}

// Push mode: a worker asks for a piece the announced plan gives it; the
// rows go from the coordinator's mapping, a block at a time, beside the
// rounds (their pages given back as sent). A piece no plan gives it is
// refused: the worker then never says it is ready, and the plan waits
// for it as for any reader (lost: stood in for).
void Coordinator::on_move_ticket(const Received& r) {
  const auto w = r.message.header.sender;
  Move m;
  Bytes ticket;
  try {
    In in(r.message.payload);
    m.home = in.get<std::uint32_t>();
    m.begin = in.get<std::int64_t>();
    m.rows = in.get<std::int64_t>();
    ticket = in.bytes(4096);
    in.end();
  } catch (const InputError& e) {
    log::warn("accel coordinator") << "dropped a move ticket from " << w << ": " << e.what();
    return;
  }
  const bool planned = announced_ && std::any_of(announced_->begin(), announced_->end(), [&](const Move& p) {
                         return p.by == w && p.home == m.home && p.begin == m.begin && p.rows == m.rows;
                       });
  if (!planned || o_.pull || !active_.count(w)) return;
  try {
    push(w, ticket, job_.data(m.begin, m.begin + m.rows));
    log_.write({{"event", "rows_pushed"}, {"worker", w}, {"home", m.home}, {"begin", m.begin}, {"rows", m.rows},
                {"iteration", current_t_}});
  } catch (const std::exception& e) {
    log::warn("accel coordinator") << "could not push rows to worker " << w << ": " << e.what();
  }
}

// A member asks to leave (SIGTERM): its rows are handed on at a round
// boundary, as for a lost member, but nobody waits out a timeout for it.
void Coordinator::on_leave(const Received& r) {
  const auto w = r.message.header.sender;
  if (!active_.count(w) || leaving_.count(w) || w == 0) return;
  leaving_.insert(w);
  replan_ = true;
  log_.write({{"event", "leave"}, {"worker", w}, {"iteration", current_t_}});
}

// Whether workers, not the coordinator, compute the rows of a member that
// leaves (a worker that stays; --pull: of a lost one too).
bool Coordinator::survivors_take() const {
  if (!o_.move_lost_rows || workload_.exchange() != Exchange::AllToAll) return false;
  return std::any_of(active_.begin(), active_.end(), [&](std::uint32_t v) { return v != 0 && !leaving_.count(v); });
}

// w counts no more from round t: its rows are the workers' (moves in
// effect) or the coordinator's stand-in, and it is told it is done.
void Coordinator::depart(std::uint32_t w, std::int64_t t) {
  if (!survivors_take()) replan_ = true;  // else its rows are the workers' already
  lose(w);
  take_over(w, t);
  node_->send(w, kDone, t, {});
  log_.write({{"event", "left"}, {"worker", w}, {"iteration", t}});
}

void Coordinator::on_resync(const Received& r) {
  const auto w = r.message.header.sender;
  if (recovering_.count(w) && returned_at_.count(w)) {
    resynced_.insert(w);
    replan_ = true;  // its rows go back to it
    log_.write({{"event", "resynchronized"}, {"worker", w}, {"iteration", r.message.header.iteration},
                {"reintegration_s", secs(returned_at_[w], Clock::now())}});
    returned_at_.erase(w);
  }
}

// The job's result is final here; telling the workers (and the 50 ms that
// lets those messages leave) is teardown, as Spark's is not in its time.
int Coordinator::finish() {
  const double job_seconds = secs(t_start_, Clock::now()) - waiting_;
  for (const auto& [w, a] : address_)
    if (w != 0) node_->send(w, kDone, rounds_done_, {});
  node_->net().progress_until([] { return false; }, Ms(50));  // let the done messages leave
  nlohmann::json summary = {{"n", job_.units()},
                            {"workers", N_},
                            {"iterations", rounds_done_},
                            {"converged", converged_},
                            {"rows", loads_},
                            {"seconds",
                             {{"total", secs(t_start_, Clock::now())},  // the job adds its loading
                              {"waiting_for_workers", waiting_},
                              {"job", job_seconds},
                              {"sharing", sharing_},
                              {"counting", counting_}}},
                            {"members", view_json(membership())}};
  const std::string text = job_.finish(own_->shared_state(), summary);
  summary["every_worker_lost_at"] = all_lost_at_;
  // The rows of workers lost for good were left out (--on-loss drop): the
  // result is written but is not the whole input's, and the exit says so.
  const bool rows_lost = all_lost_at_ > 0 && !o_.move_lost_rows && active_.size() == 1;
  if (rows_lost)
    log::error("accel coordinator") << "every worker was lost from round " << all_lost_at_
              << " with --on-loss drop; their rows are not in the result (exit " << kExitRowsLost << ")";
  if (o_.print_summary) {
    if (o_.json) std::cout << summary.dump() << "\n";
    else std::cout << text << "\n";
  }
  return rows_lost ? kExitRowsLost : kExitOk;
}

}  // namespace

struct CoordinatorRun::Impl {
  std::unique_ptr<Coordinator> c;
};

// The token: --job, else ACCEL_JOB_TOKEN (a launcher's), else a random one
// written for the workers (job_token.hpp).
CoordinatorRun::CoordinatorRun(const CoordinatorOptions& o, Job& job) : impl_(std::make_unique<Impl>()) {
  CoordinatorOptions resolved = o;
  bool write = false;
  std::optional<Checkpoint> resume;
  if (!(o.mtbf_s > 0)) throw InputError("--mtbf must be positive seconds");
  if (o.gather_from < 0) throw InputError("--gather-from " + std::to_string(o.gather_from) + ": 0 (never) or more");
  if (o.tree_from < 0) throw InputError("--tree-from " + std::to_string(o.tree_from) + ": 0 (never) or more");
  if (!o.resume_dir.empty()) {
    if (!o.checkpoint_dir.empty() && o.checkpoint_dir != o.resume_dir)
      throw InputError("--checkpoint-dir " + o.checkpoint_dir + " and --resume " + o.resume_dir +
                       " name different directories");
    resolved.checkpoint_dir = o.resume_dir;
    // The checkpoint's token and address: the workers know those.
    resume = load_checkpoint(checkpoint_path(o.resume_dir));
    resolved.job = resume->job;
    resolved.listen = resume->listen;
    resolved.job_file = resume->job_file;
    write = !resume->job_file.empty();
  } else if (resolved.job == 0) {
    const auto env = env_job_token();
    write = !env;
    resolved.job = env ? *env : random_job_token();
  }
  impl_->c = std::make_unique<Coordinator>(resolved, write, job, std::move(resume));
}

CoordinatorRun::~CoordinatorRun() = default;

void CoordinatorRun::start() { impl_->c->start(); }
bool CoordinatorRun::step() { return impl_->c->step(); }
int CoordinatorRun::finish() { return impl_->c->finish(); }

int run_coordinator(const CoordinatorOptions& o, Job& job) {
  CoordinatorRun run(o, job);
  run.start();
  while (run.step()) {
  }
  return run.finish();
}

}  // namespace accel::cluster
