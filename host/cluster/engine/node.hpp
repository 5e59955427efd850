// One participant of a distributed job: the transport, its peers, and the
// barrier of [Antimatroid] (Rosa and Ludwig-style notification
// phase, waiting phase
// with a liveness-checked timeout, active / inactive / recovering lists,
// solicited and unsolicited results), for any workload.
//
// Beyond [Antimatroid]: the coordinator's notification carries its membership
// view for the round, and every participant combines exactly the
// contributions of that view's active members -- so a worker that returns,
// or one lost half-way through a broadcast, cannot make participants
// disagree on the next state ([Antimatroid] aggregates unsolicited results too).
// Incarnation numbers fence a stopped-and-resumed process: a message
// carrying an incarnation below the highest one seen from that id is
// dropped.
//
// Two exchanges (Exchange in workload.hpp): sync() is [Antimatroid]'s all-to-all
// barrier; gather() / await_decision() are its star form, for workloads
// whose next state the coordinator alone can compute.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "accel/transport/transport.hpp"
#include "clock.hpp"
#include "errors.hpp"
#include "protocol.hpp"
#include "tree.hpp"

namespace accel::cluster {

using Ms = std::chrono::milliseconds;

struct SyncStats {
  double notify_seconds = 0, wait_seconds = 0;
  std::vector<std::uint32_t> evicted;  // timed out or unreachable in this round
};

// Throws InputError when a contribution's workload bytes are malformed (the
// contribution is then dropped, as any bad message is).
using Validate = std::function<void(std::span<const std::byte>)>;
using Other = std::function<void(const transport::Received&)>;
// The workload bytes a peer gets instead of the contribution's own, or null
// (Partition::addressed).
using Addressed = std::function<const Bytes*(std::uint32_t peer)>;

// The transport each Node of this thread gets: UcxTransport, unless a
// simulator set its own maker for the thread (one thread per simulated
// process), which is how the engine's code runs unmodified there.
using TransportMaker = std::function<std::unique_ptr<transport::Transport>(transport::Options)>;
void set_transport_maker(TransportMaker maker);  // empty: UcxTransport again

// Node::await_decision in the tree's form: a decision from `parent` counts
// too (it passes it on), its bytes land in *raw, and it is asked of the
// coordinator again (kAsk) where the parent is gone and every quarter of
// the timeout: a parent may die before passing it on.
struct DecisionFrom {
  std::uint32_t parent = 0;
  Bytes* raw = nullptr;
  bool ask_again = false;
};

class Node {
 public:
  Node(transport::Options opts, Ms timeout, Limits limits);

  transport::Transport& net() { return *net_; }
  std::uint32_t id() const { return net_->options().self_id; }
  bool coordinator() const { return id() == 0; }
  Ms timeout() const { return timeout_; }
  const Limits& limits() const { return limits_; }

  // Peers by id. connect_peer replaces a dead or older endpoint.
  // `address`, when known, is the peer's worker address behind ep (so a
  // reply address that differs means the peer restarted its transport).
  void set_endpoint(std::uint32_t peer, transport::EndpointId ep, std::vector<std::byte> address = {}) {
    eps_[peer] = ep;
    addr_[peer] = std::move(address);
  }
  // Connects unless a live endpoint to that very address exists.
  void ensure_peer(std::uint32_t peer, const std::vector<std::byte>& address);
  transport::EndpointId endpoint(std::uint32_t peer) const {
    auto it = eps_.find(peer);
    return it == eps_.end() ? transport::kNoEndpoint : it->second;
  }
  void connect_peer(std::uint32_t peer, const std::vector<std::byte>& address);
  bool reachable(std::uint32_t peer) const;
  bool send(std::uint32_t peer, std::uint16_t type, std::int64_t iteration, std::span<const std::byte> payload);

  // Next message that passed the fences (job token by the transport; here:
  // incarnation). Messages of the current iteration handler may be stashed
  // for later by the caller; see sync().
  std::optional<transport::Received> receive(Ms timeout);
  // What has arrived by now, without waiting: one network progress, then
  // the messages that passed the fences, in order.
  std::vector<transport::Received> arrived();

  // The all-to-all barrier of round t. `mine` is this node's contribution;
  // on the coordinator it must carry the view. `view` in: the members this
  // node believes active (it notifies them); out: the coordinator's view of
  // t. Returns the contributions of the view's active members that arrived
  // in time, this node's own included when it is a member. `other` sees
  // every message that is not a contribution of round t (the coordinator
  // handles hello / resync there). `addressed`, where set, gives a peer its
  // own workload bytes in place of mine.data. Workers throw CoordinatorGone
  // or Evicted.
  std::map<std::uint32_t, Contribution> sync(std::int64_t t, const Contribution& mine, Membership& view,
                                             const Validate& validate, const Other& other, SyncStats& stats,
                                             const Addressed& addressed = {});

  // What this node counted in round t (counted_digest of what it absorbs):
  // its contribution of round t + 1 carries it, and the coordinator's is
  // the one every participant must match (sync).
  void counted_round(std::int64_t t, std::uint64_t digest) { last_counted_ = {t, digest}; }
  // Task::confirmed: a worker's sync() counts a round only as the
  // coordinator's confirmation (kConfirm) says it counted it.
  void confirm_rounds(bool on) { confirm_rounds_ = on; }

