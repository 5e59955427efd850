#include "node.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <set>

#include "accel/error.hpp"
#include "accel/log.hpp"
#include "accel/faults.hpp"
#include "accel/transport/ucx_transport.hpp"

namespace accel::cluster {

namespace {
thread_local TransportMaker transport_maker;
}

void set_transport_maker(TransportMaker maker) { transport_maker = std::move(maker); }

Node::Node(transport::Options opts, Ms timeout, Limits limits)
    : net_(transport_maker ? transport_maker(std::move(opts)) : std::make_unique<transport::UcxTransport>(std::move(opts))),
      timeout_(timeout),
      limits_(limits) {}

// A crash in the middle of the notification phase: some peers have this
// round's contribution, the rest never get it. What was sent is let out
// (progress for a moment) before the process dies as SIGKILL would.
void Node::inject_partial_send_fault(std::int64_t t, std::size_t sent) {
  if (t != faults().partial_send_round || sent != faults().partial_send_peers) return;
  log::warn("accel cluster") << "partial send fault: dying in round " << t << " after " << sent << " sends";
  net_->progress_until([] { return false; }, Ms(200));
  std::_Exit(137);
}

void Node::connect_peer(std::uint32_t peer, const std::vector<std::byte>& address) {
  auto it = eps_.find(peer);
  if (it != eps_.end() && net_->alive(it->second)) net_->disconnect(it->second);
  addr_[peer] = address;
  try {
    eps_[peer] = net_->connect(address);
  } catch (const std::runtime_error& e) {
    // A peer that died since its address was handed out: not this node's
    // failure but a membership event, which the barrier handles (the peer
    // is unreachable until it rejoins with a new address).
    eps_.erase(peer);
    log::warn("accel cluster") << "member " << peer << " is unreachable (" << e.what() << ")";
  }
}

void Node::ensure_peer(std::uint32_t peer, const std::vector<std::byte>& address) {
  auto a = addr_.find(peer);
  if (reachable(peer) && a != addr_.end() && a->second == address) return;
  connect_peer(peer, address);
}

void Node::coordinator_gone() const {
  const auto ep = eps_.find(0);
  throw CoordinatorGone("the coordinator is gone (" + net_->endpoint_error(ep == eps_.end() ? 0 : ep->second) + ")");
}

bool Node::reachable(std::uint32_t peer) const {
  auto it = eps_.find(peer);
  return it != eps_.end() && net_->alive(it->second);
}

bool Node::send(std::uint32_t peer, std::uint16_t type, std::int64_t iteration, std::span<const std::byte> payload) {
  auto it = eps_.find(peer);
  if (it == eps_.end() || !net_->alive(it->second)) return false;
  const auto key = keys_.find(peer);
  auto c = net_->send(it->second, type, static_cast<std::uint64_t>(iteration), payload,
                      key == keys_.end() ? nullptr : &key->second);
  return !(c->done && !c->error.empty());
}

void Node::set_key(std::uint32_t peer, const transport::MacKey& key) {
  keys_[peer] = key;
  std::vector<transport::Received> held;
  held.swap(unkeyed_);
  for (auto& r : held) {
    if (r.message.header.sender != peer) unkeyed_.push_back(std::move(r));
    else if (authentic(r) && fenced(r)) let_in_.push_back(std::move(r));
  }
}

bool Node::admit(const transport::Received& r) { return authentic(r) && fenced(r); }

// A message counts only when its seal verifies under its sender's key: the
// sender field alone is anyone's to write. Exempt, on the coordinator: a
// hello and a row request, which the bootstrap's ticket vouches for (the
// hello sets the key).
bool Node::authentic(const transport::Received& r) {
  const auto& h = r.message.header;
  if (coordinator() && (h.type == kHello || h.type == kTicket)) return true;
  auto say = [&](const std::string& why) {
    log::warn("accel cluster") << "dropped " << type_name(h.type) << " from " << h.sender << ": " << why;
    return false;
  };
  if (!r.message.seal) return say("not sealed (only a member that passed the handshake can seal)");
  const auto key = keys_.find(h.sender);
  if (key == keys_.end()) {
    // Bounded in all (any id can be claimed): a peer's messages can run
    // ahead of its key only by the few a round sends.
    std::size_t count = 0, bytes = r.message.payload.size();
    for (const auto& e : unkeyed_) {
      count += e.message.header.sender == h.sender;
      bytes += e.message.payload.size();
    }
    if (count < kMaxEarly && unkeyed_.size() < 4 * kMaxEarly && bytes <= kMaxEarlyBytes) unkeyed_.push_back(r);
    else say("no key for it yet, and too many messages wait for keys already");
    return false;
  }
  if (!transport::verify_control(r.message, key->second)) return say("its seal does not verify");
  return true;
}

// The incarnation fence: a message from an earlier incarnation of its
// sender than one already heard is a stale process's.
bool Node::fenced(const transport::Received& r) {
  const auto& h = r.message.header;
  if (auto a = admitted_.find(h.sender); a != admitted_.end() && h.type != kHello && h.type != kTicket) {
    if (h.incarnation == a->second) return true;
    log::warn("accel cluster") << "dropped " << type_name(h.type) << " from " << h.sender << " incarnation "
              << h.incarnation << " (counted: " << a->second << ")";
    return false;
  }
  auto [it, fresh] = incarnation_.try_emplace(h.sender, h.incarnation);
  if (!fresh && h.incarnation < it->second) {
    log::warn("accel cluster") << "dropped " << type_name(h.type) << " from " << h.sender << " incarnation "
              << h.incarnation << " (now " << it->second << ")";
    return false;
  }
  it->second = std::max(it->second, h.incarnation);
  return true;
}

std::optional<transport::Received> Node::receive(Ms timeout) {
  if (!let_in_.empty()) {
    transport::Received r = std::move(let_in_.front());
    let_in_.erase(let_in_.begin());
    return r;
  }
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const auto left = ms_until(deadline);
    auto r = net_->receive(std::max(left, Ms(0)));
    if (!r) return std::nullopt;
    if (admit(*r)) return r;
  }
}

