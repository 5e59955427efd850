#include "job.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <thread>

#include "accel/error.hpp"
#include "accel/io.hpp"
#include "accel/kmeans.hpp"
#include "accel/registry.hpp"
#include "node.hpp"
#include "snapshot.hpp"

namespace accel::cluster {
namespace {

using transport::EndpointId;
using transport::Received;

double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// JSON lines, appended as they happen (a crash keeps what was logged).
class Log {
 public:
  explicit Log(const std::string& path) {
    if (!path.empty()) {
      out_.open(path, std::ios::app);
      if (!out_) throw InputError(path + ": cannot write the log");
    }
  }
  // Every line carries t_s, seconds since this process opened its log, so a
  // run's phases can be laid out on one time axis.
  void write(nlohmann::json j) {
    if (!out_) return;
    j["t_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    out_ << j.dump() << "\n" << std::flush;
  }

 private:
  std::ofstream out_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

std::pair<std::string, std::uint16_t> split_addr(const std::string& s) {
  const auto colon = s.rfind(':');
  if (colon == std::string::npos) throw InputError("address '" + s + "': expected ADDR:PORT");
  int port = -1;
  try {
    port = std::stoi(s.substr(colon + 1));
  } catch (...) {
  }
  if (port < 0 || port > 65535) throw InputError("address '" + s + "': bad port");
  return {s.substr(0, colon), static_cast<std::uint16_t>(port)};
}

transport::Options transport_options(const Common& c, std::uint32_t id, std::uint32_t incarnation) {
  transport::Options o;
  o.job_token = c.job;
  o.self_id = id;
  o.incarnation = incarnation;
  o.tls = c.tls;
  o.keepalive_interval = Ms(c.keepalive_ms);
  o.peer_failure_detection = true;  // a dead peer must fail its requests (DESIGN.md §5)
  // Partials carry k x d doubles (1.6 MB for Fashion-MNIST at k = 256):
  // accept up to the transport's hard bound; decoders check exact shapes.
  o.max_control_payload = transport::kMaxControlPayloadLimit;
  // More processes than cores is the usual test and demo setting: a waiting
  // participant sleeps on its event fd instead of taking the CPU the
  // others need (tcp, the only transport with peer-failure handling here,
  // supports wakeup).
  o.wakeup = true;
  return o;
}

std::vector<Device*> local_devices(const std::string& spec, std::int64_t k, std::int64_t d, const Registry& reg) {
  return kmeans_capable(reg.select(spec, KernelId::KMeansAssign), k, d);
}

// Rows per second of this node's devices for the job's shape (seeds/003's
// processor of measured speed): one assignment step on synthetic rows, on
// each device alone, summed. Measuring them together would split the probe
// evenly and let the slowest device set the node's rate (an fpga-emu beside
// the cpu made a worker look 20x slower than it is). The per-device rates
// land in `model`, so the job's first split among them follows them too.
// The probe is on every job's critical path, so it is kept short: the rows
// come from a multiplicative hash (normal deviates cost 56 ms of a 200 ms
// probe at d = 784), and the warm-up step (allocations, thread pools, the
// cpu's sgemm layout choice) runs on a prefix of them.
// Logged as a "probe" event (seconds, rows/s) on every participant.
double measure_capability(std::int64_t d, std::int64_t k, const std::vector<Device*>& devs, PerfModel& model,
                          Log& log) {
  const auto t_probe = Clock::now();
  const std::int64_t n = std::clamp<std::int64_t>(20000000 / std::max<std::int64_t>(d * k, 1), 1024, 65536);
  std::vector<float> x(n * d), c(k * d);
  auto fill = [](std::vector<float>& v, std::uint32_t seed) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::uint32_t h = (static_cast<std::uint32_t>(i) + seed) * 2654435761u;
      v[i] = static_cast<float>(h >> 8) * (1.0f / 16777216.0f) - 0.5f;  // uniform in [-0.5, 0.5)
    }
  };
  fill(x, 1);
  fill(c, 7);
  const std::int64_t warm = std::min<std::int64_t>(n, 1024);
  // Each device: a warm-up launch, then measured launches until two in a
  // row agree within 10% (at most four), and the fastest. A single measured
  // launch (~15 ms) had been off by up to 1.9x in about one job in five here
  // (a neighbour's burst, or work of the process's own still settling), and
  // the partition it set then cost every iteration the difference.
  double total = 0;
  for (Device* dev : devs) {
    PerfModel scratch;
    PartialAssigner(x.data(), warm, d, k, {dev}, scratch).step(c);
    PartialAssigner a(x.data(), n, d, k, {dev}, model);
    double last = 0, best = 0;
    for (int trial = 0; trial < 4; ++trial) {
      const double r = n / std::max(a.step(c).compute_seconds, 1e-6);
      best = std::max(best, r);
      if (trial > 0 && std::abs(r - last) <= 0.1 * std::max(r, last)) break;
      last = r;
    }
    total += best;
  }
  log.write({{"event", "probe"}, {"seconds", secs(t_probe, Clock::now())}, {"rows_per_s", total}});
  return total;
}

Partial to_partial(const PartialStep& s, std::int64_t rows) {
  Partial p;
  p.sums = s.sums;
  p.counts = s.counts;
  p.inertia = s.inertia;
  p.rows = rows;
  return p;
}

// Sum of the members' partials: every participant runs the same update.
PartialStep aggregate(const std::map<std::uint32_t, Partial>& members, std::int64_t k, std::int64_t d) {
  PartialStep s;
  s.sums.assign(k * d, 0.0);
  s.counts.assign(k, 0);
  for (const auto& [id, p] : members) {
    for (std::int64_t j = 0; j < k * d; ++j) s.sums[j] += p.sums[j];
    for (std::int64_t j = 0; j < k; ++j) s.counts[j] += p.counts[j];
    s.inertia += p.inertia;
  }
  return s;
}

nlohmann::json view_json(const Membership& v) {
  return {{"active", v.active}, {"inactive", v.inactive}, {"recovering", v.recovering}};
}

// Waits for one message of `type` (others go to `other`); throws on timeout.
Received expect_msg(Node& node, std::uint16_t type, Ms timeout, const std::string& what,
                    const std::function<void(const Received&)>& other = {}) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<Ms>(deadline - Clock::now());
    if (left.count() <= 0) throw InputError("timed out waiting for " + what);
    auto r = node.receive(std::min(left, Ms(100)));
    if (!r) {
      if (!node.coordinator() && !node.reachable(0)) throw CoordinatorGone("the coordinator is gone");
      continue;
    }
    if (r->message.header.type == type) return *r;
    if (r->message.header.type == kReject && !node.coordinator())
      throw InputError("the coordinator rejected this worker (job over or unknown id)");
    if (r->message.header.type == kDone && !node.coordinator()) throw Evicted("done");
    if (other) other(*r);
  }
}

}  // namespace

