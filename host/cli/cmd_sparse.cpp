// `accel sparse-allreduce`: one member of a sparse allreduce group running
// synthetic steps, to check the sums and measure the exchange (every rank
// runs the same command; rank 0 is the coordinator). With --check each
// member regenerates the counted members' pairs and compares the sum it got
// with the sum it computes itself, bit for bit (the same member order), and
// checks that no member skipped a step.
#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <iostream>
#include <optional>
#include <map>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <sys/resource.h>
#include <thread>

#include "accel/error.hpp"
#include "accel/log.hpp"
#include "accel/sparse_allreduce.hpp"
#include "commands.hpp"

namespace po = boost::program_options;

namespace accel::cli {
namespace {

struct Pairs {
  std::vector<std::uint32_t> idx;
  std::vector<float> val;
};

// Member `rank`'s pairs of step `step`: about ratio * n distinct indices, a
// fraction `overlap` of them drawn alike by every member (the union of
// training workers' selections is denser than independent draws).
Pairs synthetic(std::uint64_t seed, std::int64_t step, std::uint32_t rank, std::uint64_t n, double ratio,
                double overlap) {
  std::mt19937_64 g(seed * 1000003 + static_cast<std::uint64_t>(step) * 7919 + rank);
  std::mt19937_64 common(seed * 1000003 + static_cast<std::uint64_t>(step) * 7919 + 0x9e3779b97f4a7c15ull);
  const auto k = static_cast<std::size_t>(std::max(1.0, ratio * static_cast<double>(n)));
  const auto shared = static_cast<std::size_t>(overlap * static_cast<double>(k));
  Pairs p;
  p.idx.resize(k);
  std::uniform_int_distribution<std::uint64_t> at(0, n - 1);
  for (std::size_t j = 0; j < k; ++j) p.idx[j] = static_cast<std::uint32_t>(at(j < shared ? common : g));
  std::sort(p.idx.begin(), p.idx.end());
  p.idx.erase(std::unique(p.idx.begin(), p.idx.end()), p.idx.end());
  std::uniform_real_distribution<float> v(-1.0f, 1.0f);
  p.val.resize(p.idx.size());
  for (auto& x : p.val) x = v(g);
  return p;
}

// --fail RANK:STEP: that member's pairs of that step hold a NaN; it is told
// so and goes on, and the others know it contributed nothing then.
struct Fault {
  std::int64_t rank = -1, step = -1;
};

// The sum a member must get: the counted members' pairs (each of the step
// its tag names; none for the faulty member's faulty step), merged in member
// order.
Pairs expected(std::uint64_t seed, const SparseSum& sum, std::uint64_t n, double ratio, double overlap,
               const Fault& fault) {
  std::vector<float> dense(n, 0.0f);
  std::vector<char> hit(n, 0);
  for (std::size_t k = 0; k < sum.members.size(); ++k) {
    if (sum.members[k] == fault.rank && static_cast<std::int64_t>(sum.tags[k]) == fault.step) continue;
    const Pairs p = synthetic(seed, static_cast<std::int64_t>(sum.tags[k]), sum.members[k], n, ratio, overlap);
    for (std::size_t i = 0; i < p.idx.size(); ++i) {
      dense[p.idx[i]] = hit[p.idx[i]] ? dense[p.idx[i]] + p.val[i] : p.val[i];
      hit[p.idx[i]] = 1;
    }
  }
  Pairs out;
  for (std::uint64_t i = 0; i < n; ++i)
    if (hit[i]) {
      out.idx.push_back(static_cast<std::uint32_t>(i));
      out.val.push_back(dense[i]);
    }
  return out;
}

// Every member's steps in order: a member counted in this member's previous
// step too must be one step further (a member that skipped a step would sum
// its next step into the others' current one); this member's own tag is
// its step. Members back after an absence start anywhere (a restart).
class StepOrder {
 public:
  std::string check(const SparseSum& sum, std::int64_t s, std::uint32_t self) {
    std::string bad;
    for (std::size_t k = 0; k < sum.members.size(); ++k) {
      const std::uint32_t m = sum.members[k];
      const auto tag = static_cast<std::int64_t>(sum.tags[k]);
      const auto it = last_.find(m);
      if (m == self && tag != s) bad = "its own contribution has tag " + std::to_string(tag);
      else if (it != last_.end() && it->second.first == s - 1 && tag != it->second.second + 1)
        bad = "member " + std::to_string(m) + " went from step " + std::to_string(it->second.second) + " to " +
              std::to_string(tag);
      last_[m] = {s, tag};
    }
    return bad;
  }