void Node::stash(transport::Received r, std::optional<std::int64_t> now) {
  const auto sender = r.message.header.sender;
  const auto round = static_cast<std::int64_t>(r.message.header.iteration);
  if (now && coordinator() && round > *now + kMaxAhead) {  // members may lag and catch up from their stash
    log::warn("accel cluster") << "dropped " << type_name(r.message.header.type) << " of round " << round << " from "
              << sender << ": this node is at round " << *now;
    return;
  }
  std::size_t count = 0, bytes = r.message.payload.size();
  for (const auto& e : early_)
    if (e.message.header.sender == sender) {
      ++count;
      bytes += e.message.payload.size();
    }
  if (count >= kMaxEarly || bytes > kMaxEarlyBytes) {
    log::warn("accel cluster") << "dropped " << type_name(r.message.header.type) << " of round "
              << r.message.header.iteration << " from " << sender << ": " << count
              << " early messages of it held already";
    return;
  }
  early_.push_back(std::move(r));
}

std::vector<transport::Received> Node::arrived() {
  std::vector<transport::Received> out;
  out.swap(let_in_);
  for (auto r = net_->poll(); r; r = net_->poll())
    if (admit(*r)) out.push_back(std::move(*r));
  return out;
}

// One round of the all-to-all barrier on this node: the notification
// phase (notify), then the waiting phase, in which every message of the
// round goes through handle().
struct Node::SyncRound {
  Node& node;
  const std::int64_t t;
  const Contribution& mine;
  const Validate& validate;
  const Other& other;
  SyncStats& stats;
  const Addressed& addressed;
  Bytes payload;
  std::set<std::uint32_t> notified;
  std::map<std::uint32_t, Contribution> got;
  // Workers learn the round's view from the coordinator's contribution.
  std::optional<Membership> coord_view;
  // The coordinator's word on members of its view whose contribution this
  // node lacks: what it counted for them (their own contribution, or one
  // it computed from their rows), or nothing.
  std::map<std::uint32_t, std::optional<Bytes>> words;
  // What the coordinator counted in round t - 1 (its contribution says;
  // the coordinator's own here), or 0: none to match.
  std::uint64_t coord_counted = 0;
  // Task::confirmed: the ids the coordinator counted in round t, and when they came.
  std::optional<std::vector<std::uint32_t>> confirmed;
  Clock::time_point confirmed_at{};

  // Everyone this node believes active; the unreachable are evicted.
  void notify(const Membership& view) {
    for (auto q : view.active) {
      if (q == node.id()) continue;
      if (send_to(q)) notified.insert(q);
      else stats.evicted.push_back(q);
      node.inject_partial_send_fault(t, notified.size());
    }
  }

