#include "swarm.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "accel/io.hpp"
#include "engine.hpp"
#include "kmeans/kmeans_job.hpp"

namespace accel::cluster::sim {
namespace {

using namespace std::chrono_literals;

constexpr std::uint64_t kToken = 0x5a4d;

const char* fault_name(Fault f) {
  switch (f) {
    case Fault::Kill: return "kill";
    case Fault::KillRestart: return "kill+restart";
    case Fault::Pause: return "pause";
    case Fault::Lossy: return "lossy network (5% dropped, 5% twice, up to 2 ms late)";
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

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

JobRun run_job(std::uint64_t seed, int workers, const std::vector<FaultAt>& faults,
               const std::map<int, double>& when, const SwarmOptions& o, const std::string& dir) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string input = input_of(o.dir, o.shape);
  World w(seed, o.link);
  JobRun out;
  w.spawn("coordinator", [&] {
    omp_set_num_threads(1);
    try {
      KMeansJobOptions ko;
      ko.input = input;
      ko.k = o.shape.k;
      ko.max_iter = o.iterations;
      ko.tol = 0;
      ko.output_centroids = dir + "/centroids.npy";
      KMeansJob job(ko);
      CoordinatorOptions co;
      co.job = kToken;
      co.job_file = dir + "/job.token";
      co.workers = workers;
      co.listen = "127.0.0.1:40000";
      co.timeout_ms = o.timeout_ms;
      co.join_timeout_ms = 10000;
      co.print_summary = false;
      co.log_json = dir + "/coordinator.jsonl";
      out.coordinator_exit = run_coordinator(co, job);
    } catch (const std::exception& e) {
      out.coordinator_exit = 2;
      out.coordinator_error = e.what();
    }
  });
  int spawned = 0;
  auto worker = [&](int id, Clock::duration at) {
    const std::string log = dir + "/worker-" + std::to_string(id) + "-" + std::to_string(++spawned) + ".jsonl";
    return w.spawn(
        "worker-" + std::to_string(id),
        [&o, id, log] {
          omp_set_num_threads(1);
          WorkerOptions wo;
          wo.job = kToken;
          wo.coordinator = "127.0.0.1:40000";
          wo.id = static_cast<std::uint32_t>(id);
          wo.timeout_ms = o.timeout_ms;
          wo.log_json = log;
          try {
            run_worker(wo);
          } catch (const std::exception&) {
            // a worker that cannot go on ends; the coordinator's result is judged
          }
        },
        at);
  };
  std::map<int, World::Proc> procs;
  for (int i = 1; i <= workers; ++i) procs[i] = worker(i, 1ms);
  for (const auto& f : faults) {
    const auto it = when.lower_bound(f.round);
    const auto at = secs_to(it == when.end() ? when.rbegin()->second : it->second);
    if (f.kind == Fault::Lossy) {
      w.message_faults({at, at + f.length, 0.05, 0.05, std::chrono::milliseconds(2)});
    } else if (f.kind == Fault::Pause) {
      w.pause(procs.at(f.worker), at, f.length);
    } else {
      w.kill(procs.at(f.worker), at);
      if (f.kind == Fault::KillRestart) procs[f.worker] = worker(f.worker, at + f.length);
    }
  }
  out.ended = w.run(600s);
  out.seconds = std::chrono::duration<double>(w.elapsed()).count();
  out.stats = w.stats();
  if (out.coordinator_exit == 0) {
    const Matrix m = load_matrix(dir + "/centroids.npy");
    out.centroids.assign(m.row(0), m.row(0) + m.rows * m.cols);
  }
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".jsonl") out.logs[e.path().stem().string()] = slurp(e.path().string());
  std::istringstream lines(out.logs["coordinator"]);
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("iteration") && j.contains("inertia") && j.value("participant", -1) == 0)
      out.round_at[j["iteration"].get<int>()] = j["t_s"].get<double>();
  }
  return out;
}

