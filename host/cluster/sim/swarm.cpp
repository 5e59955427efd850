#include "swarm.hpp"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "accel/io.hpp"
#include "checkpoint.hpp"
#include "engine.hpp"
#include "kmeans/kmeans_job.hpp"
#include "protocol.hpp"
#include "sparse_swarm.hpp"
#include "svm/svm_job.hpp"

namespace accel::cluster::sim {
namespace {

using namespace std::chrono_literals;

// How long (virtual ms) a worker keeps trying to reach a lost coordinator;
// its restart is drawn within 20-320 ms.
constexpr int kCoordinatorWait = 5000;

const char* fault_name(Fault f) {
  switch (f) {
    case Fault::Kill: return "kill";
    case Fault::KillRestart: return "kill+restart";
    case Fault::Pause: return "pause";
    case Fault::Lossy: return "lossy network (5% dropped, 5% twice, up to 2 ms late)";
    case Fault::CoordinatorRestart: return "kill+resume the coordinator";
    case Fault::Partition: return "partition";
    case Fault::Join: return "a worker without an id joins";
    case Fault::Leave: return "leave (SIGTERM)";
    case Fault::Slow: return "slow";
    case Fault::DiskFull: return "checkpoint writes fail (disk full)";
  }
  return "?";
}

Clock::duration secs_to(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

std::string input_of(const std::string& dir, const JobShape& sh) {
  const std::string path = dir + "/x-" + std::to_string(sh.rows) + "x" + std::to_string(sh.cols) + "-" +
                           std::to_string(sh.k) + ".npy";
  if (std::filesystem::exists(path)) return path;
  std::mt19937_64 g(3);
  std::normal_distribution<float> noise(0, 1);
  std::vector<float> c(sh.k * sh.cols), x(sh.rows * sh.cols);
  for (auto& v : c) v = noise(g) * 6;
  for (std::int64_t i = 0; i < sh.rows; ++i)
    for (std::int64_t j = 0; j < sh.cols; ++j) x[i * sh.cols + j] = c[(i % sh.k) * sh.cols + j] + noise(g);
  write_npy(path + ".tmp", x.data(), {sh.rows, sh.cols});
  std::filesystem::rename(path + ".tmp", path);
  return path;
}

// The SVM's training set: two overlapping classes in 8 features, 1,500
// rows, LIBSVM text; a few hundred support vectors and ~100 solver rounds.
std::string svm_input_of(const std::string& dir) {
  const std::string path = dir + "/svm-1500x8.libsvm";
  if (std::filesystem::exists(path)) return path;
  std::mt19937_64 g(5);
  std::normal_distribution<double> noise(0, 1);
  {
    std::ofstream out(path + ".tmp");
    for (int i = 0; i < 1500; ++i) {
      const int label = i % 2 ? 1 : -1;
      out << label;
      for (int j = 1; j <= 8; ++j) {
        char v[32];
        std::snprintf(v, sizeof v, "%.4f", noise(g) + (j <= 2 ? 0.9 * label : 0.0));
        out << ' ' << j << ':' << v;
      }
      out << '\n';
    }
  }
  std::filesystem::rename(path + ".tmp", path);
  return path;
}

std::unique_ptr<Job> make_job(const SwarmOptions& o, const std::string& dir, bool resumed) {
  if (o.workload == "svm") {
    SvmJobOptions so;
    so.train_file = svm_input_of(o.dir);
    so.model_file = dir + "/model";
    so.params.cache_mb = 4;
    so.params.ws_size = 64;  // more, shorter rounds: more of them for faults to fall in
    so.shared_storage = o.pull;
    return std::make_unique<SvmJob>(so);
  }
  KMeansJobOptions ko;
  ko.input = input_of(o.dir, o.shape);
  ko.k = o.shape.k;
  ko.max_iter = o.iterations;
  ko.tol = 0;
  ko.output_centroids = dir + "/centroids.npy";
  ko.resumed = resumed;
  ko.pull = o.pull;
  return std::make_unique<KMeansJob>(ko);
}

// What the job's result is, for the invariants.
void take_result(Job& job, JobRun& out) {
  if (auto* svm = dynamic_cast<SvmJob*>(&job)) {
    out.objectives.clear();
    for (const auto& p : svm->report().problems) out.objectives.push_back(p.obj);
    out.support_vectors = svm->model().sv.rows;
  }
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

JobRun run_job(std::uint64_t seed, int workers, const std::vector<FaultAt>& faults,
               const std::map<int, double>& when, const SwarmOptions& o, const std::string& dir) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  World w(seed, o.link);
  JobRun out;
  // A coordinator killed mid-job is resumed from the checkpoint it writes
  // every round (Young's interval is 0 in virtual time, where writing costs
  // none), and the workers wait for it meanwhile.
  const bool restarts = std::any_of(faults.begin(), faults.end(),
                                    [](const FaultAt& f) { return f.kind == Fault::CoordinatorRestart; });
  const bool checkpoints =
      restarts || std::any_of(faults.begin(), faults.end(), [](const FaultAt& f) { return f.kind == Fault::DiskFull; });
  const std::string checkpoint_dir = dir + "/checkpoint";
  const int joins = static_cast<int>(
      std::count_if(faults.begin(), faults.end(), [](const FaultAt& f) { return f.kind == Fault::Join; }));
  // A kill that comes after the coordinator ended finds no process; nor
  // is there one to restart then (the resumed run would add its result
  // to the first's: seed 8258 of the mixed workload).
  bool coordinator_ended = false;
  auto coordinator = [&](bool resume, Clock::duration at) {
    return w.spawn(
        "coordinator",
        [&, resume] {
          if (resume && coordinator_ended) return;
          if (o.workload == "sparse") return run_sparse_rank0(o, workers, joins, dir, out);
          omp_set_num_threads(1);
          try {
            const auto job = make_job(o, dir, resume);
            CoordinatorOptions co;
            co.job = kSwarmToken;
            co.job_file = dir + "/job.token";
            co.workers = workers;
            co.gather_from = o.gather_from;
            co.tree_from = o.tree_from;
            co.max_workers = workers + joins;
            co.listen = "127.0.0.1:40000";
            co.timeout_ms = o.timeout_ms;
            co.join_timeout_ms = 10000;
            co.print_summary = false;
            co.log_json = dir + (resume ? "/coordinator-resumed.jsonl" : "/coordinator.jsonl");
            if (checkpoints) (resume ? co.resume_dir : co.checkpoint_dir) = checkpoint_dir;
            if (o.workload == "svm") co.device = "cpu";
            co.pull = o.pull;
            if (o.pull) co.input = o.workload == "svm" ? svm_input_of(o.dir) : input_of(o.dir, o.shape);
            out.coordinator_exit = run_coordinator(co, *job);
            take_result(*job, out);
          } catch (const std::exception& e) {
            out.coordinator_exit = 2;
            out.coordinator_error = e.what();
          }
          coordinator_ended = true;
        },
        at);
  };
  World::Proc coordinator_proc = coordinator(false, {});
  int spawned = 0;
  std::map<int, std::uint32_t> incarnations;  // by id
  // Worker `id` (0: one without an id, which the door gives one: elastic
  // membership) from `at`; with `leave`, it asks to leave (SIGTERM) at the
  // first round boundary from that time on.
  auto worker = [&](int id, Clock::duration at, std::optional<Clock::duration> leave = std::nullopt) {
    const std::string log = dir + "/worker-" + (id ? std::to_string(id) : std::string("joined")) + "-" +
                            std::to_string(++spawned) + ".jsonl";
    if (o.workload == "sparse")
      return w.spawn(
          "worker-" + std::to_string(id),
          [&o, &w, &out, id, incarnation = ++incarnations[id], workers, dir, leave] {
            run_sparse_member(o, w, id, incarnation, workers, dir, leave, out);
          },
          at);
    return w.spawn(
        "worker-" + std::to_string(id),
        [&o, &w, id, log, restarts, leave, dir] {
          omp_set_num_threads(1);
          WorkerOptions wo;
          if (o.snapshots) wo.snapshot_dir = dir + "/snapshots";
          wo.job = kSwarmToken;
          wo.coordinator = "127.0.0.1:40000";
          wo.id = static_cast<std::uint32_t>(id);
          wo.timeout_ms = o.timeout_ms;
          if (o.workload == "svm") wo.device = "cpu";
          if (restarts) wo.coordinator_timeout_ms = kCoordinatorWait;
          wo.log_json = log;
          wo.memory_room = [room = o.worker_room] { return room; };  // the host's memory is not the simulation's
          try {
            WorkerRun run(wo);
            bool left = false;
            while (run.step())
              if (leave && !left && w.elapsed() >= *leave) {
                run.leave();
                left = true;
              }
          } catch (const std::exception&) {
            // a worker that cannot go on ends; the coordinator's result is judged
          }
        },
        at);
  };
  const auto time_of = [&](const FaultAt& f) {
    const auto it = when.lower_bound(f.round);
    return secs_to(it == when.end() ? when.rbegin()->second : it->second);
  };
  std::map<int, Clock::duration> leaves;
  for (const auto& f : faults)
    if (f.kind == Fault::Leave && !leaves.count(f.worker)) leaves[f.worker] = time_of(f);
  std::map<int, World::Proc> procs;
  for (int i = 1; i <= workers; ++i)
    procs[i] = worker(i, 1ms, leaves.count(i) ? std::optional(leaves.at(i)) : std::nullopt);
  for (const auto& f : faults) {
    const auto at = time_of(f);
    if (f.kind == Fault::Join) {
      worker(0, at);
    } else if (f.kind == Fault::Leave) {
      // given to the worker at its start (leaves)
    } else if (f.kind == Fault::Lossy) {
      w.message_faults({at, at + f.length, 0.05, 0.05, std::chrono::milliseconds(2)});
    } else if (f.kind == Fault::Partition) {
      w.partition(f.worker == 0 ? coordinator_proc : procs.at(f.worker), at, f.length);
    } else if (f.kind == Fault::CoordinatorRestart) {
      w.kill(coordinator_proc, at);
      coordinator_proc = coordinator(true, at + f.length);
    } else if (f.kind == Fault::Pause) {
      w.pause(procs.at(f.worker), at, f.length);
    } else if (f.kind == Fault::Slow) {
      w.slow(procs.at(f.worker), at, f.length, f.step);
    } else if (f.kind == Fault::DiskFull) {
      // A directory where the checkpoint's temporary file goes: every save
      // fails meanwhile (even for root) through the engine's own write.
      const std::string tmp = checkpoint_path(checkpoint_dir) + ".tmp." + std::to_string(::getpid());
      w.spawn(
          "disk",
          [&w, tmp, length = f.length] {
            std::filesystem::create_directories(tmp);
            w.sleep_for(length);
            std::filesystem::remove(tmp);
          },
          at);
    } else {
      w.kill(procs.at(f.worker), at);
      if (f.kind == Fault::KillRestart) procs[f.worker] = worker(f.worker, at + f.length);
    }
  }
  out.ended = w.run(600s);
  out.seconds = std::chrono::duration<double>(w.elapsed()).count();
  out.stats = w.stats();
  if (out.coordinator_exit == 0 && o.workload == "kmeans") {
    const Matrix m = load_matrix(dir + "/centroids.npy");
    out.centroids.assign(m.row(0), m.row(0) + m.rows * m.cols);
  }
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".jsonl") out.logs[e.path().stem().string()] = slurp(e.path().string());
  std::istringstream lines(out.logs["coordinator"]);
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("iteration") && j.contains("members") && j.value("participant", -1) == 0 &&
        (o.workload != "kmeans" || j.contains("inertia")))
      out.round_at[j["iteration"].get<int>()] = j["t_s"].get<double>();
  }
  return out;
}

