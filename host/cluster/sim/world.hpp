// A deterministic world for the cluster engine's own code (issue 30's
// simulator, after FoundationDB's and TigerBeetle's): simulated processes
// run the engine unmodified, each on a thread of its own, but one at a time
// and in virtual time. Only the network (SimTransport), the clock
// (cluster::Clock through ClockHook) and randomness (rng()) are the
// world's. A process runs until it waits -- for a message, a timeout or a
// pause -- and the world then moves virtual time to the next event: a
// message delivered, a timeout due, a process started or killed. Events of
// one time run in the order they were made, so one seed gives one run.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "accel/transport/transport.hpp"
#include "clock.hpp"

namespace accel::cluster::sim {

// Every process alike: its network interface carries `bytes_per_second`
// each way, messages queue behind each other on the sender's and the
// receiver's side, and each arrives `latency` after its last byte left.
struct LinkModel {
  Clock::duration latency = std::chrono::microseconds(10);
  double bytes_per_second = 1.25e9;  // 10 Gbit/s
};

// Thrown inside a killed process at its next wait: it unwinds its stack (no
// engine code catches it, as it is no std::exception) and ends.
struct Killed {};

class SimTransport;
class SimBootNetwork;

class World : public ClockHook {
 public:
  using Proc = std::uint32_t;

  World(std::uint64_t seed, LinkModel link);
  ~World() override;
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  // A process that runs fn from `at` on (virtual time since the start).
  // Its Nodes get SimTransports of this world; its thread is named `name`
  // (its first 15 characters), for a debugger.
  Proc spawn(std::string name, std::function<void()> fn, Clock::duration at = {});
  // Kills p at `at`: it unwinds at its next wait (or at once if waiting),
  // and its endpoints fail for its peers.
  void kill(Proc p, Clock::duration at);
  // Stops p from `at` for `length` (SIGSTOP, then SIGCONT): it runs no
  // step meanwhile; what arrives for it waits in its transport.
  void pause(Proc p, Clock::duration at, Clock::duration length);
  // From `at` for `length`, p is cut off from every other process (a
  // network partition): what it sends and what is sent to it, bulk
  // included, is held, as TCP retransmits it, and arrives in order after
  // the heal; a connection it opens meanwhile waits for the heal (or fails
  // at its timeout). p itself runs on.
  void partition(Proc p, Clock::duration at, Clock::duration length);
  // From `at` for `length`, p is slow, as a process on an overloaded or
  // throttled host is: each time something arrives for it, it computes
  // for `step` of virtual time before it goes on, and what arrives
  // meanwhile waits.
  void slow(Proc p, Clock::duration at, Clock::duration length, Clock::duration step);
  // When the partition cutting p off now heals (now() if none does).
  Clock::time_point cut_off_until(Proc p) const;
  // Runs events until every process has ended (true) or virtual time
  // reaches `limit` (false; the processes left are killed).
  bool run(Clock::duration limit);

  // From `from` to `to` (virtual time since the start), each control
  // message is dropped with probability `drop`, sent twice with
  // probability `duplicate`, and held up to `max_delay` more (which
  // reorders messages), all drawn from the seed. Bulk transfers are left
  // alone.
  struct MessageFaults {
    Clock::duration from{}, to{};
    double drop = 0, duplicate = 0;
    Clock::duration max_delay{};
  };
  void message_faults(const MessageFaults& f) { message_faults_ = f; }

  Clock::time_point now() override { return now_; }
  void sleep_for(Clock::duration d) override;  // the calling process waits d
  Clock::duration elapsed() const { return now_ - start_; }
  std::mt19937_64& rng() { return rng_; }
  const LinkModel& link() const { return link_; }
  bool ended(Proc p) const;

  // --- for SimTransport ---------------------------------------------------
  // The calling process waits until `deadline` or until something arrives
  // for it, whichever is first.
  void wait_until(Clock::time_point deadline);
  Proc current() const;  // the calling process
  // The calling process was killed: it is unwinding, and waits no more (a
  // destructor that waits returns at once).
  bool dying() const;
  std::uint64_t attach(SimTransport* t);  // an address for t, owned by the calling process
  void detach(std::uint64_t address);     // t is gone: its peers' endpoints to it fail
  SimTransport* find(std::uint64_t address) const;
  // Delivers frame from `from` to `to` after the link's time; dropped if
  // `to` is gone by then.
  void deliver(std::uint64_t from, std::uint64_t to, std::vector<std::byte> frame);
  // A bulk transfer's bytes into `to`'s expected transfer; `done` (the
  // sender's) completes then, with an error if `to` is gone.
  void deliver_bulk(std::uint64_t from, std::uint64_t to, std::uint64_t transfer_id, std::vector<std::byte> data,
                    std::shared_ptr<transport::Completion> done);

