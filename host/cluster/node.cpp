#include "node.hpp"

#include <algorithm>
#include <iostream>

#include "accel/error.hpp"

namespace accel::cluster {

Node::Node(transport::Options opts, Ms timeout, Limits limits)
    : net_(std::make_unique<transport::Transport>(std::move(opts))), timeout_(timeout), limits_(limits) {}

void Node::connect_peer(std::uint32_t peer, const std::vector<std::byte>& address) {
  auto it = eps_.find(peer);
  if (it != eps_.end() && net_->alive(it->second)) net_->disconnect(it->second);
  eps_[peer] = net_->connect(address);
  addr_[peer] = address;
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

std::optional<transport::Received> Node::receive(Ms timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<Ms>(deadline - Clock::now());
    auto r = net_->receive(std::max(left, Ms(0)));
    if (!r) return std::nullopt;
    const auto& h = r->message.header;
    auto [it, fresh] = incarnation_.try_emplace(h.sender, h.incarnation);
    if (!fresh && h.incarnation < it->second) {
      std::cerr << "accel cluster: dropped " << type_name(h.type) << " from " << h.sender << " incarnation "
                << h.incarnation << " (now " << it->second << ")\n";
      continue;
    }
    it->second = std::max(it->second, h.incarnation);
    return r;
  }
}

std::map<std::uint32_t, Partial> Node::sync(std::int64_t t, const Partial& mine, Membership& view, std::int64_t k,
                                            std::int64_t d,
                                            const std::function<void(const transport::Received&)>& other,
                                            SyncStats& stats) {
  const auto t0 = Clock::now();
  const auto payload = encode(mine);
  sent_[t] = payload;
  while (sent_.size() > 8) sent_.erase(sent_.begin());
  // Notification phase: everyone this node believes active; the unreachable
  // move to inactive.
  std::set<std::uint32_t> notified;
  for (auto q : view.active) {
    if (q == id()) continue;
    if (send(q, kPartial, t, payload)) notified.insert(q);
    else stats.evicted.push_back(q);
  }
  const auto t1 = Clock::now();
  stats.notify_seconds = std::chrono::duration<double>(t1 - t0).count();

  // Waiting phase. Results of t are solicited (from the notified) or
  // unsolicited (from a returning worker, which gets this node's result in
  // reply). Workers learn the iteration's view from the coordinator's result.
  std::map<std::uint32_t, Partial> got;
  std::optional<Membership> coord_view;
  if (coordinator()) coord_view = mine.view;
  auto handle = [&](const transport::Received& r) {
    const auto& h = r.message.header;
    if (h.type != kPartial) return other(r);
    const auto it = static_cast<std::int64_t>(h.iteration);
    if (it > t) return stash(r);
    Partial p;
    try {
      p = decode_partial(r.message.payload, k, d, limits_);
    } catch (const InputError& e) {
      std::cerr << "accel cluster: dropped partial from " << h.sender << ": " << e.what() << "\n";
      return;
    }
    if (it < t) {
      // A returning worker a little behind: answer from the cache. Anything
      // else older than this iteration is stale and dropped.
      if (!p.reply_address.empty() && sent_.count(it)) {
        ensure_peer(h.sender, p.reply_address);
        send(h.sender, kPartial, it, sent_[it]);
      } else {
        std::cerr << "accel cluster: dropped stale partial of iteration " << it << " from " << h.sender
                  << " (now " << t << ")\n";
      }
      return;
    }
    if (h.sender == 0 && p.has_view) coord_view = p.view;
    if (!notified.count(h.sender) && h.sender != id()) {
      // Unsolicited: answer a returning worker so it can resynchronize.
      if (!p.reply_address.empty()) {
        ensure_peer(h.sender, p.reply_address);
        send(h.sender, kPartial, t, payload);
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
        if (q != id() && !got.count(q) &&
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
  stats.wait_seconds = std::chrono::duration<double>(Clock::now() - t1).count();

  if (!coord_view) {
    if (!reachable(0)) throw CoordinatorGone("the coordinator is gone (" + net_->endpoint_error(eps_.count(0) ? eps_[0] : 0) + ")");
    throw Evicted("no result from the coordinator for iteration " + std::to_string(t) + " within the timeout");
  }
  view = *coord_view;
  std::map<std::uint32_t, Partial> members;
  for (auto q : view.active) {
    if (q == id()) {
      members[q] = mine;
    } else if (auto it = got.find(q); it != got.end()) {
      members[q] = std::move(it->second);
    } else if (std::find(stats.evicted.begin(), stats.evicted.end(), q) == stats.evicted.end()) {
      stats.evicted.push_back(q);  // timed out
    }
  }
  return members;
}

}  // namespace accel::cluster