// ---------------------------------------------------------------- coordinator

int run_coordinator(const CoordinatorOptions& o) {
  if (o.workers < 1) throw InputError("--workers must be at least 1");
  if (o.timeout_ms < 1) throw InputError("--timeout-ms must be positive");
  kmeans_uses_bounds(o.algorithm, 16);  // rejects an unknown name before the input is read
  const auto t_start = Clock::now();
  Log log(o.log_json);
  const Matrix x = load_matrix(o.input);
  KMeansOptions ko;
  ko.k = o.k;
  ko.max_iter = o.max_iter;
  ko.tol = o.tol;
  ko.init = o.init;
  ko.seed = o.seed;
  const Matrix init = kmeans_init(x, ko);
  const double loading = secs(t_start, Clock::now());  // reading the input and the initial centroids
  const std::int64_t n = x.rows, d = x.cols, k = o.k;
  const bool bounds = kmeans_uses_bounds(o.algorithm, d);
  // A partial result (k x d sums, k counts) or a task (k x d centroids, the
  // peers' addresses) must fit one control message.
  if (k * d * 8 + k * 8 + (std::int64_t{64} << 10) > static_cast<std::int64_t>(transport::kMaxControlPayloadLimit))
    throw InputError("k x d = " + std::to_string(k) + " x " + std::to_string(d) +
                     ": partial results would exceed the " + std::to_string(transport::kMaxControlPayloadLimit >> 20) +
                     " MiB control-message bound of the distributed job");
  const Registry reg = Registry::discover_all();
  const auto devs = local_devices(o.device, k, d, reg);
  const int N = o.workers;

  auto topts = transport_options(o, 0, 1);
  topts.block_bytes = o.block_size;
  topts.protocol = transport::parse_bulk_protocol(o.protocol);
  Node node(topts, Ms(o.timeout_ms), Limits{});
  auto& net = node.net();
  const auto [ip, port] = split_addr(o.listen);
  const auto bound = net.listen(ip, port);
  std::cerr << "accel coordinator: listening on " << ip << ":" << bound << " for " << N << " workers\n";
  log.write({{"event", "listening"}, {"address", ip + ":" + std::to_string(bound)}});

  // Join: every worker says hello and measures its throughput for this shape.
  std::map<std::uint32_t, std::vector<std::byte>> address;
  std::map<std::uint32_t, double> capability;
  PerfModel model;  // per-device rates: the probe's, then every iteration's
  address[0] = net.worker_address();
  // Waiting for the worker processes to start and say hello: the launcher's
  // cost, not the job's (Spark's executor start-up is not in its time either).
  // The coordinator measures itself once every worker has joined, while the
  // workers measure themselves (each on its own cores), not before them.
  const auto t_waiting = Clock::now();
  double waiting = 0;
  const auto join_deadline = Clock::now() + Ms(o.join_timeout_ms);
  while (static_cast<int>(capability.size()) < N + 1) {
    const auto left = std::chrono::duration_cast<Ms>(join_deadline - Clock::now());
    if (left.count() <= 0)
      throw InputError("only " + std::to_string(address.size() - 1) + " of " + std::to_string(N) +
                       " workers joined within " + std::to_string(o.join_timeout_ms) + " ms");
    auto r = node.receive(left);
    if (!r) continue;
    const auto& h = r->message.header;
    if (h.type == kHello) {
      bool resume = false;
      std::int64_t it = 0;
      std::vector<std::byte> addr;
      try {
        decode_hello(r->message.payload, resume, it, addr, node.limits());
      } catch (const InputError& e) {
        std::cerr << "accel coordinator: dropped hello from " << h.sender << ": " << e.what() << "\n";
        continue;
      }
      // Nothing can be resumed before the job starts: a resuming worker holds
      // a snapshot of an earlier job with the same token, which it discards
      // when rejected, and then joins afresh.
      if (resume || h.sender < 1 || h.sender > static_cast<std::uint32_t>(N) || address.count(h.sender) ||
          r->from == transport::kNoEndpoint) {
        std::cerr << "accel coordinator: rejected " << (resume ? "a resume" : "hello") << " from id " << h.sender
                  << "\n";
        if (r->from != transport::kNoEndpoint) net.send(r->from, kReject, 0, {});
        continue;
      }
      node.set_endpoint(h.sender, r->from, addr);
      address[h.sender] = addr;
      node.send(h.sender, kProbe, 0, encode_i64s({d, k}));
      if (static_cast<int>(address.size()) == N + 1) {
        waiting = secs(t_waiting, Clock::now());
        capability[0] = measure_capability(d, k, devs, model, log);
      }
    } else if (h.type == kTicket && r->from != transport::kNoEndpoint) {
      // Rows asked for by a worker resuming a snapshot (see the hello above).
      std::cerr << "accel coordinator: rejected a resume from id " << h.sender << " (no job running yet)\n";
      net.send(r->from, kReject, 0, {});
    } else if (h.type == kCapability) {
      try {
        capability[h.sender] = decode_f64(r->message.payload);
      } catch (const InputError& e) {
        std::cerr << "accel coordinator: dropped capability from " << h.sender << ": " << e.what() << "\n";
      }
    }
  }

  // Partition sizes follow measured capability (seeds/003 Algorithm 1,
  // starting from the uniform split the seed uses).
  std::vector<std::int64_t> loads(N + 1, n / (N + 1));
  loads.back() += n - std::accumulate(loads.begin(), loads.end(), std::int64_t{0});
  std::vector<double> caps;
  for (int i = 0; i <= N; ++i) caps.push_back(capability[i]);
  loads = rebalance(loads, caps, 0.0);
  std::vector<std::int64_t> begin(N + 1, 0);
  for (int i = 1; i <= N; ++i) begin[i] = begin[i - 1] + loads[i - 1];
  log.write({{"event", "partition"}, {"rows", loads}, {"capability_rows_per_s", caps}});

  // Distribute: the task, then the rows pushed into the worker's buffer (or
  // read by the worker itself with --pull).
  const auto t_share = Clock::now();
  // Workers that got their rows say so while later ones are still receiving.
  std::set<std::uint32_t> ready;
  auto note_ready = [&](const Received& r) {
    if (r.message.header.type == kReady) ready.insert(r.message.header.sender);
  };
  for (int w = 1; w <= N; ++w) {
    Task task;
    task.n_total = n;
    task.d = d;
    task.k = k;
    task.max_iter = o.max_iter;
    task.tol = o.tol;
    task.row_begin = begin[w];
    task.rows = loads[w];
    task.input = std::filesystem::absolute(o.input).string();
    task.pull = o.pull;
    task.bounds = bounds;
    task.centroids = init.data;
    for (const auto& [id, a] : address)
      if (id != static_cast<std::uint32_t>(w)) task.peers.push_back({id, a});
    if (!node.send(w, kTask, 0, encode(task))) throw InputError("worker " + std::to_string(w) + " is unreachable");
    if (o.pull || loads[w] == 0) continue;
    const Received t =
        expect_msg(node, kTicket, Ms(o.join_timeout_ms), "worker " + std::to_string(w) + "'s ticket", note_ready);
    const std::size_t bytes = loads[w] * d * sizeof(float);
    const auto t0 = Clock::now();
    auto c = net.push(node.endpoint(w), t.message.payload, x.row(begin[w]), bytes);
    if (!net.wait(c, Ms(o.join_timeout_ms)) || !c->ok())
      throw InputError("sending rows to worker " + std::to_string(w) + " failed: " + c->error);
    const double s = secs(t0, Clock::now());
    log.write({{"event", "transfer"}, {"worker", w}, {"bytes", bytes}, {"block_size", o.block_size},
               {"protocol", transport::to_string(c->protocol)}, {"seconds", s}, {"mib_per_s", bytes / s / (1 << 20)}});
  }
  while (static_cast<int>(ready.size()) < N)
    ready.insert(expect_msg(node, kReady, Ms(o.join_timeout_ms), "workers to be ready").message.header.sender);
  const double sharing = secs(t_share, Clock::now());
  for (int w = 1; w <= N; ++w) node.send(w, kStart, 0, {});

  // Iterations.
  PartialAssigner assigner(x.row(begin[0]), loads[0], d, k, devs, model, bounds);
  std::vector<float> c = init.data;
  std::set<std::uint32_t> active, inactive, recovering, resynced;
  for (int i = 0; i <= N; ++i) active.insert(i);
  double last_inertia = 0;
  int iterations = 0;
  bool converged = false;
  std::map<std::uint32_t, Clock::time_point> returned_at;
  std::int64_t current_t = 0;  // the iteration being synchronized
  Membership current_view;
  auto handle = [&](const Received& r) {
    const auto& h = r.message.header;
    if (h.type == kHello) {
      bool resume = false;
      std::int64_t it = 0;
      std::vector<std::byte> addr;
      try {
        decode_hello(r.message.payload, resume, it, addr, node.limits());
      } catch (const InputError& e) {
        std::cerr << "accel coordinator: dropped hello from " << h.sender << ": " << e.what() << "\n";
        return;
      }
      if (!resume || h.sender < 1 || h.sender > static_cast<std::uint32_t>(N) || r.from == transport::kNoEndpoint) {
        if (r.from != transport::kNoEndpoint) net.send(r.from, kReject, 0, {});
        return;
      }
      // A returning worker (seeds/000 recovery), told the current iteration
      // right away: it asks everyone for their results of it, resynchronizes,
      // and becomes active from the next view on.
      node.set_endpoint(h.sender, r.from, addr);
      address[h.sender] = addr;
      active.erase(h.sender);
      inactive.erase(h.sender);
      recovering.insert(h.sender);
      returned_at[h.sender] = Clock::now();
      Current cur;
      cur.iteration = current_t;
      cur.centroids = c;
      cur.view = current_view;
      for (const auto& [id, a] : address)
        if (id != h.sender) cur.peers.push_back({id, a});
      node.send(h.sender, kCurrent, current_t, encode(cur));
      log.write({{"event", "rejoin"}, {"worker", h.sender}, {"incarnation", h.incarnation}, {"iteration", current_t}});
    } else if (h.type == kTicket) {
      // A worker resuming from a snapshot without rows asks for its
      // partition again before its hello. The push runs in the background
      // (UCX progresses it whenever this loop receives); a malformed ticket
      // or one of the wrong size is refused by push().
      if (h.sender < 1 || h.sender > static_cast<std::uint32_t>(N) || r.from == transport::kNoEndpoint ||
          loads[h.sender] == 0)
        return;
      const std::size_t bytes = loads[h.sender] * d * sizeof(float);
      try {
        net.push(r.from, r.message.payload, x.row(begin[h.sender]), bytes);
        log.write({{"event", "rows_resent"}, {"worker", h.sender}, {"bytes", bytes}, {"iteration", current_t}});
      } catch (const std::exception& e) {
        std::cerr << "accel coordinator: dropped ticket from " << h.sender << ": " << e.what() << "\n";
      }
    } else if (h.type == kResync) {
      if (recovering.count(h.sender) && returned_at.count(h.sender)) {
        resynced.insert(h.sender);
        log.write({{"event", "resynchronized"}, {"worker", h.sender}, {"iteration", h.iteration},
                   {"reintegration_s", secs(returned_at[h.sender], Clock::now())}});
        returned_at.erase(h.sender);
      }
    }
  };
  for (int t = 1; t <= o.max_iter; ++t) {
    const auto t_iter = Clock::now();
    for (auto w : resynced) {
      recovering.erase(w);
      active.insert(w);
    }
    resynced.clear();
    Membership view{{active.begin(), active.end()}, {inactive.begin(), inactive.end()},
                    {recovering.begin(), recovering.end()}};
    current_t = t;
    current_view = view;
    const PartialStep mine_step = assigner.step(c);
    const auto t_computed = Clock::now();
    Partial mine = to_partial(mine_step, loads[0]);
    mine.has_view = true;
    mine.view = view;
    SyncStats st;
    Membership v = view;
    const auto members = node.sync(t, mine, v, k, d, handle, st);
    for (auto q : st.evicted) {
      active.erase(q);
      recovering.erase(q);
      inactive.insert(q);
    }
    const PartialStep total = aggregate(members, k, d);
    std::int64_t reseeded = 0;
    const double shift = update_centroids(total.sums, total.counts, c, k, d, &reseeded);
    last_inertia = total.inertia;
    iterations = t;
    log.write({{"iteration", t}, {"participant", 0}, {"sharing_s", t == 1 ? sharing : 0.0},
               {"computing_s", secs(t_iter, t_computed)}, {"synchronizing_s", st.notify_seconds + st.wait_seconds},
               {"barrier_wait_s", st.wait_seconds}, {"members", view_json(view)}, {"evicted", st.evicted},
               {"inertia", total.inertia}, {"max_shift", shift}});
    if (o.tol > 0 && shift < o.tol) {
      converged = true;
      break;
    }
  }
  // The job's result is final here; telling the workers (and the 50 ms
  // that lets those messages leave) is teardown, as Spark's is not in its time.
  const double job_seconds = secs(t_start, Clock::now()) - loading - waiting;
  for (int w = 1; w <= N; ++w) node.send(w, kDone, iterations, {});
  net.progress_until([] { return false; }, Ms(50));  // let the done messages leave
  if (!o.output_centroids.empty()) write_npy(o.output_centroids, c.data(), {k, d});
  const nlohmann::json summary = {{"n", n},
                                  {"d", d},
                                  {"k", k},
                                  {"workers", N},
                                  {"iterations", iterations},
                                  {"converged", converged},
                                  {"inertia", last_inertia},
                                  {"rows", loads},
                                  {"seconds", {{"total", secs(t_start, Clock::now())},
                                               {"loading", loading},
                                               {"waiting_for_workers", waiting},
                                               {"job", job_seconds},
                                               {"sharing", sharing}}},
                                  {"members", view_json({{active.begin(), active.end()},
                                                         {inactive.begin(), inactive.end()},
                                                         {recovering.begin(), recovering.end()}})}};
  if (o.json) std::cout << summary.dump() << "\n";
  else
    std::cout << "distributed k-means: " << n << " rows, k=" << k << ", " << N << " workers, " << iterations
              << " iterations, inertia " << last_inertia << "\n";
  return 0;
}