namespace {

// The failure-free run of `workers` workers of o.workload, once per process.
const JobRun& reference(int workers, const SwarmOptions& o) {
  static std::mutex mu;
  static std::map<std::pair<std::string, int>, JobRun> cache;
  std::lock_guard lock(mu);
  const std::string job = o.workload == "sparse" ? "sparse-" + o.exchange : o.workload;
  const auto key = std::make_pair(job, workers);
  auto it = cache.find(key);
  if (it == cache.end())
    it = cache.emplace(key, run_job(0, workers, {}, {}, o, o.dir + "/reference-" + job + "-" + std::to_string(workers))).first;
  return it->second;
}

// The first invariant the result of `run` breaks against the failure-free
// `ref` (empty: none): k-means centroids, or SVM objectives, within 1e-6
// relative.
std::string result_differs(const JobRun& run, const JobRun& ref) {
  for (std::size_t i = 0; i < ref.objectives.size() && i < run.objectives.size(); ++i) {
    const double a = run.objectives[i], b = ref.objectives[i];
    if (std::abs(a - b) > 1e-6 * std::abs(b))
      return "problem " + std::to_string(i) + "'s objective is " + std::to_string(a) + ", the failure-free run's " + std::to_string(b);
  }
  if (run.objectives.size() != ref.objectives.size()) return "the SVM solved another number of problems";
  if (run.centroids.size() != ref.centroids.size()) return "the centroids have another shape";
  for (std::size_t i = 0; i < ref.centroids.size(); ++i) {
    const double a = run.centroids[i], b = ref.centroids[i];
    if (std::abs(a - b) > 1e-6 * std::max(1.0, std::abs(b)))
      return "centroid value " + std::to_string(i) + " is " + std::to_string(a) + ", the failure-free run's " + std::to_string(b);
  }
  return {};
}

// Every participant counts what the coordinator counted, or stops: one
// that counted a round otherwise (a word of the coordinator's lost on its
// way) may log it, but must rejoin before it counts another round, since
// its next contribution is computed from that state (node.cpp refuses it).
std::string disagreement(const JobRun& r) {
  auto rounds = [](const std::string& text, auto&& on) {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      const auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object()) on(j);
    }
  };
  std::map<int, std::string> coordinator;  // iteration -> inertia, of the coordinator and of its resumed self
  for (const auto& [who, text] : r.logs)
    if (who.starts_with("coordinator"))
      rounds(text, [&](const nlohmann::json& j) {
        if (j.contains("iteration") && j.contains("inertia")) coordinator[j["iteration"].get<int>()] = j["inertia"].dump();
      });
  for (const auto& [who, text] : r.logs) {
    if (who.starts_with("coordinator")) continue;
    std::string violation;
    int apart = 0;  // a round this worker counted otherwise, not yet followed by its rejoin
    rounds(text, [&](const nlohmann::json& j) {
      if (!violation.empty()) return;
      if (j.value("event", "") == "resumed") apart = 0;
      if (!j.contains("iteration") || !j.contains("inertia")) return;
      const int t = j["iteration"].get<int>();
      if (apart)
        violation = who + " counted round " + std::to_string(apart) + " otherwise than the coordinator and went on to count round " +
                    std::to_string(t);
      const auto c = coordinator.find(t);
      if (c != coordinator.end() && c->second != j["inertia"].dump()) apart = t;
    });
    if (!violation.empty()) return violation;
  }
  return {};
}

