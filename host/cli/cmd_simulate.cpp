// `accel simulate`: swarm runs of the engine's own coordinator and workers
// in the deterministic simulator (host/cluster/sim/swarm.hpp), one seed a
// job and a fault schedule. A failing seed is printed with its schedule,
// the first invariant it violated, and the command that replays it.
#include <boost/program_options.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "accel/error.hpp"
#include "accel/log.hpp"
#include "commands.hpp"
#include "swarm.hpp"

namespace po = boost::program_options;

namespace accel::cli {
namespace {

// "A" or "A-B" (inclusive).
std::pair<std::uint64_t, std::uint64_t> seed_range(const std::string& s) {
  try {
    std::size_t used = 0;
    const auto dash = s.find('-');
    const std::uint64_t a = std::stoull(s.substr(0, dash), &used);
    if (used != (dash == std::string::npos ? s.size() : dash)) throw std::invalid_argument(s);
    if (dash == std::string::npos) return {a, a};
    const std::uint64_t b = std::stoull(s.substr(dash + 1), &used);
    if (used != s.size() - dash - 1 || b < a) throw std::invalid_argument(s);
    return {a, b};
  } catch (const std::logic_error&) {
    throw InputError("--seeds " + s + ": give a seed or a range A-B with A <= B");
  }
}

// The scale report: one row per worker count.
int scale_report(const std::vector<int>& counts, std::int64_t rows_per_member, cluster::sim::SwarmOptions o) {
  std::cout << "| workers | messages in / worker / round | bytes in / worker / round | coordinator messages / round | "
               "coordinator bytes / round | round (virtual ms) | killed at once | counting again after (virtual ms) | "
               "centroids vs failure-free | wall s |\n|---|---|---|---|---|---|---|---|---|---|\n";
  int bad = 0;
  std::ostringstream kinds;
  for (int p : counts) {
    o.shape.rows = rows_per_member * (p + 1);
    const auto r = cluster::sim::run_scale(p, o);
    bad += !r.ok;
    kinds << "- " << p << " workers (the slowest round: " << r.slowest_round << ", " << r.slowest_seconds * 1e3
          << " ms):";
    for (const auto& [kind, mb] : r.coordinator_by_kind)
      kinds << " " << kind << " " << mb.first << " (" << mb.second << " B)" << (&kind == &r.coordinator_by_kind.rbegin()->first ? "" : ",");
    kinds << "\n";
    std::cout << "| " << p << " | " << r.member_messages << " | " << r.member_bytes << " | " << r.coordinator_messages
              << " | " << r.coordinator_bytes << " | " << r.round_seconds * 1e3 << " | " << r.killed << " | "
              << (r.recover_seconds < 0 ? std::string("never") : std::to_string(r.recover_seconds * 1e3)) << " | "
              << r.worst << " | " << r.wall_seconds << " |" << (r.ok ? "" : " (a job failed)") << std::endl;
  }
  std::cout << "\nThe coordinator's messages per round by kind (failure-free run; setup spread over the rounds):\n"
            << kinds.str();
  return bad ? 1 : 0;
}

// Seeds first..last on `jobs` threads, each seed a World of its own (a
// simulated process's hooks are its thread's, so worlds do not meet);
// on_result sees every seed's result in seed order, as soon as the seeds
// before it are done. A seed that throws (its input cannot be written)
// starts no more seeds, and its error is rethrown in its turn.
void run_seeds(std::uint64_t first, std::uint64_t last, int jobs, const cluster::sim::SwarmOptions& o,
               const std::function<void(std::uint64_t, const cluster::sim::SeedResult&)>& on_result) {
  const std::size_t n = last - first + 1;
  std::vector<std::optional<cluster::sim::SeedResult>> done(n);
  std::vector<std::exception_ptr> error(n);
  std::mutex mu;
  std::condition_variable ready;
  std::atomic<std::size_t> next{0};
  std::vector<std::jthread> threads;
  for (std::size_t j = 0; j < std::min<std::size_t>(static_cast<std::size_t>(jobs), n); ++j)
    threads.emplace_back([&] {
      for (std::size_t i; (i = next++) < n;) {
        std::optional<cluster::sim::SeedResult> r;
        std::exception_ptr e;
        try {
          r = cluster::sim::run_seed(first + i, o);
        } catch (...) {
          e = std::current_exception();
          next = n;
        }
        std::lock_guard lock(mu);
        done[i] = r ? std::move(r) : cluster::sim::SeedResult{};
        error[i] = e;
        ready.notify_all();
      }
    });
  for (std::size_t i = 0; i < n; ++i) {
    std::unique_lock lock(mu);
    ready.wait(lock, [&] { return done[i].has_value(); });
    if (error[i]) std::rethrow_exception(error[i]);
    const cluster::sim::SeedResult r = std::move(*done[i]);
    done[i].reset();
    lock.unlock();
    on_result(first + i, r);
  }
}

}  // namespace

int simulate_main(const std::vector<std::string>& args) {
  po::options_description opts("accel simulate [options]");
  std::string seeds, dir, scale;
  std::int64_t rows_per_member = 0;
  int min_workers = 0, max_workers = 0, jobs = 1;
  double latency_us = 0, gbits = 0;
  cluster::sim::SwarmOptions o;
  opts.add_options()("help,h", "this help")
      ("seeds", po::value(&seeds)->default_value("1-20"), "a seed or a range A-B: one job and fault schedule each")
      ("min-workers", po::value(&min_workers)->default_value(o.min_workers), "fewest workers a seed draws")
      ("max-workers", po::value(&max_workers)->default_value(o.max_workers), "most workers a seed draws")
      ("workload", po::value(&o.workload)->default_value(o.workload),
       "kmeans, svm (C-SVC, two classes), sparse (the sparse allreduce), or mixed (each seed draws one)")
      ("iterations", po::value(&o.iterations)->default_value(o.iterations),
       "k-means rounds of each job; the sparse allreduce's steps")
      ("gather-from", po::value(&o.gather_from)->default_value(o.gather_from),
       "k-means: the coordinator's --gather-from (from this many participants on, rounds go through it; "
       "0: never)")
      ("tree-from", po::value(&o.tree_from)->default_value(o.tree_from),
       "k-means: the coordinator's --tree-from (gathered rounds go up a binary tree of members; 0: never)")
      ("timeout-ms", po::value(&o.timeout_ms)->default_value(o.timeout_ms), "the barrier's timeout (virtual ms)")
      ("latency-us", po::value(&latency_us)->default_value(1000), "link latency (virtual microseconds)")
      ("gbits", po::value(&gbits)->default_value(1), "link bandwidth (Gbit/s)")
      ("dir", po::value(&dir), "scratch folder (default: a new one under the temporary folder, removed after)")
      ("verbose", "print every seed's schedule, not only the failing ones'")
      ("keep", "keep every seed's logs under --dir, not only the failing ones' (--scale: every run's)")
      ("jobs,j", po::value(&jobs)->default_value(1), "seeds run at once, each on a thread (results print in seed order)")
      ("message-faults", "also draw windows of a lossy network (control messages dropped, duplicated, delayed)")
      ("scale", po::value(&scale), "instead of seeds: a failure-free job, then one with a tenth of the workers killed, "
                                   "for each worker count of this list (e.g. 4,16,64); prints the scale report")
      ("k", po::value(&o.shape.k)->default_value(o.shape.k), "--scale: clusters")
      ("d", po::value(&o.shape.cols)->default_value(o.shape.cols), "--scale: features")
      ("rows-per-member", po::value(&rows_per_member)->default_value(256), "--scale: rows of each participant");
  po::variables_map vm;
  if (!parse_or_help(args, opts, vm)) return 0;
  const auto [first, last] = seed_range(seeds);
  if (min_workers < 1 || max_workers < min_workers || max_workers > 64)
    throw InputError("--min-workers " + std::to_string(min_workers) + ", --max-workers " +
                     std::to_string(max_workers) + ": need 1 <= min <= max <= 64");
  if (o.workload != "kmeans" && o.workload != "svm" && o.workload != "sparse" && o.workload != "mixed")
    throw InputError("--workload " + o.workload + ": kmeans, svm, sparse or mixed");
  if (vm.count("scale") && o.workload != "kmeans") throw InputError("--scale: k-means only (--workload kmeans)");
  if (o.iterations < 8 || o.iterations > 100000) throw InputError("--iterations " + std::to_string(o.iterations) + ": 8 to 100000");
  if (o.gather_from < 0) throw InputError("--gather-from " + std::to_string(o.gather_from) + ": 0 (never) or more");
  if (o.tree_from < 0) throw InputError("--tree-from " + std::to_string(o.tree_from) + ": 0 (never) or more");
  if (jobs < 1 || jobs > 256) throw InputError("--jobs " + std::to_string(jobs) + ": 1 to 256");
  if (o.timeout_ms < 1) throw InputError("--timeout-ms " + std::to_string(o.timeout_ms) + ": must be positive");
  if (!(latency_us >= 0 && latency_us <= 1e7)) throw InputError("--latency-us " + std::to_string(latency_us) + ": 0 to 1e7");
  if (!(gbits > 0 && gbits <= 1e4)) throw InputError("--gbits " + std::to_string(gbits) + ": above 0, at most 1e4");
  o.message_faults = vm.count("message-faults") > 0;
  o.keep = vm.count("keep") > 0;
  if (o.keep && dir.empty()) throw InputError("--keep: give --dir, where the logs stay");
  o.min_workers = min_workers;
  o.max_workers = max_workers;
  o.link.latency = std::chrono::duration_cast<cluster::Clock::duration>(std::chrono::duration<double, std::micro>(latency_us));
  o.link.bytes_per_second = gbits * 1e9 / 8;
  std::vector<int> counts;
  if (vm.count("scale")) {
    std::stringstream in(scale);
    for (std::string item; std::getline(in, item, ',');) {
      std::size_t used = 0;
      int p = 0;
      try {
        p = std::stoi(item, &used);
      } catch (const std::logic_error&) {
      }
      if (used != item.size() || p < 1 || p > 4096) throw InputError("--scale " + scale + ": worker counts 1 to 4096, comma-separated");
      counts.push_back(p);
    }
    if (counts.empty()) throw InputError("--scale: no worker count");
    if (o.shape.k < 1 || o.shape.cols < 1 || rows_per_member < o.shape.k)
      throw InputError("--k, --d, --rows-per-member: positive, and at least k rows a member");
  }
  const bool temporary = dir.empty();
  o.dir = temporary ? (std::filesystem::temp_directory_path() / ("accel-simulate-" + std::to_string(::getpid()))).string() : dir;
  std::error_code ec;
  std::filesystem::create_directories(o.dir, ec);
  if (ec) throw InputError("--dir " + o.dir + ": " + ec.message());
  struct RemovedAfter {  // the default scratch folder goes however the run ends
    std::string dir;
    ~RemovedAfter() {
      std::error_code ignored;
      if (!dir.empty()) std::filesystem::remove_all(dir, ignored);
    }
  } scratch{temporary ? o.dir : std::string()};
  // What the simulated processes log (evictions, a restarted worker that
  // finds the job over) is the faults' doing, not this command's: with
  // --verbose it is shown, otherwise the invariants speak for the run.
  struct DefaultSinkAfter {  // this command's own errors are printed again
    ~DefaultSinkAfter() { log::set_sink({}); }
  } restore;
  if (vm.count("verbose")) log::set_level(log::Level::Error);
  else log::set_sink([](log::Level, std::string_view, std::string_view) {});
  if (!counts.empty()) return scale_report(counts, rows_per_member, o);
  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t failed = 0, messages = 0;
  double simulated = 0, longest_wait = 0;
  std::size_t held = 0;
  run_seeds(first, last, jobs, o, [&](std::uint64_t s, const cluster::sim::SeedResult& r) {
    simulated += r.virtual_seconds;
    messages += r.messages;
    longest_wait = std::max(longest_wait, r.longest_wait);
    held = std::max(held, r.peak_held);
    if (!r.ok || vm.count("verbose")) {
      std::cout << "seed " << s << (r.ok ? ": ok" : ": FAILED: " + r.violation) << " (longest wait " << r.longest_wait
                << " s, at most " << r.peak_held << " messages held)\n";
      for (const auto& line : r.schedule) std::cout << "  " << line << "\n";
      std::cout << std::flush;
    }
    if (!r.ok) {
      ++failed;
      std::cout << "  replay: accel simulate --seeds " << s << " --min-workers " << o.min_workers << " --max-workers "
                << o.max_workers << " --iterations " << o.iterations << " --timeout-ms " << o.timeout_ms
                << " --latency-us " << latency_us << " --gbits " << gbits << " --workload " << o.workload
                << (o.message_faults ? " --message-faults" : "")
                << " --gather-from " << o.gather_from << " --tree-from " << o.tree_from << "\n";
    }
  });
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "simulate: " << (last - first + 1) << " seeds, " << failed << " failed; " << simulated
            << " s simulated, " << messages << " messages, in " << wall << " s; longest wait " << longest_wait
            << " s, at most " << held << " messages held by one process\n";
  return failed ? 1 : 0;
}

}  // namespace accel::cli
