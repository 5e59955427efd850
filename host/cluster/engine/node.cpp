#include "node.hpp"

#include <algorithm>
#include <iostream>
#include <set>

#include "accel/error.hpp"

namespace accel::cluster {

Node::Node(transport::Options opts, Ms timeout, Limits limits)
    : net_(std::make_unique<transport::Transport>(std::move(opts))), timeout_(timeout), limits_(limits) {}

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
    std::cerr << "accel cluster: member " << peer << " is unreachable (" << e.what() << ")\n";
  }
}

void Node::ensure_peer(std::uint32_t peer, const std::vector<std::byte>& address) {
  auto a = addr_.find(peer);
  if (reachable(peer) && a != addr_.end() && a->second == address) return;
  connect_peer(peer, address);
}

bool Node::reachable(std::uint32_t peer) const {
  auto it = eps_.find(peer);
  return it != eps_.end() && net_->alive(it->second);
}

bool Node::send(std::uint32_t peer, std::uint16_t type, std::int64_t iteration, std::span<const std::byte> payload) {
  auto it = eps_.find(peer);
  if (it == eps_.end() || !net_->alive(it->second)) return false;
  auto c = net_->send(it->second, type, static_cast<std::uint64_t>(iteration), payload);
  return !(c->done && !c->error.empty());
}

// The incarnation fence: a message from an earlier incarnation of its
// sender than one already heard is a stale process's.
bool Node::admit(const transport::Received& r) {
  const auto& h = r.message.header;
  if (auto a = admitted_.find(h.sender); a != admitted_.end() && h.type != kHello && h.type != kTicket) {
    if (h.incarnation == a->second) return true;
    std::cerr << "accel cluster: dropped " << type_name(h.type) << " from " << h.sender << " incarnation "
              << h.incarnation << " (counted: " << a->second << ")\n";
    return false;
  }
  auto [it, fresh] = incarnation_.try_emplace(h.sender, h.incarnation);
  if (!fresh && h.incarnation < it->second) {
    std::cerr << "accel cluster: dropped " << type_name(h.type) << " from " << h.sender << " incarnation "
              << h.incarnation << " (now " << it->second << ")\n";
    return false;
  }
  it->second = std::max(it->second, h.incarnation);
  return true;
}

std::optional<transport::Received> Node::receive(Ms timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<Ms>(deadline - Clock::now());
    auto r = net_->receive(std::max(left, Ms(0)));
    if (!r) return std::nullopt;
    if (admit(*r)) return r;
  }
}

void Node::stash(transport::Received r, std::optional<std::int64_t> now) {
  const auto sender = r.message.header.sender;
  const auto round = static_cast<std::int64_t>(r.message.header.iteration);
  if (now && coordinator() && round > *now + kMaxAhead) {  // members may lag and catch up from their stash
    std::cerr << "accel cluster: dropped " << type_name(r.message.header.type) << " of round " << round << " from "
              << sender << ": this node is at round " << *now << "\n";
    return;
  }
  std::size_t count = 0, bytes = r.message.payload.size();
  for (const auto& e : early_)
    if (e.message.header.sender == sender) {
      ++count;
      bytes += e.message.payload.size();
    }
  if (count >= kMaxEarly || bytes > kMaxEarlyBytes) {
    std::cerr << "accel cluster: dropped " << type_name(r.message.header.type) << " of round "
              << r.message.header.iteration << " from " << sender << ": " << count
              << " early messages of it held already\n";
    return;
  }
  early_.push_back(std::move(r));
}

std::vector<transport::Received> Node::arrived() {
  std::vector<transport::Received> out;
  for (auto r = net_->poll(); r; r = net_->poll())
    if (admit(*r)) out.push_back(std::move(*r));
  return out;
}