std::vector<FaultAt> draw_faults(std::mt19937_64& g, int workers, int iterations, int timeout_ms, bool lossy) {
  std::vector<FaultAt> out;
  const int n = static_cast<int>(g() % 4);  // 0 to 3 faults
  const auto round = [&] { return 2 + static_cast<int>(g() % static_cast<std::uint64_t>(iterations - 6)); };
  const auto ms = [](std::uint64_t v) { return std::chrono::duration_cast<Clock::duration>(std::chrono::milliseconds(v)); };
  for (int i = 0; i < n; ++i) {
    FaultAt f;
    f.kind = static_cast<Fault>(g() % 3);
    f.worker = 1 + static_cast<int>(g() % static_cast<std::uint64_t>(workers));
    f.round = round();
    if (f.kind == Fault::Pause) f.length = ms(g() % 2 ? timeout_ms / 2 : timeout_ms * 3);  // under or past the timeout
    // Back within 5-64 ms: a k-means job of 60 rounds takes some 70 ms here,
    // and a restart after its end tests nothing (20-219 ms made most of them that).
    if (f.kind == Fault::KillRestart) f.length = ms(5 + g() % 60);
    out.push_back(f);
    if (g() % 4 == 0 && workers > 2) {  // another worker lost at once
      FaultAt also = f;
      also.kind = Fault::Kill;
      also.length = {};
      also.worker = 1 + (f.worker % workers);
      out.push_back(also);
    }
  }
  if (lossy && g() % 2) {  // drawn after the others: they are those of the same seed without it
    FaultAt f{Fault::Lossy};
    f.round = round();
    f.length = ms(20 + g() % 100);
    out.push_back(f);
  }
  if (g() % 4 == 0) {  // drawn last, for the same reason
    FaultAt f{Fault::CoordinatorRestart};
    f.worker = 0;
    f.round = round();
    f.length = ms(20 + g() % 300);
    out.push_back(f);
  }
  if (g() % 4 == 0) {  // drawn last, for the same reason: one process cut off, under or past the timeout
    FaultAt f{Fault::Partition};
    f.worker = static_cast<int>(g() % static_cast<std::uint64_t>(workers + 1));
    f.round = round();
    f.length = ms(g() % 2 ? timeout_ms / 2 : timeout_ms * 3);
    out.push_back(f);
  }
  if (g() % 4 == 0) {  // drawn last, for the same reason: elastic membership, one or two joining
    FaultAt f{Fault::Join};
    f.worker = 0;
    f.round = round();
    out.push_back(f);
    if (g() % 2) {
      f.round = round();
      out.push_back(f);
    }
  }
  if (g() % 4 == 0) {  // and a graceful leave
    FaultAt f{Fault::Leave};
    f.worker = 1 + static_cast<int>(g() % static_cast<std::uint64_t>(workers));
    f.round = round();
    out.push_back(f);
  }
  if (g() % 4 == 0) {  // a slow worker: a straggler (a tenth of the timeout an arrival), or one evicted (the whole)
    FaultAt f{Fault::Slow};
    f.worker = 1 + static_cast<int>(g() % static_cast<std::uint64_t>(workers));
    f.round = round();
    f.length = ms(timeout_ms * (2 + g() % 10));
    f.step = ms(g() % 2 ? std::max(1, timeout_ms / 10) : timeout_ms);
    out.push_back(f);
  }
  if (g() % 5 == 0) {  // the coordinator's disk full for a while
    FaultAt f{Fault::DiskFull};
    f.worker = 0;
    f.round = round();
    f.length = ms(20 + g() % 300);
    out.push_back(f);
  }
  return out;
}

}  // namespace

