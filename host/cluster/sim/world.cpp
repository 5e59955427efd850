#include "world.hpp"

#include <pthread.h>

#include <exception>
#include <stdexcept>

#include "node.hpp"
#include "sim_boot.hpp"
#include "sim_transport.hpp"

namespace accel::cluster::sim {
namespace {
thread_local World::Proc me = ~World::Proc{0};
}

World::World(std::uint64_t seed, LinkModel link)
    : link_(link), rng_(seed), boot_(std::make_unique<SimBootNetwork>(*this)) {}

World::~World() { stop_all(); }

World::Proc World::spawn(std::string name, std::function<void()> fn, Clock::duration at) {
  const auto p = static_cast<Proc>(procs_.size());
  auto proc = std::make_unique<Process>();
  proc->name = std::move(name);
  proc->fn = std::move(fn);
  procs_.push_back(std::move(proc));
  ++live_;
  push({now_ + at, 0, Kind::Start, p});
  return p;
}

void World::kill(Proc p, Clock::duration at) { push({start_ + at, 0, Kind::Kill, p}); }

void World::pause(Proc p, Clock::duration at, Clock::duration length) {
  Event e{start_ + at, 0, Kind::Pause, p};
  e.length = length;
  push(std::move(e));
}

bool World::ended(Proc p) const { return procs_.at(p)->ended; }

void World::partition(Proc p, Clock::duration at, Clock::duration length) {
  cuts_.push_back({p, start_ + at, start_ + at + length});
}

void World::slow(Proc p, Clock::duration at, Clock::duration length, Clock::duration step) {
  slows_.push_back({p, start_ + at, start_ + at + length, step});
}

// The step is a sleep inside the wait, so that the process's own timers
// and what arrives for it all wait behind its compute. Only an arrival
// costs it: a wait that ends at its own deadline (a poll, a timeout) has
// nothing new to compute on.
void World::compute_if_slow(Proc self) {
  Process& p = *procs_[self];
  if (p.computing) return;
  Clock::duration step{};
  for (const auto& s : slows_)
    if (s.proc == self && now_ >= s.from && now_ < s.to) step = std::max(step, s.step);
  if (step == Clock::duration::zero()) return;
  p.computing = true;
  struct Done {
    bool& flag;
    ~Done() { flag = false; }
  } done{p.computing};
  sleep_for(step);
}

Clock::time_point World::cut_off_until(Proc p) const {
  Clock::time_point until = now_;
  for (const auto& c : cuts_)
    if (c.proc == p && now_ >= c.from && now_ < c.to) until = std::max(until, c.to);
  return until;
}

Clock::time_point World::healed(std::uint64_t from, std::uint64_t to, Clock::time_point at) const {
  const auto owner = [&](std::uint64_t address) {
    const auto it = owner_.find(address);
    return it == owner_.end() ? kScheduler : it->second;
  };
  const Proc a = owner(from), b = owner(to);
  for (const auto& c : cuts_)
    if ((a == c.proc || b == c.proc) && now_ < c.to && at >= c.from) at = std::max(at, c.to + link_.latency);
  return at;
}

void World::push(Event e) {
  e.seq = seq_++;
  events_.push(std::move(e));
}

bool World::run(Clock::duration limit) {
  const auto until = start_ + limit;
  while (live_ > 0 && !events_.empty()) {
    if (events_.top().at > until) break;
    Event e = std::move(const_cast<Event&>(events_.top()));
    events_.pop();
    now_ = e.at;
    ++stats_.events;
    handle(e);
  }
  if (live_ > 0) now_ = std::max(now_, until);
  const bool all = live_ == 0;
  stop_all();
  return all;
}

void World::handle(Event& e) {
  switch (e.kind) {
    case Kind::Start: {
      Process& p = *procs_[e.proc];
      if (p.killed) return;  // killed before it started (live_ counted it down)
      p.started = true;
      std::unique_lock lock(mu_);
      p.thread = std::thread([this, q = e.proc] { body(q); });
      lock.unlock();
      resume(e.proc);
      return;
    }
    case Kind::Wake: {
      Process& p = *procs_[e.proc];
      if (!p.waiting || p.wait_token != e.token) return;
      if (now_ < p.paused_until) {  // stopped: it runs when it is continued
        e.at = p.paused_until;
        push(std::move(e));
        return;
      }
      resume(e.proc);
      return;
    }
    case Kind::Pause: {
      Process& p = *procs_[e.proc];
      p.paused_until = std::max(p.paused_until, now_ + e.length);
      return;
    }
    case Kind::Deliver: {
      auto it = transports_.find(e.to);
      const std::size_t bytes = e.frame.size();
      int type = 0;  // bulk
      if (e.done) {
        if (it != transports_.end()) it->second->arrive_bulk(e.transfer_id, e.frame, e.done);
        else e.done->done = true, e.done->error = "Connection reset by remote peer";
        if (auto s = owner_.find(e.from); s != owner_.end()) wake(s->second);
      } else if (it != transports_.end()) {
        const auto before = it->second->dropped_full();
        const auto t = it->second->arrive(e.from, std::move(e.frame));
        type = t ? *t : -1;
        stats_.peak_held = std::max(stats_.peak_held, it->second->held());
        stats_.dropped_full += it->second->dropped_full() - before;
      }
      if (it == transports_.end()) return;  // the receiver is gone
      ++stats_.messages;
      stats_.bytes += bytes;
      auto& r = stats_.received[owner_.at(e.to)];
      ++r.first;
      r.second += bytes;
      if (owner_.at(e.to) == 0) {
        auto& k = stats_.first_by_type[type];
        ++k.first;
        k.second += bytes;
      }
      wake(owner_.at(e.to));
      return;
    }
    case Kind::Kill: {
      Process& p = *procs_[e.proc];
      if (p.ended || p.killed) return;
      p.killed = true;
      if (!p.started) --live_;
      if (p.started && p.waiting) resume(e.proc);
      return;
    }
  }
}

// Something arrived for p: it runs now (after the events already due).
void World::wake(Proc p) {
  Process& proc = *procs_[p];
  if (!proc.waiting || proc.woken_token == proc.wait_token) return;  // one wake ends a wait
  proc.woken_token = proc.wait_token;
  push({now_, 0, Kind::Wake, p, proc.wait_token});
}

void World::resume(Proc p) {
  std::unique_lock lock(mu_);
  procs_[p]->waiting = false;
  running_ = p;
  procs_[p]->turn.notify_one();
  scheduler_turn_.wait(lock, [&] { return running_ == kScheduler; });
}

void World::yield_to_scheduler(Proc self, std::unique_lock<std::mutex>& lock) {
  running_ = kScheduler;
  scheduler_turn_.notify_one();
  procs_[self]->turn.wait(lock, [&] { return running_ == self; });
}

void World::body(Proc p) {
  me = p;
  set_clock_hook(this);
  set_boot_network(boot_.get());
  set_transport_maker([this](transport::Options o) { return std::make_unique<SimTransport>(*this, std::move(o)); });
  {
    std::unique_lock lock(mu_);
    procs_[p]->turn.wait(lock, [&] { return running_ == p; });
  }
  pthread_setname_np(pthread_self(), procs_[p]->name.substr(0, 15).c_str());
  try {
    if (!procs_[p]->killed) procs_[p]->fn();
  } catch (const Killed&) {
  }
  std::unique_lock lock(mu_);
  procs_[p]->ended = true;
  --live_;
  running_ = kScheduler;
  scheduler_turn_.notify_one();
}

World::Proc World::current() const {
  if (me == kScheduler) throw std::logic_error("sim::World: not called from a simulated process");
  return me;
}

bool World::dying() const { return procs_[current()]->killed; }

void World::wait_until(Clock::time_point deadline) {
  const Proc self = current();
  Process& p = *procs_[self];
  if (p.killed) {
    if (std::uncaught_exceptions() > 0) return;  // unwinding already
    throw Killed{};
  }
  p.waiting = true;
  const std::uint64_t token = ++p.wait_token;
  push({std::max(deadline, now_), 0, Kind::Wake, self, token});
  const auto since = now_;
  std::unique_lock lock(mu_);
  yield_to_scheduler(self, lock);
  lock.unlock();
  stats_.longest_wait = std::max(stats_.longest_wait, now_ - since);
  if (p.killed) throw Killed{};
  if (p.woken_token == token) compute_if_slow(self);  // woken by an arrival, not by its own deadline
}

void World::sleep_for(Clock::duration d) {
  const auto until = now_ + d;
  while (now_ < until && !dying()) wait_until(until);
}

std::uint64_t World::attach(SimTransport* t) {
  const std::uint64_t a = next_address_++;
  transports_[a] = t;
  owner_[a] = current();
  return a;
}

// Peers with an endpoint to it learn at once, as UCX's peer-failure
// handler tells them of a process whose connections reset.
void World::detach(std::uint64_t address) {
  transports_.erase(address);
  owner_.erase(address);
  for (const auto& [a, t] : transports_)
    if (t->peer_gone(address)) wake(owner_.at(a));
}

SimTransport* World::find(std::uint64_t address) const {
  auto it = transports_.find(address);
  return it == transports_.end() ? nullptr : it->second;
}

// Each process's network interface carries bytes_per_second out and as
// much in: a message leaves after those queued before it on the sender's
// side, and lands after those queued before it on the receiver's (P - 1
// partials sent at once take P - 1 times one's time, as on a real NIC).
Clock::time_point World::carried(std::uint64_t from, std::uint64_t to, std::size_t bytes) {
  const auto wire = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(static_cast<double>(bytes) / link_.bytes_per_second));
  auto& out = egress_free_[from];
  out = std::max(out, now_) + wire;
  auto& in = ingress_free_[to];
  in = std::max(in + wire, out);
  return in + link_.latency;
}