namespace {

// The failure-free run of `workers` workers, once per process.
const JobRun& reference(int workers, const SwarmOptions& o) {
  static std::mutex mu;
  static std::map<int, JobRun> cache;
  std::lock_guard lock(mu);
  auto it = cache.find(workers);
  if (it == cache.end())
    it = cache.emplace(workers, run_job(0, workers, {}, {}, o, o.dir + "/reference-" + std::to_string(workers))).first;
  return it->second;
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
  std::map<int, std::string> coordinator;  // iteration -> inertia
  rounds(r.logs.at("coordinator"), [&](const nlohmann::json& j) {
    if (j.contains("iteration") && j.contains("inertia")) coordinator[j["iteration"].get<int>()] = j["inertia"].dump();
  });
  for (const auto& [who, text] : r.logs) {
    if (who == "coordinator") continue;
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
    if (f.kind == Fault::KillRestart) f.length = ms(20 + g() % 200);
    out.push_back(f);
    if (g() % 4 == 0 && workers > 2) {  // another worker lost at once
      FaultAt also = f;
      also.kind = Fault::Kill;
      also.length = {};
      also.worker = 1 + (f.worker % workers);
      out.push_back(also);
    }
  }
  if (lossy && g() % 2) {  // drawn last: the other faults are those of the same seed without it
    FaultAt f{Fault::Lossy};
    f.round = round();
    f.length = ms(20 + g() % 100);
    out.push_back(f);
  }
  return out;
}

}  // namespace

SeedResult run_seed(std::uint64_t seed, const SwarmOptions& o) {
  SeedResult res;
  res.seed = seed;
  std::mt19937_64 g(seed * 0x9e3779b97f4a7c15ull + 1);
  const int workers = o.min_workers + static_cast<int>(g() % static_cast<std::uint64_t>(o.max_workers - o.min_workers + 1));
  const auto faults = draw_faults(g, workers, o.iterations, o.timeout_ms, o.message_faults);
  res.schedule.push_back("k-means, " + std::to_string(workers) + " workers, " + std::to_string(o.iterations) +
                         " rounds, timeout " + std::to_string(o.timeout_ms) + " ms");
  for (const auto& f : faults)
    res.schedule.push_back(std::string(fault_name(f.kind)) + (f.kind == Fault::Lossy ? std::string() : " worker " + std::to_string(f.worker)) + " at round " +
                           std::to_string(f.round) +
                           (f.length.count() ? " for " + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(f.length).count()) + " ms" : ""));
  const JobRun& ref = reference(workers, o);
  if (ref.coordinator_exit != 0) {
    res.ok = false;
    res.violation = "the failure-free run failed: " + ref.coordinator_error;
    return res;
  }
  const JobRun run = run_job(seed, workers, faults, ref.round_at, o, o.dir + "/seed-" + std::to_string(seed));
  res.virtual_seconds = run.seconds;
  res.messages = run.stats.messages;
  auto fail = [&](std::string why) {
    res.ok = false;
    res.violation = std::move(why);
    return res;
  };
  if (!run.ended) return fail("a process was still running at the time limit (a wait without a bound)");
  if (run.coordinator_exit != 0)
    return fail("the coordinator exited " + std::to_string(run.coordinator_exit) + ": " + run.coordinator_error);
  if (auto d = disagreement(run); !d.empty()) return fail("participants disagree: " + d);
  if (run.centroids.size() != ref.centroids.size()) return fail("the centroids have another shape");
  for (std::size_t i = 0; i < ref.centroids.size(); ++i) {
    const double a = run.centroids[i], b = ref.centroids[i];
    if (std::abs(a - b) > 1e-6 * std::max(1.0, std::abs(b)))
      return fail("centroid value " + std::to_string(i) + " is " + std::to_string(a) + ", the failure-free run's " +
                  std::to_string(b));
  }
  std::filesystem::remove_all(o.dir + "/seed-" + std::to_string(seed));
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
  res.member_messages = (static_cast<double>(ref.stats.messages) - coord.first) / workers / rounds;
  res.member_bytes = (static_cast<double>(ref.stats.bytes) - coord.second) / workers / rounds;
  std::vector<double> per;
  for (auto it = std::next(ref.round_at.begin()); it != ref.round_at.end(); ++it)
    per.push_back(it->second - std::prev(it)->second);
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
  res.ok = k.coordinator_exit == 0 && k.ended;
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(dir + "-killed");
  res.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace accel::cluster::sim