SeedResult run_seed(std::uint64_t seed, const SwarmOptions& options) {
  SeedResult res;
  res.seed = seed;
  SwarmOptions o = options;
  bool drawn = false, tree = false;  // gathered whatever the worker count; up a tree too
  if (o.workload == "mixed") {  // from a generator of its own: a seed's other draws are those of its k-means run
    std::mt19937_64 w(seed ^ 0x5eedull);
    o.workload = w() % 3 == 0 ? "svm" : "kmeans";
    drawn = o.workload == "kmeans" && w() % 3 == 0;  // a third of k-means seeds: --gather-from 1
    tree = drawn && w() % 2 == 0;                    // half of those: --tree-from 1 as well
    if (o.workload == "kmeans" && !drawn && w() % 2 == 0) o.workload = "sparse";  // half of the rest
  }
  if (o.workload == "sparse") {  // from a generator of its own too
    std::mt19937_64 x(seed ^ 0x5ba5eull);
    const char* exchanges[] = {"auto", "allgather", "reduce-scatter"};
    o.exchange = exchanges[x() % 3];
  }
  bool pull = false, snapshots = false;  // the faulty run's; the reference pushes rows and keeps no snapshot
  if (o.workload != "sparse") {
    std::mt19937_64 x(seed ^ 0x9011ull);
    pull = x() % 2 == 0;
    snapshots = x() % 2 == 0;
  }
  std::mt19937_64 g(seed * 0x9e3779b97f4a7c15ull + 1);
  const int workers = o.min_workers + static_cast<int>(g() % static_cast<std::uint64_t>(o.max_workers - o.min_workers + 1));
  // The rest as the coordinator's --gather-from says (by default, gathered
  // from 8 participants). The failure-free reference is the all-to-all's,
  // which the gathered exchange's equals bit for bit and the tree's within
  // rounding (its sums add in the tree's order).
  SwarmOptions run_options = o;
  run_options.gather_from = drawn ? 1 : o.gather_from;
  run_options.tree_from = tree ? 1 : o.tree_from;
  run_options.pull = pull;
  run_options.snapshots = snapshots;
  o.gather_from = 0;
  o.tree_from = 0;
  const JobRun& ref = reference(workers, o);
  if (ref.coordinator_exit != 0) {
    res.ok = false;
    res.violation = "the failure-free run failed: " + ref.coordinator_error;
    return res;
  }
  // The SVM's rounds are its solver's, the sparse allreduce's its steps'
  // (one or two each): faults fall among those of the failure-free run.
  const int rounds = o.workload != "kmeans" ? std::max<int>(8, static_cast<int>(ref.round_at.size())) : o.iterations;
  auto faults = draw_faults(g, workers, rounds, o.timeout_ms, o.message_faults);
  // Rank 0 of a sparse group is its coordinator and has no checkpoint:
  // when it dies, the group ends (docs/cluster.md).
  if (o.workload == "sparse")
    std::erase_if(faults, [](const FaultAt& f) { return f.kind == Fault::CoordinatorRestart || f.kind == Fault::DiskFull; });
  // As the coordinator decides: by its participants, joiners' places included.
  const auto joiners = std::count_if(faults.begin(), faults.end(), [](const FaultAt& f) { return f.kind == Fault::Join; });
  const bool gathered = run_options.gather_from > 0 && workers + 1 + joiners >= run_options.gather_from;
  const bool up_tree = gathered && run_options.tree_from > 0 && workers + 1 + joiners >= run_options.tree_from;
  res.schedule.push_back((o.workload == "svm"      ? std::string("svm, ")
                          : o.workload == "sparse" ? "sparse allreduce (" + o.exchange + "), "
                          : up_tree                ? std::string("k-means (gathered, tree), ")
                          : gathered               ? std::string("k-means (gathered), ")
                                                   : std::string("k-means, ")) +
                         std::to_string(workers) + " workers, " +
                         std::to_string(rounds) + " rounds, timeout " + std::to_string(o.timeout_ms) + " ms" +
                         (pull ? ", --pull" : "") + (snapshots ? ", snapshots" : ""));
  for (const auto& f : faults)
    res.schedule.push_back(std::string(fault_name(f.kind)) +
                           (f.kind == Fault::Lossy || f.kind == Fault::CoordinatorRestart || f.kind == Fault::Join ||
                                    f.kind == Fault::DiskFull
                                ? std::string()
                            : f.worker == 0 ? std::string(" the coordinator")
                                            : " worker " + std::to_string(f.worker)) +
                           " at round " +
                           std::to_string(f.round) +
                           (f.length.count() ? " for " + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(f.length).count()) + " ms" : "") +
                           (f.step.count() ? ", each arrival costing " + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(f.step).count()) + " ms" : ""));
  const JobRun run = run_job(seed, workers, faults, ref.round_at, run_options, o.dir + "/seed-" + std::to_string(seed));
  res.virtual_seconds = run.seconds;
  res.messages = run.stats.messages;
  res.longest_wait = std::chrono::duration<double>(run.stats.longest_wait).count();
  res.peak_held = run.stats.peak_held;
  auto fail = [&](std::string why) {
    res.ok = false;
    res.violation = std::move(why);
    return res;
  };
  if (!run.ended) return fail("a process was still running at the time limit (a wait without a bound)");
  // Every wait is a timeout's or a retry's: none should last 20 timeouts
  // (at least 1 s), nor should a transport's queue fill up and drop.
  const auto bound = std::chrono::milliseconds(std::max(20 * o.timeout_ms, 1000));
  if (run.stats.longest_wait > bound)
    return fail("a process waited " + std::to_string(res.longest_wait) + " s at once (bound: " +
                std::to_string(bound.count()) + " ms)");
  if (run.stats.dropped_full > 0)
    return fail(std::to_string(run.stats.dropped_full) + " messages dropped by a full transport queue");
  if (run.coordinator_exit != 0)
    return fail("the coordinator exited " + std::to_string(run.coordinator_exit) + ": " + run.coordinator_error);
  if (o.workload == "sparse") {
    if (auto d = sparse_violation(run, faults, workers, o.iterations); !d.empty()) return fail(d);
  } else if (auto d = disagreement(run); !d.empty()) {
    return fail("participants disagree: " + d);
  }
  if (auto d = result_differs(run, ref); !d.empty()) return fail(d);
  if (!o.keep) std::filesystem::remove_all(o.dir + "/seed-" + std::to_string(seed));
  return res;
}