std::map<std::uint32_t, Contribution> Node::sync(std::int64_t t, const Contribution& mine, Membership& view,
                                                 const Validate& validate, const Other& other, SyncStats& stats) {
  const auto t0 = Clock::now();
  const auto payload = encode(mine);
  sent_[t] = payload;
  while (sent_.size() > 8) sent_.erase(sent_.begin());
  // Notification phase: everyone this node believes active; the unreachable
  // move to inactive.
  std::set<std::uint32_t> notified;
  for (auto q : view.active) {
    if (q == id()) continue;
    if (send(q, kContribution, t, payload)) notified.insert(q);
    else stats.evicted.push_back(q);
  }
  const auto t1 = Clock::now();
  stats.notify_seconds = std::chrono::duration<double>(t1 - t0).count();

  // Waiting phase. Results of t are solicited (from the notified) or
  // unsolicited (from a returning worker, which gets this node's result in
  // reply). Workers learn the iteration's view from the coordinator's result.
  std::map<std::uint32_t, Contribution> got;
  std::optional<Membership> coord_view;
  if (coordinator()) coord_view = mine.view;
  std::map<std::uint32_t, Contribution> stand_in;  // the coordinator's, for lost members
  bool stands_in = false;
  auto take_stand_in = [&](std::uint32_t q, Bytes data) {
    try {
      validate(data);
    } catch (const InputError& e) {
      std::cerr << "accel cluster: dropped stand-in for " << q << ": " << e.what() << "\n";
      return;
    }
    stand_in[q].data = std::move(data);
  };
  auto handle = [&](const transport::Received& r) {
    const auto& h = r.message.header;
    if (h.type == kStandIn && h.sender == 0 && !coordinator()) {
      if (static_cast<std::int64_t>(h.iteration) > t) return stash(r, t);
      if (static_cast<std::int64_t>(h.iteration) < t) return;
      try {
        auto [q, data] = decode_stand_in(r.message.payload, limits_);
        take_stand_in(q, std::move(data));
      } catch (const InputError& e) {
        std::cerr << "accel cluster: dropped stand-in: " << e.what() << "\n";
      }
      return;
    }
    if (h.type != kContribution) return other(r);
    const auto it = static_cast<std::int64_t>(h.iteration);
    if (it > t) return stash(r, t);
    Contribution p;
    try {
      p = decode_contribution(r.message.payload, limits_);
      validate(p.data);
    } catch (const InputError& e) {
      std::cerr << "accel cluster: dropped contribution from " << h.sender << ": " << e.what() << "\n";
      return;
    }
    if (it < t) {
      // A returning worker a little behind: answer from the cache. Anything
      // else older than this iteration is stale and dropped.
      if (!p.reply_address.empty() && sent_.count(it)) {
        ensure_peer(h.sender, p.reply_address);
        send(h.sender, kContribution, it, sent_[it]);
      } else {
        std::cerr << "accel cluster: dropped stale contribution of round " << it << " from " << h.sender
                  << " (now " << t << ")\n";
      }
      return;
    }
    if (h.sender == 0 && p.has_view) {
      coord_view = p.view;
      stands_in = p.stands_in;
      for (auto& [q, data] : p.stand_ins) take_stand_in(q, std::move(data));
      p.stand_ins.clear();
    }
    if (!notified.count(h.sender) && h.sender != id()) {
      // Unsolicited: answer a returning worker so it can resynchronize.
      if (!p.reply_address.empty()) {
        ensure_peer(h.sender, p.reply_address);
        send(h.sender, kContribution, t, payload);
      }
    }
    got[h.sender] = std::move(p);
  };
  // Early arrivals of this iteration first.
  std::vector<transport::Received> early;
  early.swap(early_);
  for (auto& r : early) handle(r);

  const auto deadline = t1 + timeout_;
  for (;;) {
    bool done = coord_view.has_value();
    if (done)
      for (auto q : coord_view->active)
        if (q != id() && !got.count(q) && !stand_in.count(q) &&
            std::find(stats.evicted.begin(), stats.evicted.end(), q) == stats.evicted.end()) {
          // A member whose endpoint died will not answer: stop waiting for it.
          if (eps_.count(q) && !net_->alive(eps_[q])) {
            stats.evicted.push_back(q);
            continue;
          }
          done = false;
        }
    if (done) break;
    const auto now = Clock::now();
    if (now >= deadline) break;
    auto r = receive(std::chrono::duration_cast<Ms>(deadline - now));
    if (r) handle(*r);
  }
  // A member of the coordinator's view that did not answer: when the
  // coordinator stands in for lost members, it sends its stand-in once its
  // own wait ends (it evicts the member then); wait for that, bounded, so
  // that every participant counts the same contributions.
  if (coord_view && stands_in && !coordinator()) {
    auto missing = [&] {
      for (auto q : coord_view->active)
        if (q != id() && !got.count(q) && !stand_in.count(q)) return true;
      return false;
    };
    const auto deadline2 = Clock::now() + timeout_ + Ms(1000);
    while (missing() && Clock::now() < deadline2 && reachable(0))
      if (auto r = receive(std::chrono::duration_cast<Ms>(deadline2 - Clock::now()))) handle(*r);
  }
  // Whatever else has arrived (a hello, a returning worker's request, its
  // rows' transfer to progress): a coordinator without other members waits
  // for no one, and this is then its only turn at the network.
  for (auto& r : arrived()) handle(r);
  stats.wait_seconds = std::chrono::duration<double>(Clock::now() - t1).count();

  if (!coord_view) {
    if (!reachable(0)) throw CoordinatorGone("the coordinator is gone (" + net_->endpoint_error(eps_.count(0) ? eps_[0] : 0) + ")");
    throw Evicted("no result from the coordinator for round " + std::to_string(t) + " within the timeout");
  }
  view = *coord_view;
  std::map<std::uint32_t, Contribution> members;
  for (auto q : view.active) {
    if (q == id()) {
      members[q] = mine;
    } else if (auto s = stand_in.find(q); s != stand_in.end()) {
      members[q] = std::move(s->second);  // the coordinator's, counted by every participant alike
      if (std::find(stats.evicted.begin(), stats.evicted.end(), q) == stats.evicted.end()) stats.evicted.push_back(q);
    } else if (auto it = got.find(q); it != got.end()) {
      members[q] = std::move(it->second);
    } else if (std::find(stats.evicted.begin(), stats.evicted.end(), q) == stats.evicted.end()) {
      stats.evicted.push_back(q);  // timed out
    }
  }
  // Lost members' rows, computed by the coordinator, in their place.
  for (auto& [q, c] : stand_in)
    if (!members.count(q)) members[q] = std::move(c);
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
      std::cerr << "accel cluster: dropped contribution from " << h.sender << ": " << e.what() << "\n";
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
    if (auto r = receive(std::chrono::duration_cast<Ms>(deadline - now))) handle(*r);
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
    throw CoordinatorGone("the coordinator is gone (" + net_->endpoint_error(eps_.count(0) ? eps_[0] : 0) + ")");
  const auto t1 = Clock::now();
  stats.notify_seconds = std::chrono::duration<double>(t1 - t0).count();
  std::optional<Contribution> decision;
  auto handle = [&](const transport::Received& r) {
    const auto& h = r.message.header;
    if (h.type != kDecision || h.sender != 0) return other(r);
    const auto it = static_cast<std::int64_t>(h.iteration);
    if (it > t) return stash(r, t);
    if (it < t) return;  // an older round's, already applied
    try {
      Contribution c = decode_contribution(r.message.payload, limits_);
      if (!c.has_view) throw InputError("decision without a view");
      validate_decision(c.data);
      decision = std::move(c);
    } catch (const InputError& e) {
      std::cerr << "accel cluster: dropped decision of round " << t << ": " << e.what() << "\n";
    }
  };
  std::vector<transport::Received> early;
  early.swap(early_);
  for (auto& r : early) handle(r);
  // Whether this member still counts is the coordinator's call, which it
  // says (kEvicted): a decision may take long (the coordinator's own work
  // between problems), so a member waits as long as the coordinator lives.
  while (!decision) {
    if (!reachable(0))
      throw CoordinatorGone("the coordinator is gone (" + net_->endpoint_error(eps_.count(0) ? eps_[0] : 0) + ")");
    if (auto r = receive(Ms(100))) {
      if (r->message.header.type == kEvicted && r->message.header.sender == 0)
        throw Evicted("the coordinator no longer counts this member (round " + std::to_string(t) + ")");
      handle(*r);
    }
  }
  stats.wait_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  return std::move(*decision);
}

}  // namespace accel::cluster