  bool send_to(std::uint32_t q) {
    const Bytes* own = addressed ? addressed(q) : nullptr;
    if (!own) return node.send(q, kContribution, t, payload);
    Contribution c = mine;
    c.data = *own;
    return node.send(q, kContribution, t, encode(c));
  }

  // Members new in the coordinator's view, which this node may have had no
  // way to reach (two that came back together): reached and notified now.
  void meet(const std::vector<Peer>& peers) {
    for (const auto& p : peers) {
      if (p.id == node.id() || p.id == 0 || notified.count(p.id)) continue;
      if (std::find(coord_view->active.begin(), coord_view->active.end(), p.id) == coord_view->active.end()) continue;
      node.ensure_peer(p.id, p.address);
      if (!send_to(p.id)) continue;
      notified.insert(p.id);
      std::erase(stats.evicted, p.id);
    }
  }

  void take_word(std::uint32_t q, std::optional<Bytes> data) {
    if (data) try {
        validate(*data);
      } catch (const InputError& e) {
        log::warn("accel cluster") << "dropped the coordinator's word on " << q << ": " << e.what();
        return;
      }
    words[q] = std::move(data);
  }

  // Results of t are solicited (from the notified) or unsolicited (from a
  // returning worker, which gets this node's result in reply).
  void handle(const transport::Received& r) {
    const auto& h = r.message.header;
    if (h.type == kCounted && h.sender == 0 && !node.coordinator()) return on_counted(r);
    if (h.type == kConfirm && h.sender == 0 && !node.coordinator()) return on_confirm(r);
    if (h.type != kContribution) return other(r);
    const auto it = static_cast<std::int64_t>(h.iteration);
    if (it > t) return node.stash(r, t);
    Contribution p;
    try {
      p = decode_contribution(r.message.payload, node.limits_);
      validate(p.data);
    } catch (const InputError& e) {
      log::warn("accel cluster") << "dropped contribution from " << h.sender << ": " << e.what();
      return;
    }
    if (it < t) return behind(h.sender, it, p);
    if (h.sender != 0 && disagrees(p.counted)) return refuse(h.sender);
    if (h.sender == 0 && p.has_view) {
      coord_view = p.view;
      coord_counted = p.counted;
      std::erase_if(got, [&](const auto& g) { return g.first != 0 && disagrees(g.second.counted); });
      for (auto& [q, data] : p.stand_ins) take_word(q, std::move(data));
      p.stand_ins.clear();
      meet(p.peers);
    }
    // Unsolicited: answer a returning worker so it can resynchronize.
    if (!notified.count(h.sender) && h.sender != node.id() && !p.reply_address.empty()) {
      node.ensure_peer(h.sender, p.reply_address);
      node.send(h.sender, kContribution, t, payload);
    }
    got[h.sender] = std::move(p);
  }

  void on_counted(const transport::Received& r) {
    const auto it = static_cast<std::int64_t>(r.message.header.iteration);
    if (it > t) return node.stash(r, t);
    if (it < t) return;
    try {
      auto [q, data] = decode_counted(r.message.payload, node.limits_);
      take_word(q, std::move(data));
    } catch (const InputError& e) {
      log::warn("accel cluster") << "dropped the coordinator's word: " << e.what();
    }
  }

  void on_confirm(const transport::Received& r) {
    const auto it = static_cast<std::int64_t>(r.message.header.iteration);
    if (it > t) return node.stash(r, t);
    if (it < t) return;
    try {
      confirmed = decode_ids(r.message.payload, node.limits_);
      confirmed_at = Clock::now();
    } catch (const InputError& e) {
      log::warn("accel cluster") << "dropped the coordinator's confirmation: " << e.what();
    }
  }

  bool counts(std::uint32_t q) const { return std::binary_search(confirmed->begin(), confirmed->end(), q); }