ScaleResult run_scale(int workers, const SwarmOptions& o) {
  ScaleResult res;
  res.workers = workers;
  const auto t0 = std::chrono::steady_clock::now();
  const std::string dir = o.dir + "/scale-" + std::to_string(workers);
  const JobRun ref = run_job(1, workers, {}, {}, o, dir);
  if (ref.coordinator_exit != 0 || !ref.ended) return res;
  const double rounds = o.iterations;
  const auto coord = ref.stats.received.count(0) ? ref.stats.received.at(0) : std::pair<std::uint64_t, std::uint64_t>{};
  res.coordinator_messages = coord.first / rounds;
  res.coordinator_bytes = coord.second / rounds;
  for (const auto& [type, mb] : ref.stats.first_by_type) {
    const std::string kind = type == 0 ? "bulk" : type < 0 ? "undecoded" : type_name(static_cast<std::uint16_t>(type));
    res.coordinator_by_kind[kind] = {mb.first / rounds, mb.second / rounds};
  }
  res.member_messages = (static_cast<double>(ref.stats.messages) - coord.first) / workers / rounds;
  res.member_bytes = (static_cast<double>(ref.stats.bytes) - coord.second) / workers / rounds;
  std::vector<double> per;
  for (auto it = std::next(ref.round_at.begin()); it != ref.round_at.end(); ++it) {
    per.push_back(it->second - std::prev(it)->second);
    if (per.back() > res.slowest_seconds) res.slowest_round = it->first, res.slowest_seconds = per.back();
  }
  std::sort(per.begin(), per.end());
  res.round_seconds = per.empty() ? 0 : per[per.size() / 2];
  // A tenth of the workers killed at once in the middle round.
  res.killed = std::max(1, workers / 10);
  const int mid = o.iterations / 2;
  std::vector<FaultAt> kills;
  for (int i = 0; i < res.killed; ++i) kills.push_back({Fault::Kill, 1 + i * workers / res.killed, mid, {}});
  const JobRun k = run_job(2, workers, kills, ref.round_at, o, dir + "-killed");
  const double at = ref.round_at.lower_bound(mid)->second;
  for (const auto& [t, when] : k.round_at)
    if (when > at) {
      res.recover_seconds = when - at;
      break;
    }
  if (k.coordinator_exit == 0 && k.centroids.size() == ref.centroids.size()) {
    res.worst = 0;
    for (std::size_t i = 0; i < ref.centroids.size(); ++i)
      res.worst = std::max(res.worst, std::abs(double(k.centroids[i]) - ref.centroids[i]) /
                                          std::max(1.0, std::abs(double(ref.centroids[i]))));
  }
  res.ok = k.coordinator_exit == 0 && k.ended && res.worst >= 0 && res.worst <= 1e-6;
  if (!o.keep) {
    std::filesystem::remove_all(dir);
    std::filesystem::remove_all(dir + "-killed");
  }
  res.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace accel::cluster::sim
