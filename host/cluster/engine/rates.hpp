// Measured speed of the members and when to re-split the rows ([SysInfo]: collectors and processors of node information kept apart from the
// scheduler's policy). The collector turns each member's reported work (rows, seconds) into a
// smoothed rate; the policy says when the split no longer fits those rates; rebalance() (Algorithm
// 1 of [SysInfo], in accel/perf_model.hpp) computes
// the new split.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <vector>

namespace accel::cluster {

class RateCollector {
 public:
  // A member did `units` of work in `seconds` this round.
  void record(std::uint32_t member, double units, double seconds);
  std::optional<double> rate(std::uint32_t member) const;
  void forget(std::uint32_t member) { last_.erase(member); }

 private:
  // The median of each member's last kKept rates (units per second): a
  // member that slows down is followed once most of them are slow, the
  // drift policy's 3 rounds; one round stalled by the machine (a process
  // descheduled, a page fault storm) moves nothing, where an exponential
  // average lets one such round move most of a member's rows away.
  static constexpr std::size_t kKept = 5;
  std::map<std::uint32_t, std::deque<double>> last_;
};

// Drift: the slowest member's round time runs `over` (20%) above the
// members' mean for `rounds` (3) rounds in a row. A member that takes
// longer than the others for a few rounds is then given fewer rows.
// Rounds whose slowest member took less than `floor` seconds do not count
// (the streak starts again): there the split hardly matters, and fixed
// per-round costs dominate the times, so a member with fewer rows looks
// slower per row and would lose ever more (a re-split every few rounds).
class DriftPolicy {
 public:
  explicit DriftPolicy(double over = 1.2, int rounds = 3, double floor = 0.002)
      : over_(over), floor_(floor), rounds_(rounds) {}
  // Each member's seconds of this round's work; true when the split should
  // be recomputed (the streak starts again).
  bool drifted(const std::map<std::uint32_t, double>& seconds);
  void reset() { streak_ = 0; }
  // After rows moved: the next `rounds` rounds do not count. The members
  // that gained rows run slow there (gradients rebuilt, caches cold), which
  // is the move's cost, not a drift; counting them re-split an SVM job
  // every 3-4 rounds.
  bool settling() const { return settling_ > 0; }
  void settle(int rounds) {
    streak_ = 0;
    settling_ = rounds;
  }

 private:
  double over_, floor_;
  int rounds_, streak_ = 0, settling_ = 0;
};

// A split that swings back. On a core shared with another process (Linux's
// fair scheduler), a member's speed depends on its own load: busy most of a
// round, it gets its fair share of the core; with fewer rows it sleeps
// more and runs at full speed when it wakes. Its measured rate rises after
// it loses rows, and Algorithm 1 gives them back: the split swings back and
// forth, and the moves cost the rounds more than not moving at all.
// The step adapts as in RPROP (Riedmiller and Braun, "A direct adaptive
// method for faster backpropagation learning: the RPROP algorithm", 1993):
// a move that reverses the last one (a member that lost rows gains some
// back, or the other way round) goes half as far, a fraction of
// Algorithm 1's move, as the last; one that goes on in the last one's
// direction goes 1.5 times as far, up to the whole way. Swings narrow to
// the split where the rates agree; a trend (the load beside a member ends,
// or grows) is followed again in a few moves.
class SwingDamper {
 public:
  // `loads`: each member's rows now; `target`: Algorithm 1's split of the
  // same sum. Returns the split to make; its sum is the same.
  std::vector<std::int64_t> damp(const std::vector<std::uint32_t>& ids, const std::vector<std::int64_t>& loads,
                                 const std::vector<std::int64_t>& target) const;
  // The split was made (a proposal that was not made leaves no trace).
  void moved(const std::vector<std::uint32_t>& ids, const std::vector<std::int64_t>& loads,
             const std::vector<std::int64_t>& next);

 private:
  bool reverses(const std::vector<std::uint32_t>& ids, const std::vector<std::int64_t>& loads,
                const std::vector<std::int64_t>& target) const;
  double next_step(const std::vector<std::uint32_t>& ids, const std::vector<std::int64_t>& loads,
                   const std::vector<std::int64_t>& target) const;
  std::map<std::uint32_t, int> last_;  // each member's direction at the last move: +1 gained rows, -1 lost
  double step_ = 1;  // the fraction of Algorithm 1's move that the last move made
};

}  // namespace accel::cluster
