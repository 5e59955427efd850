// The gathered exchange's tree (tree.hpp): Node's two sides of a round.
#include <algorithm>

#include "accel/log.hpp"
#include "node.hpp"

namespace accel::cluster {
namespace {

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The coordinator's count of round t so far: a partial joins it whole or
// not at all.
struct TreeCount {
  std::set<std::uint32_t> waiting;
  Node::TreeRound round;

  // Takes p if every member in it is still awaited.
  bool take(const Partial& p) {
    for (const auto& h : p.heads)
      if (!waiting.count(h.id)) return false;
    std::vector<std::uint32_t> least(p.sums.size(), UINT32_MAX);
    for (const auto& h : p.heads) least[h.sum] = std::min(least[h.sum], h.id);
    for (std::size_t j = 0; j < p.sums.size(); ++j) round.sums[least[j]] = p.sums[j];
    for (const auto& h : p.heads) {
      if (h.id != least[h.sum]) round.covered.insert(h.id);
      Contribution& c = round.heads[h.id];
      c.work_rows = h.work_rows;
      c.work_seconds = h.work_seconds;
      c.room = h.room;
      waiting.erase(h.id);
    }
    return true;
  }
};

}  // namespace

Node::TreeRound Node::gather_tree(std::int64_t t, const std::vector<std::uint32_t>& from, const Validate& validate,
                                  const Other& other, SyncStats& stats) {
  const auto t0 = Clock::now();
  TreeCount count;
  count.waiting.insert(from.begin(), from.end());
  count.waiting.erase(id());
  std::set<std::uint32_t> asked;
  auto ask = [&] {
    for (auto q : count.waiting)
      if (asked.insert(q).second) send(q, kAsk, t, {});
  };
  auto handle = [&](const transport::Received& r) {
    const auto& h = r.message.header;
    if (h.type != kPartial) return other(r);
    const auto it = static_cast<std::int64_t>(h.iteration);
    if (it > t) return stash(r, t);
    if (it < t) return;  // a late one of a round already decided
    try {
      Partial p = decode_partial(r.message.payload, limits_);
      for (const auto& s : p.sums) validate(s);
      // Not taken: one of its members is counted already (a late partial
      // of a slow parent, whose children answered the kAsk), or no longer
      // awaited (evicted); the others answer their kAsk.
      if (!count.take(p)) log::debug("accel cluster") << "round " << t << ": a partial from " << h.sender << " overlaps the count";
    } catch (const InputError& e) {
      log::warn("accel cluster") << "dropped partial from " << h.sender << ": " << e.what();
    }
  };
  std::vector<transport::Received> early;
  early.swap(early_);
  for (auto& r : early) handle(r);
  const auto deadline = t0 + timeout_, ask_at = t0 + timeout_ / 2;
  while (!count.waiting.empty()) {
    bool lost = false;
    for (auto it = count.waiting.begin(); it != count.waiting.end();) {
      if (!reachable(*it)) {  // a member whose endpoint died will not answer
        stats.evicted.push_back(*it);
        it = count.waiting.erase(it);
        lost = true;
      } else {
        ++it;
      }
    }
    const auto now = Clock::now();
    if (lost || now >= ask_at) ask();
    if (count.waiting.empty() || now >= deadline) break;
    const auto until = asked.size() < count.waiting.size() && now < ask_at ? ask_at : deadline;
    if (auto r = receive(ms_until(until))) handle(*r);
  }
  for (auto& r : arrived()) handle(r);  // as in sync: the only turn of a coordinator alone
  for (auto q : count.waiting) stats.evicted.push_back(q);  // timed out
  stats.wait_seconds = since(t0);
  count.round.asked = std::move(asked);
  return std::move(count.round);
}

Contribution Node::exchange_in_tree(std::int64_t t, const Contribution* mine, const TreeSpot& spot,
                                    const Combine& combine, const Validate& validate,
                                    const Validate& validate_decision, const Other& other, SyncStats& stats) {
  const auto t0 = Clock::now();
  std::optional<Partial> sum;
  if (mine) sum = own_partial(id(), *mine);
  bool sent = false, asked = false;
  std::set<std::uint32_t> children(spot.children.begin(), spot.children.end());
  auto to_coordinator = [&](std::span<const std::byte> payload) {
    if (!send(0, kPartial, t, payload))
      coordinator_gone();
  };
  auto answer_ask = [&] {
    if (mine) to_coordinator(encode(own_partial(id(), *mine)));
  };
  // Before this member's sum is sent, a partial is kept to join it (by
  // sender, so that the sum adds them in one order whatever order they
  // came in: the same membership gives the same centroids, run after run);
  // after, it goes on to the coordinator as it is (the count there takes
  // it or not).
  std::map<std::uint32_t, std::pair<Partial, Bytes>> kept;
  auto on_round = [&](const transport::Received& r) {
    const auto& h = r.message.header;
    const auto it = static_cast<std::int64_t>(h.iteration);
    if (h.type == kAsk && h.sender == 0) {
      if (it == t) sent ? answer_ask() : void(asked = true);
      else if (it > t) stash(r, t);
      return;
    }
    if (h.type == kDecision) {  // one waiting in the stash since an earlier round: kept for await_decision
      if ((h.sender == 0 || h.sender == spot.parent) && it >= t) stash(r, t);
      return;
    }
    if (h.type != kPartial) return other(r);
    if (it > t) return stash(r, t);
    if (it < t) return;
    children.erase(h.sender);
    if (sent || !sum || kept.count(h.sender)) return to_coordinator(r.message.payload);
    try {
      Partial p = decode_partial(r.message.payload, limits_);
      for (const auto& s : p.sums) validate(s);
      kept.emplace(h.sender, std::make_pair(std::move(p), r.message.payload));
    } catch (const InputError& e) {
      log::warn("accel cluster") << "dropped partial from " << h.sender << ": " << e.what();
    }
  };
  std::vector<transport::Received> early;
  early.swap(early_);
  for (auto& r : early) on_round(r);
  const auto until = t0 + timeout_ / 4;
  while (sum && Clock::now() < until) {
    std::erase_if(children, [&](std::uint32_t c) { return !reachable(c); });  // dead: the coordinator asks its subtree
    if (children.empty()) break;
    if (!reachable(0))
      coordinator_gone();
    if (auto r = receive(ms_until(until))) {
      const auto& h = r->message.header;
      if (h.type == kEvicted && h.sender == 0)
        throw Evicted("the coordinator no longer counts this member (round " + std::to_string(t) + ")");
      if (h.type == kDecision && (h.sender == 0 || h.sender == spot.parent)) {
        if (static_cast<std::int64_t>(h.iteration) < t) continue;  // the last round's again (straight and down the tree)
        stash(std::move(*r), t);  // the round went on without this subtree: await_decision takes it
        break;
      }
      on_round(*r);
    }
  }
  if (sum) {
    for (const auto& [from, p] : kept)
      if (!merge(*sum, p.first, combine)) to_coordinator(p.second);  // shares a member: the count decides
    const Bytes payload = encode(*sum);
    if (spot.parent == 0 || !send(spot.parent, kPartial, t, payload)) to_coordinator(payload);
  }
  sent = true;
  if (asked) answer_ask();
  const auto t1 = Clock::now();
  stats.notify_seconds = std::chrono::duration<double>(t1 - t0).count();
  Bytes raw;
  Contribution decision = await_decision(t, validate_decision, on_round, {spot.parent, &raw, true});
  for (auto c : spot.children) send(c, kDecision, t, raw);  // down the same tree (the coordinator sends around a lost member)
  stats.wait_seconds = since(t1);
  return decision;
}

}  // namespace accel::cluster