void World::deliver(std::uint64_t from, std::uint64_t to, std::vector<std::byte> frame) {
  auto at = healed(from, to, carried(from, to, frame.size()));
  const MessageFaults& f = message_faults_;
  if (now_ >= start_ + f.from && now_ < start_ + f.to) {
    std::uniform_real_distribution<double> u(0, 1);
    const auto later = [&] {
      return std::chrono::duration_cast<Clock::duration>(f.max_delay * u(rng_));
    };
    if (u(rng_) < f.drop) {
      ++stats_.dropped;
      return;
    }
    if (u(rng_) < f.duplicate) {
      ++stats_.duplicated;
      push({at + later(), 0, Kind::Deliver, 0, 0, from, to, frame});
    }
    at += later();
  }
  push({at, 0, Kind::Deliver, 0, 0, from, to, std::move(frame)});
}

void World::deliver_bulk(std::uint64_t from, std::uint64_t to, std::uint64_t transfer_id, std::vector<std::byte> data,
                         std::shared_ptr<transport::Completion> done) {
  const auto at = healed(from, to, carried(from, to, data.size()));
  push({at, 0, Kind::Deliver, 0, 0, from, to, std::move(data), transfer_id, std::move(done)});
}

// At the limit, or when the world ends: every process left is killed and
// unwinds (its destructors run in its own thread, in turn).
void World::stop_all() {
  for (Proc p = 0; p < procs_.size(); ++p) {
    Process& proc = *procs_[p];
    if (proc.started && !proc.ended) {
      proc.killed = true;
      resume(p);
    }
  }
  for (auto& p : procs_)
    if (p->thread.joinable()) p->thread.join();
  while (!events_.empty()) events_.pop();
}

}  // namespace accel::cluster::sim