  // Task::confirmed, a member: waits for the coordinator's confirmation
  // of round t (asked again every quarter timeout: it may be lost), then
  // counts what it says: a contribution that came here and not to the
  // coordinator is counted by no one. Without it, or left out of it, this
  // member rejoins rather than count a round the others may count otherwise.
  void await_confirmation() {
    const Ms every = std::max(Ms(1), node.timeout_ / 4);
    const auto deadline = Clock::now() + node.timeout_ + Ms(1000);
    auto next = Clock::now() + every;
    while (!confirmed && Clock::now() < deadline && node.reachable(0)) {
      if (auto r = node.receive(ms_until(std::min(deadline, next)))) handle(*r);
      if (!confirmed && Clock::now() >= next) {
        node.send(0, kConfirm, t, {});
        next = Clock::now() + every;
      }
    }
    if (!confirmed && !node.reachable(0)) node.coordinator_gone();
    if (!confirmed) throw Evicted("no confirmation from the coordinator of round " + std::to_string(t));
    if (!counts(node.id())) throw Evicted("the coordinator did not count this member in round " + std::to_string(t));
    for (auto q : *confirmed)
      if (missing(q))
        throw Evicted("the coordinator counted member " + std::to_string(q) + " in round " + std::to_string(t) +
                      ", whose contribution this member lacks");
    std::erase_if(got, [&](const auto& g) { return !counts(g.first); });
    std::erase_if(words, [&](const auto& w) { return !counts(w.first); });
  }

  // A contribution computed from a state the coordinator's counting did
  // not lead to: the sender counted round t - 1 otherwise (a word of the
  // coordinator's lost on the way to it). Counting it would carry that
  // into every state, so no participant does: the coordinator evicts the
  // sender and stands in for its rows, the workers ask for its word.
  bool disagrees(std::uint64_t counted) const { return coord_counted != 0 && counted != 0 && counted != coord_counted; }

  void refuse(std::uint32_t q) {
    log::warn("accel cluster") << "refused the contribution of round " << t << " from " << q
                               << ": it counted round " << t - 1 << " otherwise than the coordinator";
    if (node.coordinator() && std::find(stats.evicted.begin(), stats.evicted.end(), q) == stats.evicted.end())
      stats.evicted.push_back(q);
  }

  // A returning worker a little behind: answer from the cache. Anything
  // else older than this round is stale and dropped.
  void behind(std::uint32_t sender, std::int64_t it, const Contribution& p) {
    if (!p.reply_address.empty() && node.sent_.count(it)) {
      node.ensure_peer(sender, p.reply_address);
      node.send(sender, kContribution, it, node.sent_[it]);
    } else {
      log::warn("accel cluster") << "dropped stale contribution of round " << it << " from " << sender << " (now " << t
                                 << ")";
    }
  }

  bool missing(std::uint32_t q) const { return q != node.id() && !got.count(q) && !words.count(q); }

  // Whether every member of the coordinator's view is in (or evicted: a
  // member whose endpoint died will not answer).
  bool complete() {
    if (!coord_view) return false;
    bool done = true;
    for (auto q : coord_view->active)
      if (missing(q) && std::find(stats.evicted.begin(), stats.evicted.end(), q) == stats.evicted.end()) {
        if (node.eps_.count(q) && !node.net_->alive(node.eps_[q])) {
          stats.evicted.push_back(q);
          continue;
        }
        done = false;
      }
    return done;
  }

  void wait(Clock::time_point deadline) {
    std::vector<transport::Received> early;  // early arrivals of this round first
    early.swap(node.early_);
    for (auto& r : early) handle(r);
    // After a confirmation (Task::confirmed) the wait is shorter: the
    // coordinator has counted the round, and what it counted that is not
    // here is asked for a quarter timeout on rather than at this node's
    // timeout. (Not at once: a contribution on its way is usually just
    // behind the confirmation, and the coordinator's copy of an addressed
    // one is not this node's.)
    while (!complete()) {
      auto until = deadline;
      if (confirmed) until = std::min(until, confirmed_at + std::max(Ms(1), node.timeout_ / 4));
      if (Clock::now() >= until) break;
      if (auto r = node.receive(ms_until(until))) handle(*r);
    }
    if (coord_view && !node.coordinator())
      node.await_words(*coord_view, t, [this](std::uint32_t q) { return missing(q) && (!confirmed || counts(q)); },
                       [this](const transport::Received& r) { handle(r); });
    // Whatever else has arrived (a hello, a returning worker's request, its
    // rows' transfer to progress): a coordinator without other members
    // waits for no one, and this is then its only turn at the network.
    for (auto& r : node.arrived()) handle(r);
  }
};