  // Star form, coordinator side: the contributions of round t from `from`
  // (the view's active members but this node), as they arrive or until the
  // timeout; silent or unreachable ones land in stats.evicted.
  std::map<std::uint32_t, Contribution> gather(std::int64_t t, const std::vector<std::uint32_t>& from,
                                               const Validate& validate, const Other& other, SyncStats& stats);
  // Star form, member side: sends `mine` (unless null: a returning member
  // that does not count yet) to the coordinator and waits for the
  // coordinator's decision of round t (which carries the view).
  Contribution exchange_with_coordinator(std::int64_t t, const Contribution* mine, const Validate& validate_decision,
                                         const Other& other, SyncStats& stats);

  // Tree form (Task::tree, tree.hpp), coordinator side: the partials of
  // round t that cover members of `from` (the view's active members but
  // this node) none of which is counted yet, as they arrive or until the
  // timeout; at half of it, each member still missed is asked for its own
  // (kAsk), and so are all of them at once where one is found unreachable
  // (its subtree's partial is lost with it). Silent or unreachable members
  // land in stats.evicted.
  struct TreeRound {
    std::map<std::uint32_t, Bytes> sums;            // by the least member id each covers
    std::set<std::uint32_t> covered;                // members counted in a sum keyed by another
    std::map<std::uint32_t, Contribution> heads;    // every member counted: its engine fields
    std::set<std::uint32_t> asked;                  // members asked for their own (kAsk)
  };
  TreeRound gather_tree(std::int64_t t, const std::vector<std::uint32_t>& from, const Validate& validate,
                        const Other& other, SyncStats& stats);
  // Tree form, member side: waits (up to a quarter of the timeout) for its
  // children's partials, adds them to `mine` (unless null: a returning
  // member), sends the sum to its parent (the coordinator where the parent
  // is unreachable) and waits for the decision of round t. Meanwhile a
  // child's late partial goes on to the coordinator as it is, and a kAsk
  // is answered with this member's own contribution.
  Contribution exchange_in_tree(std::int64_t t, const Contribution* mine, const TreeSpot& spot,
                                const Combine& combine, const Validate& validate, const Validate& validate_decision,
                                const Other& other, SyncStats& stats);

  // Messages that arrived early (a later iteration's partials), replayed by sync().
  // Keeps a message for a later round's handler. Bounded: a peer in the
  // barrier is at most a round ahead of the coordinator's round `now`, so
  // there a message more than kMaxAhead rounds ahead is dropped (a flood of far
  // rounds from a token holder would otherwise crowd out the real sender);
  // and per sender, kMaxEarly messages and kMaxEarlyBytes of payload.
  void stash(transport::Received r, std::optional<std::int64_t> now = std::nullopt);
  static constexpr std::size_t kMaxEarly = 32, kMaxEarlyBytes = std::size_t{256} << 20;
  static constexpr std::int64_t kMaxAhead = 4;
  bool admit(const transport::Received& r);
  // Sender binding (bootstrap.hpp): from now on messages to and from `peer`
  // are sealed with `key`, and one from `peer` counts only if its seal
  // verifies. Sealed messages that came before the key did are held
  // (bounded as the stash) and let in if they verify now.
  void set_key(std::uint32_t peer, const transport::MacKey& key);
  // From now on only `incarnation` of `peer` counts: the coordinator sets
  // it from a hello it admitted (bootstrap.hpp), so that a sender claiming
  // another incarnation -- an old process, or anyone naming a high number
  // to fence the real one out -- is dropped. Hellos and row requests are
  // exempt: the ticket and the handshake's address vouch for those.
  void admit_incarnation(std::uint32_t peer, std::uint32_t incarnation) { admitted_[peer] = incarnation; }

 private:
  struct SyncRound;  // sync()'s state and steps (node.cpp)
  void await_words(const Membership& coord_view, std::int64_t t, const std::function<bool(std::uint32_t)>& missing,
                   const std::function<void(const transport::Received&)>& handle);
  std::map<std::uint32_t, Contribution> counted(const Membership& view, const Contribution& mine,
                                                std::map<std::uint32_t, Contribution> got,
                                                std::map<std::uint32_t, std::optional<Bytes>> words,
                                                SyncStats& stats);
  void inject_partial_send_fault(std::int64_t t, std::size_t sent);
  // Throws CoordinatorGone, saying why the endpoint to the coordinator died.
  [[noreturn]] void coordinator_gone() const;
  Contribution await_decision(std::int64_t t, const Validate& validate_decision, const Other& other,
                              const DecisionFrom& from = {});

  std::unique_ptr<transport::Transport> net_;
  Ms timeout_;
  Limits limits_;
  std::map<std::uint32_t, transport::EndpointId> eps_;
  std::map<std::uint32_t, std::vector<std::byte>> addr_;
  std::map<std::uint32_t, std::uint32_t> incarnation_;  // highest seen per sender
  std::map<std::uint32_t, std::uint32_t> admitted_;     // the one incarnation counted per sender, where set
  std::vector<transport::Received> early_;
  // Authentication: keys by peer, messages waiting for their sender's key,
  // and held ones let in since (returned before the network's).
  std::map<std::uint32_t, transport::MacKey> keys_;
  std::vector<transport::Received> unkeyed_;
  std::vector<transport::Received> let_in_;
  bool authentic(const transport::Received& r);
  bool fenced(const transport::Received& r);
  // This node's recent notifications by iteration: a returning worker that
  // runs an iteration or two behind gets the answer it asks for even after
  // this node has moved on ([Antimatroid]: "wait for them to
  // respond").
  std::map<std::int64_t, std::vector<std::byte>> sent_;
  std::pair<std::int64_t, std::uint64_t> last_counted_{-1, 0};  // (round, counted_digest)
  bool confirm_rounds_ = false;
};

}  // namespace accel::cluster