  struct Stats {
    std::uint64_t events = 0, messages = 0, bytes = 0;
    std::uint64_t dropped = 0, duplicated = 0;  // by message_faults
    std::map<Proc, std::pair<std::uint64_t, std::uint64_t>> received;  // by process: messages, bytes
    // The first process's (the swarm's coordinator's) by message type
    // (protocol.hpp; 0: bulk transfers, -1: frames that did not decode).
    std::map<int, std::pair<std::uint64_t, std::uint64_t>> first_by_type;
    // Bounds: the most control messages a transport held unreceived at
    // once, those it dropped with its queue full (max_queued_messages), and
    // the longest any process waited (a receive, a timeout, a sleep) before
    // it was woken or killed.
    std::size_t peak_held = 0;
    std::uint64_t dropped_full = 0;
    Clock::duration longest_wait{};
  };
  const Stats& stats() const { return stats_; }

 private:
  enum class Kind { Start, Wake, Deliver, Kill, Pause };
  struct Event {
    Clock::time_point at;
    std::uint64_t seq;
    Kind kind;
    Proc proc = 0;
    std::uint64_t token = 0;  // Wake: the wait it ends
    std::uint64_t from = 0, to = 0;
    std::vector<std::byte> frame{};
    std::uint64_t transfer_id = 0;  // Deliver: a bulk transfer's bytes, not a control frame
    std::shared_ptr<transport::Completion> done{};
    Clock::duration length{};  // Pause
    bool operator>(const Event& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  struct Process {
    std::string name;
    std::function<void()> fn;
    std::thread thread;
    bool started = false, waiting = false, ended = false, killed = false;
    std::uint64_t wait_token = 0;
    Clock::time_point paused_until{};
    std::condition_variable turn;  // signalled when running_ becomes this process
    std::uint64_t woken_token = 0;  // the wait a Wake is queued for already (0: none)
    bool computing = false;         // inside a slow window's step (slow())
  };
  static constexpr Proc kScheduler = ~Proc{0};

  void push(Event e);
  void handle(Event& e);
  void resume(Proc p);           // scheduler side: run p until it waits or ends
  void yield_to_scheduler(Proc me, std::unique_lock<std::mutex>& lock);
  void body(Proc p);
  void wake(Proc p);
  void stop_all();

  const Clock::time_point start_{};
  Clock::time_point now_{};
  LinkModel link_;
  std::mt19937_64 rng_;
  std::uint64_t seq_ = 0;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::vector<std::unique_ptr<Process>> procs_;
  std::map<std::uint64_t, SimTransport*> transports_;
  std::map<std::uint64_t, Proc> owner_;
  std::map<std::uint64_t, Clock::time_point> egress_free_, ingress_free_;  // by transport address
  Clock::time_point carried(std::uint64_t from, std::uint64_t to, std::size_t bytes);
  struct Cut {
    Proc proc;
    Clock::time_point from, to;
  };
  std::vector<Cut> cuts_;
  struct Slow {
    Proc proc;
    Clock::time_point from, to;
    Clock::duration step;
  };
  std::vector<Slow> slows_;
  void compute_if_slow(Proc self);
  // `at`, or after the heal of a partition the message from `from` to `to`
  // crosses on its way (sent before it heals, arriving after it began).
  Clock::time_point healed(std::uint64_t from, std::uint64_t to, Clock::time_point at) const;
  std::uint64_t next_address_ = 1;
  std::size_t live_ = 0;  // spawned, not ended
  Stats stats_;
  MessageFaults message_faults_;
  std::unique_ptr<SimBootNetwork> boot_;

  mutable std::mutex mu_;
  // One condition each (the scheduler's and every process's), so that a
  // hand-over wakes the one thread whose turn it is, not all P of them.
  std::condition_variable scheduler_turn_;
  Proc running_ = kScheduler;
};

}  // namespace accel::cluster::sim