std::map<std::uint32_t, Contribution> Node::sync(std::int64_t t, const Contribution& mine, Membership& view,
                                                 const Validate& validate, const Other& other, SyncStats& stats,
                                                 const Addressed& addressed) {
  const auto t0 = Clock::now();
  Contribution own = mine;
  own.counted = last_counted_.first == t - 1 ? last_counted_.second : 0;
  SyncRound round{*this, t, own, validate, other, stats, addressed, encode(own), {}, {}, {}, {}};
  if (coordinator()) round.coord_counted = own.counted;
  sent_[t] = round.payload;
  while (sent_.size() > 8) sent_.erase(sent_.begin());
  round.notify(view);
  const auto t1 = Clock::now();
  stats.notify_seconds = std::chrono::duration<double>(t1 - t0).count();
  if (coordinator()) round.coord_view = mine.view;
  round.wait(t1 + timeout_);
  stats.wait_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  if (!round.coord_view) {
    if (!reachable(0))
      coordinator_gone();
    throw Evicted("no result from the coordinator for round " + std::to_string(t) + " within the timeout");
  }
  if (!coordinator() && round.coord_counted != 0 && own.counted != 0 && own.counted != round.coord_counted)
    throw Evicted("counted round " + std::to_string(t - 1) + " otherwise than the coordinator");
  const auto& active = round.coord_view->active;
  if (confirm_rounds_ && !coordinator() && std::find(active.begin(), active.end(), id()) != active.end())
    round.await_confirmation();
  view = *round.coord_view;
  return counted(view, own, std::move(round.got), std::move(round.words), stats);
}

// Members of the coordinator's view whose contribution did not come (the
// dead, the late): every participant must count for them what the
// coordinator counted. It says so unasked for those it evicts; a member that
// died while sending may have reached the coordinator and not this node, so
// this node asks (kNeed). Bounded: the coordinator's own wait ends within
// its timeout.
void Node::await_words(const Membership& coord_view, std::int64_t t, const std::function<bool(std::uint32_t)>& missing,
                       const std::function<void(const transport::Received&)>& handle) {
  auto still = [&] { return std::any_of(coord_view.active.begin(), coord_view.active.end(), missing); };
  if (!still()) return;
  // Asked again every quarter timeout: a request or its answer may be lost.
  auto ask = [&] {
    for (auto q : coord_view.active)
      if (missing(q)) send(0, kNeed, t, encode_u32(q));
  };
  const Ms every = std::max(Ms(1), timeout_ / 4);
  const auto deadline = Clock::now() + timeout_ + Ms(1000);
  ask();
  auto next = Clock::now() + every;
  while (still() && Clock::now() < deadline && reachable(0)) {
    if (auto r = receive(ms_until(std::min(deadline, next)))) handle(*r);
    if (Clock::now() >= next && still()) {
      ask();
      next = Clock::now() + every;
    }
  }
  if (!still()) return;
  if (!reachable(0)) coordinator_gone();
  // Counting without the word could part this node's result from the others'.
  throw Evicted("no word from the coordinator on a missing member of round " + std::to_string(t));
}

// The round's contributions as every participant counts them: the
// coordinator's word where it gave one, else what arrived.
std::map<std::uint32_t, Contribution> Node::counted(const Membership& view, const Contribution& mine,
                                                    std::map<std::uint32_t, Contribution> got,
                                                    std::map<std::uint32_t, std::optional<Bytes>> words,
                                                    SyncStats& stats) {
  auto evict = [&](std::uint32_t q) {
    if (std::find(stats.evicted.begin(), stats.evicted.end(), q) == stats.evicted.end()) stats.evicted.push_back(q);
  };
  std::map<std::uint32_t, Contribution> members;
  for (auto q : view.active) {
    if (q == id()) {
      members[q] = mine;
    } else if (auto w = words.find(q); w != words.end()) {
      if (w->second) members[q].data = std::move(*w->second);
      if (!got.count(q)) evict(q);  // its own did not come: the coordinator's word stands for it
    } else if (auto it = got.find(q); it != got.end()) {
      members[q] = std::move(it->second);
    } else {
      evict(q);  // timed out
    }
  }
  // Lost members' rows, computed by the coordinator, in their place.
  for (auto& [q, data] : words)
    if (!members.count(q) && data) members[q].data = std::move(*data);
  if (coordinator())
    for (const auto& [q, data] : mine.stand_ins) members[q].data = data;
  return members;
}