// ---------------------------------------------------------------- worker

namespace {

// The worker's partition into s.rows: read from the input file (--pull), or
// pushed by the coordinator into this buffer after a ticket, at the start
// and again when resuming from a snapshot without rows.
void fetch_rows(Node& node, Snapshot& s, Ms timeout) {
  const Task& task = s.task;
  s.rows.resize(task.rows * task.d);
  if (task.pull) {
    const Matrix all = load_matrix(task.input);
    if (all.rows != task.n_total || all.cols != task.d) throw InputError(task.input + ": not the coordinator's input");
    std::copy_n(all.row(task.row_begin), s.rows.size(), s.rows.begin());
  } else if (task.rows > 0) {
    auto& net = node.net();
    auto h = net.expect(s.rows.data(), s.rows.size() * sizeof(float), transport::MemoryType::Host, node.endpoint(0));
    node.send(0, kTicket, 0, h.ticket);
    // Waits for the rows, or for a reject (a resume the coordinator cannot
    // serve: its job is not the snapshot's); other messages keep their turn.
    const auto deadline = Clock::now() + timeout;
    while (!h.completion->done) {
      const auto left = std::chrono::duration_cast<Ms>(deadline - Clock::now());
      if (left.count() <= 0) throw InputError("receiving rows failed: timed out");
      if (!node.reachable(0)) throw CoordinatorGone("the coordinator is gone");
      if (auto r = node.receive(std::min(left, Ms(20)))) {
        if (r->message.header.type == kReject)
          throw InputError("the coordinator rejected this worker (job over or unknown id)");
        node.stash(std::move(*r));
      }
    }
    if (!h.completion->ok()) {
      if (!node.reachable(0)) throw CoordinatorGone("the coordinator is gone (" + h.completion->error + ")");
      throw InputError("receiving rows failed: " + h.completion->error);
    }
  }
}

// One incarnation of a worker: join (fresh or resuming), then iterate until
// done. Returns normally when the job is done; throws Evicted to rejoin.
void worker_incarnation(const WorkerOptions& o, std::uint32_t incarnation, std::optional<Snapshot>& snap, Log& log,
                        const Registry& reg) {
  Node node(transport_options(o, o.id, incarnation), Ms(o.timeout_ms), Limits{});
  auto& net = node.net();
  const auto [ip, port] = split_addr(o.coordinator);
  node.set_endpoint(0, net.connect(ip, port));
  const bool resume = snap.has_value();
  // A resuming worker is answered within an iteration; a fresh one waits for
  // every worker to join and for the coordinator's measurements.
  const Ms join = resume ? Ms(std::max(o.timeout_ms * 5, 5000)) : Ms(std::max(o.timeout_ms * 10, 30000));
  if (resume && snap->rows.size() != static_cast<std::size_t>(snap->task.rows * snap->task.d)) {
    // A snapshot without rows (snapshot.hpp): get them back before saying
    // hello, so that the recovery handshake itself is as quick as ever.
    const auto t0 = Clock::now();
    fetch_rows(node, *snap, join);
    log.write({{"event", "rows_fetched"}, {"rows", snap->task.rows}, {"seconds", secs(t0, Clock::now())},
               {"from", snap->task.pull ? "input file" : "coordinator"}});
  }
  node.send(0, kHello, 0, encode_hello(resume, 0, net.worker_address()));

  std::int64_t t = 1;
  Membership view;
  // Declared before the writer, which uses them: the writer is joined first.
  std::atomic<bool> snapshot_done = false;
  double snapshot_seconds = 0;
  std::jthread snapshot_writer;  // joined when this incarnation ends, before the caller touches snap
  PerfModel model;  // per-device rates: the probe's (a fresh start), then every iteration's
  std::vector<float> c;
  bool recovering = false;
  if (!resume) {
    const Received probe = expect_msg(node, kProbe, join, "the coordinator's probe");
    const auto shape = decode_i64s(probe.message.payload, 2);
    if (shape[0] < 1 || shape[1] < 1 || shape[0] > node.limits().max_d || shape[1] > node.limits().max_k)
      throw InputError("probe with an impossible shape");
    node.send(0, kCapability, 0,
              encode_f64(measure_capability(shape[0], shape[1], local_devices(o.device, shape[1], shape[0], reg),
                                            model, log)));
    const Received tr = expect_msg(node, kTask, join, "the task");
    Snapshot s;
    s.job = o.job;
    s.id = o.id;
    s.incarnation = incarnation;
    s.task = decode_task(tr.message.payload, node.limits());
    fetch_rows(node, s, join);
    snap = std::move(s);
    // The snapshot (the task, and the rows with --snapshot-rows; fsynced) is
    // written beside the first iterations rather than before this worker
    // says it is ready: with 100 MB of rows that write held the whole job's
    // start by 0.3 s. Nor does any iteration wait for it: it waits on the
    // disk (an fsync; 0.1-0.4 s with the rows here), several iterations of a
    // fast job (blobs: 18 ms each), and it held the first one back. From
    // the iteration it lands in (logged as the "snapshot" event) a restarted
    // worker can resume; a crash before then leaves no snapshot (the rename
    // keeps the file whole or absent) and the job goes on without its rows.
    if (!o.snapshot_dir.empty())
      snapshot_writer = std::jthread([&o, &snap, &snapshot_seconds, &snapshot_done] {
        const auto t0 = Clock::now();
        try {
          save_snapshot(snapshot_path(o.snapshot_dir, o.id), *snap, o.snapshot_rows);
        } catch (const std::exception& e) {
          std::cerr << "accel worker " << o.id << ": no snapshot: " << e.what() << "\n";
        }
        snapshot_seconds = secs(t0, Clock::now());
        snapshot_done = true;
      });
    for (const auto& p : snap->task.peers)
      if (p.id != 0) node.connect_peer(p.id, p.address);
    node.send(0, kReady, 0, {});
    expect_msg(node, kStart, join, "the start", [&](const Received& r) {
      if (r.message.header.type == kPartial) node.stash(r);
    });
    c = snap->task.centroids;
    // Everyone starts active: the coordinator (among the peers) and this worker.
    std::set<std::uint32_t> all{0, o.id};
    for (const auto& p : snap->task.peers) all.insert(p.id);
    view.active.assign(all.begin(), all.end());
  } else {
    // seeds/000 recovery: wait to be told the current iteration.
    const Received cr = expect_msg(node, kCurrent, join, "the coordinator's current iteration", [&](const Received& r) {
      if (r.message.header.type == kPartial) node.stash(r);
    });
    const Current cur = decode_current(cr.message.payload, snap->task.k, snap->task.d, node.limits());
    t = cur.iteration;
    c = cur.centroids;
    view = cur.view;
    for (const auto& p : cur.peers)
      if (p.id != 0) node.connect_peer(p.id, p.address);
    recovering = true;
    log.write({{"event", "resumed"}, {"worker", o.id}, {"incarnation", incarnation}, {"iteration", t}});
  }

  const Task& task = snap->task;
  PartialAssigner assigner(snap->rows.data(), task.rows, task.d, task.k,
                           local_devices(o.device, task.k, task.d, reg), model, task.bounds);
  bool done = false;
  auto other = [&](const Received& r) {
    if (r.message.header.type == kDone) done = true;
    else if (r.message.header.type == kReject) throw InputError("the coordinator rejected this worker");
  };
  for (; t <= task.max_iter && !done; ++t) {
    const auto t_iter = Clock::now();
    // Returning: no member counts this node's result of the current
    // iteration, so it only asks for theirs (an empty notification with its
    // reply address) and computes from the next iteration on.
    const PartialStep step = recovering ? PartialStep{std::vector<double>(task.k * task.d, 0.0),
                                                      std::vector<std::int64_t>(task.k, 0), 0, 0, 0}
                                        : assigner.step(c);
    const auto t_computed = Clock::now();
    if (snapshot_writer.joinable() && snapshot_done) {
      snapshot_writer.join();
      log.write({{"event", "snapshot"}, {"iteration", t}, {"seconds", snapshot_seconds}});
    }
    Partial mine = to_partial(step, recovering ? 0 : task.rows);
    const bool member = std::find(view.active.begin(), view.active.end(), o.id) != view.active.end();
    if (!member) mine.reply_address = net.worker_address();  // returning: peers answer it
    SyncStats st;
    const auto members = node.sync(t, mine, view, task.k, task.d, other, st);
    const PartialStep total = aggregate(members, task.k, task.d);
    std::int64_t reseeded = 0;
    const double shift = update_centroids(total.sums, total.counts, c, task.k, task.d, &reseeded);
    if (recovering) {
      node.send(0, kResync, t, {});
      recovering = false;
    }
    log.write({{"iteration", t}, {"participant", o.id}, {"computing_s", secs(t_iter, t_computed)},
               {"synchronizing_s", st.notify_seconds + st.wait_seconds}, {"barrier_wait_s", st.wait_seconds},
               {"members", view_json(view)}, {"evicted", st.evicted}, {"inertia", total.inertia}});
    if (task.tol > 0 && shift < task.tol) break;
  }
  // The coordinator says when it is over; wait for that (bounded), so a
  // worker that finished on its own rule does not leave early.
  if (!done) {
    try {
      expect_msg(node, kDone, Ms(o.timeout_ms * 2), "the coordinator's done");
    } catch (const Evicted&) {
    } catch (const InputError&) {
    }
  }
}

}  // namespace

