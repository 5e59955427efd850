// The sparse allreduce in the swarm (issue 30): SparseGroups, the same
// class training processes use, one per simulated process. Rank 0 runs the
// group's coordinator and o.iterations steps, then closes the group; the
// other ranks step until the group ends, or until they leave. Each member's
// pairs are a function of its rank and its step's tag alone, so the checker
// can rebuild every sum from the members and tags a sum says it holds.
#include "sparse_swarm.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include "accel/sparse_allreduce.hpp"

namespace accel::cluster::sim {
namespace {

constexpr std::uint64_t kLength = 2048;  // n: small, so that members' indices overlap

SparseGroupOptions group_options(const SwarmOptions& o, int rank, int workers) {
  SparseGroupOptions g;
  g.rank = rank;
  g.size = workers + 1;
  g.coordinator = "127.0.0.1:40000";
  g.job = kSwarmToken;
  g.timeout_ms = o.timeout_ms;
  g.join_timeout_ms = 10000;
  g.exchange = o.exchange;
  return g;
}

std::string key_of(const SparseSum& s) {
  std::string k(reinterpret_cast<const char*>(s.members.data()), s.members.size() * 4);
  k.append(reinterpret_cast<const char*>(s.tags.data()), s.tags.size() * 8);
  k.append(reinterpret_cast<const char*>(s.indices.data()), s.indices.size() * 4);
  k.append(reinterpret_cast<const char*>(s.values.data()), s.values.size() * 4);
  return k;
}

}  // namespace

SparsePairs sparse_pairs(std::uint32_t rank, std::uint64_t tag) {
  std::mt19937_64 g(rank * 0x9e3779b97f4a7c15ull ^ (tag + 1) * 0xbf58476d1ce4e5b9ull);
  const std::size_t m = 8 + g() % 120;
  std::set<std::uint32_t> at;
  while (at.size() < m) at.insert(static_cast<std::uint32_t>(g() % kLength));
  SparsePairs p;
  p.indices.assign(at.begin(), at.end());
  // Values whose sums round: the order they are added in shows.
  for (std::size_t i = 0; i < m; ++i) p.values.push_back(static_cast<float>(1 + g() % 9999) / 7.0f * (g() % 2 ? 1 : -1));
  return p;
}

// The left-to-right sum, in the members' order, of the values present at
// each index: what docs/cluster.md says every member of a step receives.
SparsePairs sparse_expected(const std::vector<std::uint32_t>& members, const std::vector<std::uint64_t>& tags) {
  std::map<std::uint32_t, float> sum;
  for (std::size_t j = 0; j < members.size() && j < tags.size(); ++j) {
    const SparsePairs p = sparse_pairs(members[j], tags[j]);
    for (std::size_t i = 0; i < p.indices.size(); ++i) {
      const auto [it, fresh] = sum.emplace(p.indices[i], p.values[i]);
      if (!fresh) it->second += p.values[i];
    }
  }
  SparsePairs out;
  for (const auto& [i, v] : sum) {
    out.indices.push_back(i);
    out.values.push_back(v);
  }
  return out;
}

void run_sparse_rank0(const SwarmOptions& o, int workers, int joins, const std::string& dir, JobRun& out) {
  omp_set_num_threads(1);
  try {
    SparseGroupOptions g = group_options(o, 0, workers);
    g.max_size = workers + 1 + joins;
    g.log_json = dir + "/coordinator.jsonl";
    SparseGroup group(g);
    for (int k = 1; k <= o.iterations; ++k) {
      const SparsePairs p = sparse_pairs(0, static_cast<std::uint64_t>(k));
      out.sums.push_back({0, 1, static_cast<std::uint64_t>(k), group.allreduce(kLength, p.indices, p.values, k)});
    }
    group.close();
    out.coordinator_exit = 0;
  } catch (const std::exception& e) {
    out.coordinator_exit = 2;
    out.coordinator_error = e.what();
  }
}

void run_sparse_member(const SwarmOptions& o, World& w, int id, std::uint32_t incarnation, int workers,
                       const std::string& dir, std::optional<Clock::duration> leave, JobRun& out) {
  omp_set_num_threads(1);
  try {
    SparseGroupOptions g = group_options(o, id ? id : SparseGroup::kJoin, workers);
    // A restart resumes from the snapshot (written at once in virtual
    // time: member.cpp's start_snapshot).
    if (id) g.snapshot_dir = dir + "/snapshot-" + std::to_string(id);
    g.log_json = dir + "/worker-" + (id ? std::to_string(id) : std::string("joined")) + "-" + std::to_string(incarnation) +
                 (id ? "" : "-" + std::to_string(w.elapsed().count())) + ".jsonl";
    SparseGroup group(g);
    const auto rank = static_cast<std::uint32_t>(group.join());
    for (std::uint64_t k = 1;; ++k) {
      const std::uint64_t tag = std::uint64_t{incarnation} << 32 | k;
      const SparsePairs p = sparse_pairs(rank, tag);
      out.sums.push_back({rank, incarnation, tag, group.allreduce(kLength, p.indices, p.values, tag)});
      if (leave && w.elapsed() >= *leave) return group.close();
    }
  } catch (const std::exception& e) {
    // the group ended (rank 0 closed it), or this member was evicted: the
    // sums it received are judged
    out.member_errors[(id ? "rank " + std::to_string(id) : std::string("a joiner")) + " (incarnation " +
                      std::to_string(incarnation) + ")"] = e.what();
  }
}

std::string sparse_violation(const JobRun& run, const std::vector<FaultAt>& faults, int workers, int steps) {
  if (run.coordinator_exit != 0) return "rank 0 failed: " + run.coordinator_error;
  std::map<std::int64_t, std::pair<std::uint32_t, std::string>> rounds;  // round -> the first delivery's member, key
  std::map<std::uint32_t, std::set<std::int64_t>> delivered;             // rank -> rounds it received a sum of
  std::vector<std::int64_t> rank0;
  for (const auto& d : run.sums) {
    const SparseSum& s = d.sum;
    const std::string who = "rank " + std::to_string(d.rank) + "'s step " + std::to_string(d.call & 0xffffffffu) +
                            " (round " + std::to_string(s.step) + ")";
    if (!std::is_sorted(s.members.begin(), s.members.end()) ||
        std::adjacent_find(s.members.begin(), s.members.end()) != s.members.end())
      return who + ": its members are not ascending and unique";
    const auto self = std::find(s.members.begin(), s.members.end(), d.rank);
    if (self == s.members.end() || s.tags.size() != s.members.size() || s.tags[self - s.members.begin()] != d.call)
      return who + ": the sum does not hold this member's own step";
    const SparsePairs want = sparse_expected(s.members, s.tags);
    if (want.indices != s.indices ||
        std::memcmp(want.values.data(), s.values.data(), std::min(want.values.size(), s.values.size()) * 4) != 0 ||
        want.values.size() != s.values.size())
      return who + ": the sum is not bitwise the members' sum in member order";
    const auto [it, first] = rounds.emplace(s.step, std::make_pair(d.rank, key_of(s)));
    if (!first && it->second.second != key_of(s))
      return who + " differs from rank " + std::to_string(it->second.first) + "'s sum of the same round";
    delivered[d.rank].insert(s.step);
    if (d.rank == 0) rank0.push_back(s.step);
  }
  if (static_cast<int>(rank0.size()) != steps)
    return "rank 0 received " + std::to_string(rank0.size()) + " sums of its " + std::to_string(steps) + " steps";
  // Members no fault touched count in every step, unless the network
  // itself failed (lossy windows) or rank 0 was cut off.
  std::set<int> touched;
  for (const auto& f : faults) {
    if (f.kind == Fault::Lossy || (f.kind == Fault::Partition && f.worker == 0)) return {};
    touched.insert(f.worker);
  }
  for (int r = 1; r <= workers; ++r) {
    if (touched.count(r)) continue;
    const auto& mine = delivered[static_cast<std::uint32_t>(r)];
    for (const auto t : rank0)
      if (!mine.count(t)) {
        const auto e = run.member_errors.find("rank " + std::to_string(r) + " (incarnation 1)");
        return "rank " + std::to_string(r) + ", which no fault touched, missed round " + std::to_string(t) +
               (e == run.member_errors.end() ? std::string() : " (it stopped: " + e->second + ")");
      }
  }
  return {};
}

}  // namespace accel::cluster::sim