std::map<std::uint32_t, Contribution> Node::gather(std::int64_t t, const std::vector<std::uint32_t>& from,
                                                   const Validate& validate, const Other& other, SyncStats& stats) {
  const auto t0 = Clock::now();
  std::map<std::uint32_t, Contribution> got;
  std::set<std::uint32_t> waiting(from.begin(), from.end());
  waiting.erase(id());
  auto handle = [&](const transport::Received& r) {
    const auto& h = r.message.header;
    if (h.type != kContribution) return other(r);
    const auto it = static_cast<std::int64_t>(h.iteration);
    if (it > t) return stash(r, t);
    if (it < t || !waiting.count(h.sender)) return other(r);  // the caller answers a non-member
    try {
      Contribution c = decode_contribution(r.message.payload, limits_);
      validate(c.data);
      got[h.sender] = std::move(c);
      waiting.erase(h.sender);
    } catch (const InputError& e) {
      log::warn("accel cluster") << "dropped contribution from " << h.sender << ": " << e.what();
    }
  };
  std::vector<transport::Received> early;
  early.swap(early_);
  for (auto& r : early) handle(r);
  const auto deadline = t0 + timeout_;
  while (!waiting.empty()) {
    for (auto it = waiting.begin(); it != waiting.end();) {
      if (!reachable(*it)) {  // a member whose endpoint died will not answer
        stats.evicted.push_back(*it);
        it = waiting.erase(it);
      } else {
        ++it;
      }
    }
    const auto now = Clock::now();
    if (waiting.empty() || now >= deadline) break;
    if (auto r = receive(ms_until(deadline))) handle(*r);
  }
  for (auto& r : arrived()) handle(r);  // as in sync: the only turn of a coordinator alone
  for (auto q : waiting) stats.evicted.push_back(q);  // timed out
  stats.wait_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return got;
}

Contribution Node::exchange_with_coordinator(std::int64_t t, const Contribution* mine,
                                             const Validate& validate_decision, const Other& other,
                                             SyncStats& stats) {
  const auto t0 = Clock::now();
  if (mine && !send(0, kContribution, t, encode(*mine)))
    coordinator_gone();
  const auto t1 = Clock::now();
  stats.notify_seconds = std::chrono::duration<double>(t1 - t0).count();
  Contribution decision = await_decision(t, validate_decision, other);
  stats.wait_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  return decision;
}

// The coordinator's decision of round t (the early ones first); `other`
// sees every other message.
Contribution Node::await_decision(std::int64_t t, const Validate& validate_decision, const Other& other,
                                  const DecisionFrom& from) {
  std::optional<Contribution> decision;
  auto handle = [&](const transport::Received& r) {
    const auto& h = r.message.header;
    if (h.type != kDecision || (h.sender != 0 && h.sender != from.parent)) return other(r);
    const auto it = static_cast<std::int64_t>(h.iteration);
    if (it > t) return stash(r, t);
    if (it < t) return;  // an older round's, already applied
    try {
      Contribution c = decode_contribution(r.message.payload, limits_);
      if (!c.has_view) throw InputError("decision without a view");
      validate_decision(c.data);
      decision = std::move(c);
      if (from.raw) *from.raw = r.message.payload;
    } catch (const InputError& e) {
      log::warn("accel cluster") << "dropped decision of round " << t << ": " << e.what();
    }
  };
  std::vector<transport::Received> early;
  early.swap(early_);
  for (auto& r : early) handle(r);
  // Whether this member still counts is the coordinator's call, which it
  // says (kEvicted): a decision may take long (the coordinator's own work
  // between problems), so a member waits as long as the coordinator lives.
  // Asked again at once where the parent is gone, else every quarter of the
  // timeout: before the coordinator, busy with the next round, would evict
  // this member for the contribution it cannot send without the decision.
  auto ask_at = Clock::now() + timeout_ / 4;
  bool parent_gone = false;
  while (!decision) {
    if (!reachable(0))
      coordinator_gone();
    if (from.ask_again && from.parent != 0 && !parent_gone && !reachable(from.parent)) {
      parent_gone = true;
      ask_at = Clock::now();
    }
    if (from.ask_again && Clock::now() >= ask_at) {
      send(0, kAsk, t, {});
      ask_at = Clock::now() + timeout_ / 4;
    }
    if (auto r = receive(Ms(100))) {
      if (r->message.header.type == kEvicted && r->message.header.sender == 0)
        throw Evicted("the coordinator no longer counts this member (round " + std::to_string(t) + ")");
      handle(*r);
    }
  }
  return std::move(*decision);
}

}  // namespace accel::cluster