int run_worker(const WorkerOptions& o) {
  if (o.id < 1) throw InputError("--id must be 1 or more (0 is the coordinator)");
  if (o.timeout_ms < 1) throw InputError("--timeout-ms must be positive");
  Log log(o.log_json);
  const Registry reg = Registry::discover_all();
  std::optional<Snapshot> snap;
  std::uint32_t incarnation = 1;
  if (!o.snapshot_dir.empty()) {
    std::filesystem::create_directories(o.snapshot_dir);
    try {
      snap = load_snapshot(snapshot_path(o.snapshot_dir, o.id));
    } catch (const InputError& e) {
      std::cerr << "accel worker: discarding a damaged snapshot: " << e.what() << "\n";
    }
    if (snap && snap->job != o.job) snap.reset();  // another job's: stale
    if (snap) incarnation = snap->incarnation + 1;
  }
  bool lost_coordinator = false;
  for (int attempt = 0;; ++attempt) {
    try {
      worker_incarnation(o, incarnation, snap, log, reg);
      if (!o.snapshot_dir.empty()) std::filesystem::remove(snapshot_path(o.snapshot_dir, o.id));
      return 0;
    } catch (const CoordinatorGone& e) {
      // The endpoint failed. That is also what a worker stopped past the
      // keepalive finds (the coordinator closed on it): try once to rejoin;
      // a coordinator that is really gone refuses the connection.
      if (!snap || lost_coordinator) {
        std::cerr << "accel worker " << o.id << ": " << e.what() << "; exiting\n";
        return 3;
      }
      lost_coordinator = true;
      ++incarnation;
      snap->incarnation = incarnation;
      if (!o.snapshot_dir.empty()) save_snapshot(snapshot_path(o.snapshot_dir, o.id), *snap, o.snapshot_rows);
      std::cerr << "accel worker " << o.id << ": " << e.what() << "; trying to rejoin as incarnation " << incarnation
                << "\n";
    } catch (const Evicted& e) {
      if (std::string(e.what()) == "done") return 0;
      if (attempt >= 5) {
        std::cerr << "accel worker " << o.id << ": could not rejoin: " << e.what() << "\n";
        return 3;
      }
      std::cerr << "accel worker " << o.id << ": " << e.what() << "; rejoining as incarnation " << incarnation + 1 << "\n";
      ++incarnation;
      if (snap) {
        snap->incarnation = incarnation;
        if (!o.snapshot_dir.empty()) save_snapshot(snapshot_path(o.snapshot_dir, o.id), *snap, o.snapshot_rows);
      } else {
        std::cerr << "accel worker " << o.id << ": no task to resume; exiting\n";
        return 3;
      }
    } catch (const InputError& e) {
      // A rejected resume: the snapshot belongs to a job that is over (or to
      // an earlier job with the same token). Discard it and join afresh,
      // once: a fresh join that is rejected too ends here.
      if (snap && std::string(e.what()).find("rejected") != std::string::npos) {
        if (!o.snapshot_dir.empty()) std::filesystem::remove(snapshot_path(o.snapshot_dir, o.id));
        std::cerr << "accel worker " << o.id << ": stale snapshot discarded; joining afresh\n";
        snap.reset();
        ++incarnation;
        continue;
      }
      throw;
    }
  }
}

}  // namespace accel::cluster