 private:
  std::map<std::uint32_t, std::pair<std::int64_t, std::int64_t>> last_;  // member -> (my step, its tag)
};

Fault parse_fault(const std::string& spec, int size) {
  Fault f;
  if (spec.empty()) return f;
  const auto colon = spec.find(':');
  try {
    std::size_t used = 0;
    f.rank = std::stoll(spec.substr(0, colon), &used);
    if (colon == std::string::npos || used != colon) throw std::invalid_argument(spec);
    f.step = std::stoll(spec.substr(colon + 1), &used);
    if (used != spec.size() - colon - 1) throw std::invalid_argument(spec);
  } catch (const std::exception&) {
    throw InputError("--fail " + spec + ": expected RANK:STEP");
  }
  if (f.rank < 0 || f.rank >= size || f.step < 1) throw InputError("--fail " + spec + ": no such rank or step");
  return f;
}

}  // namespace

namespace {

struct SparseArgs {
  SparseGroupOptions o = sparse_group_options_from_env();
  std::uint64_t n = 25000000, seed = 1;
  double ratio = 0.001, overlap = 0;
  std::int64_t steps = 20;
  int pause_ms = 0;
  bool check = false, json = false;
  std::string fail_spec;
};

// The command line; nothing when it asked for the help.
std::optional<SparseArgs> parse_sparse(const std::vector<std::string>& args) {
  SparseArgs a;
  SparseGroupOptions& o = a.o;
  po::options_description d("accel sparse-allreduce --rank R --size P --coordinator ADDR:PORT [options]");
  d.add_options()("help,h", "this help")
      ("rank", po::value(&o.rank)->default_value(o.rank), "this member's rank (default: the launcher's; -1: join a running group)")
      ("size", po::value(&o.size)->default_value(o.size), "members rank 0 waits for (default: the launcher's size)")
      ("max-size", po::value(&o.max_size)->default_value(0), "rank 0: members the group may grow to by joiners (0: --size)")
      ("coordinator", po::value(&o.coordinator)->default_value(o.coordinator), "rank 0's ADDR:PORT (ACCEL_COORDINATOR)")
      ("n", po::value(&a.n)->default_value(a.n), "length of each member's dense vector")
      ("ratio", po::value(&a.ratio)->default_value(a.ratio), "pairs per member and step, as a fraction of n")
      ("overlap", po::value(&a.overlap)->default_value(0), "fraction of each member's indices drawn alike by all")
      ("exchange", po::value(&o.exchange)->default_value(o.exchange), "rank 0: auto, allgather or reduce-scatter")
      ("steps", po::value(&a.steps)->default_value(a.steps), "steps")
      ("seed", po::value(&a.seed)->default_value(a.seed), "seed of the synthetic pairs")
      ("pause-ms", po::value(&a.pause_ms)->default_value(0), "sleep between steps (a training step's compute)")
      ("check", po::bool_switch(&a.check), "compare every sum with the one computed here, and every member's steps")
      ("fail", po::value(&a.fail_spec), "RANK:STEP (test): that member's pairs of that step hold a NaN; it goes on")
      ("job", po::value(&o.job)->default_value(o.job), "job token (0: rank 0 draws one, the others read ~/.accel/job-PORT.token)")
      ("timeout-ms", po::value(&o.timeout_ms)->default_value(o.timeout_ms), "wait for a silent member before evicting it")
      ("keepalive-ms", po::value(&o.keepalive_ms)->default_value(o.keepalive_ms), "UCX keepalive interval")
      ("tls", po::value(&o.tls), "UCX transports (UCX_TLS), e.g. tcp")
      ("snapshot-dir", po::value(&o.snapshot_dir), "ranks >= 1: resume from here after a restart")
      ("log-json", po::value(&o.log_json), "one JSON line per step")
      ("json", po::bool_switch(&a.json), "print the summary as JSON");
  po::variables_map vm;
  if (!parse_or_help(args, d, vm)) return std::nullopt;
  if (a.n < 1 || a.n > (std::uint64_t{1} << 32)) throw InputError("--n " + std::to_string(a.n) + ": must be in 1..2^32");
  if (!(a.ratio > 0 && a.ratio <= 1)) throw InputError("--ratio " + std::to_string(a.ratio) + ": must be in (0, 1]");
  if (a.steps < 1) throw InputError("--steps must be >= 1");
  if (!(a.overlap >= 0 && a.overlap <= 1))
    throw InputError("--overlap " + std::to_string(a.overlap) + ": must be in [0, 1]");
  return a;
}

// --fail's step: the member's pairs with a NaN must make the step throw
// (the member takes part without its pairs). False when it did not.
bool failing_step(SparseGroup& group, const SparseArgs& a, const Pairs& mine, std::int64_t s) {
  Pairs bad = mine;
  if (bad.val.empty()) bad.idx.push_back(0), bad.val.push_back(0.0f);
  bad.val[0] = std::numeric_limits<float>::quiet_NaN();
  try {
    group.allreduce(a.n, bad.idx, bad.val, static_cast<std::uint64_t>(s));
  } catch (const InputError& e) {
    log::info("accel sparse-allreduce") << "step " << s << ", as --fail asked: " << e.what();
    return true;
  }
  log::warn("accel sparse-allreduce") << "step " << s << ": a NaN was summed without an error";
  return false;
}

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// What the steps add up to, for the summary.
struct Tally {
  std::vector<double> seconds;
  double cpu_seconds = 0;  // this process's CPU time (user + system) inside allreduce()
  std::uint64_t bytes = 0, sum_pairs = 0;
  std::int64_t counted_all = 0, reduce_scatter = 0, rounds = 0;

  void add(const SparseSum& sum, double s, double cpu, int size) {
    seconds.push_back(s);
    cpu_seconds += cpu;
    bytes += sum.bytes_sent;
    sum_pairs += sum.indices.size();
    if (sum.members.size() == static_cast<std::size_t>(size)) ++counted_all;
    reduce_scatter += sum.exchange == "reduce-scatter";
    rounds += sum.rounds;
  }
  void print(const SparseArgs& a, int rank) const {
    std::vector<double> sorted = seconds;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted.empty() ? 0.0 : sorted[sorted.size() / 2];
    const nlohmann::json summary = {{"rank", rank},
                                    {"size", a.o.size},
                                    {"n", a.n},
                                    {"steps", a.steps},
                                    {"steps_with_every_member", counted_all},
                                    {"median_step_s", median},
                                    // Members sharing cores wait for each other's CPU:
                                    // the step's own CPU time tells them apart.
                                    {"cpu_s_per_step", cpu_seconds / std::max<std::int64_t>(1, a.steps)},
                                    {"bytes_sent_per_step", bytes / a.steps},
                                    {"pairs_in_sum_per_step", sum_pairs / a.steps},
                                    {"reduce_scatter_steps", reduce_scatter},
                                    {"rounds", rounds},
                                    {"checked", a.check}};
    if (a.json) std::cout << summary.dump() << "\n";
    else
      std::cout << "sparse allreduce: rank " << rank << " of " << a.o.size << ", " << a.steps << " steps, median "
                << median * 1e3 << " ms, " << bytes / a.steps << " bytes sent a step"
                << (a.check ? ", every sum checked" : "") << "\n";
  }
};

}  // namespace

int sparse_allreduce_main(const std::vector<std::string>& args) {
  const std::optional<SparseArgs> parsed = parse_sparse(args);
  if (!parsed) return 0;
  const SparseArgs& a = *parsed;
  const Fault fault = parse_fault(a.fail_spec, std::max(a.o.size, a.o.max_size));
  SparseGroup group(a.o);
  const auto rank = static_cast<std::uint32_t>(group.join());  // a joiner's pairs are its rank's
  // Every step's pairs first: generating them inside the loop would make
  // every member wait for the slowest generator each step.
  std::vector<Pairs> all;
  for (std::int64_t s = 1; s <= a.steps; ++s) all.push_back(synthetic(a.seed, s, rank, a.n, a.ratio, a.overlap));
  Tally tally;
  StepOrder order;
  SparseSum sum;  // reused: its vectors go back to the group each step
  for (std::int64_t s = 1; s <= a.steps; ++s) {
    if (a.pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(a.pause_ms));
    const Pairs& mine = all[static_cast<std::size_t>(s - 1)];
    if (fault.rank == static_cast<std::int64_t>(rank) && fault.step == s) {
      if (!failing_step(group, a, mine, s)) return 1;
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = process_cpu_seconds();
    group.allreduce(a.n, mine.idx, mine.val, static_cast<std::uint64_t>(s), sum);
    tally.add(sum, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
              process_cpu_seconds() - c0, a.o.size);
    if (!a.check) continue;
    if (const std::string bad = order.check(sum, s, rank); !bad.empty()) {
      log::warn("accel sparse-allreduce") << "step " << s << ": out of step: " << bad;
      return 1;
    }
    const Pairs want = expected(a.seed, sum, a.n, a.ratio, a.overlap, fault);
    if (want.idx != sum.indices || want.val != sum.values) {
      log::warn("accel sparse-allreduce") << "step " << s << ": the sum differs from the members' pairs";
      return 1;
    }
  }
  group.close();
  tally.print(a, group.rank());
  return 0;
}

}  // namespace accel::cli
