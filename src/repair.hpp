// The repair thread of the localized variant (repair.cpp).
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "store.hpp"

namespace rmastore::internal {

// Thrown by acquire_locks for the repair thread when a lock is busy and the thread may not queue
// for it (Repairer::enter_queue), or when new work cut its queued wait short: the slot is
// repaired later, after the others.
class LocksBusy final : public std::runtime_error {
public:
  LocksBusy() : std::runtime_error("a lock the repair needs is busy") {}
};

class Store::Repairer {
public:
  explicit Repairer(Store &s);
  ~Repairer();
  Repairer(const Repairer &) = delete;
  Repairer &operator=(const Repairer &) = delete;

  void start();
  // Makes every wait of the thread give up, and joins it.
  void stop();
  // Any thread: repair `id` soon.
  void request(const SlotId &id);
  // Any thread: placement changed; repair what it moved.
  void view_changed();
  void stats(store_info_t &out) const;
  void add_bytes(std::uint64_t n) { repaired_bytes_.fetch_add(n); }
  // Repair thread, in acquire_locks when a lock is busy: may it wait in the holders' queues?
  // Only when it has no other slot to repair. A queued wait blocks the thread, and the lock it
  // waits for may be held by a live locker that itself waits for a lock only another of this
  // thread's repairs can free (one a failed process held): a cycle through the thread's work
  // list that the global lock order does not see. Work that arrives during the wait ends it
  // (the agent's wait gives up, acquire_locks throws LocksBusy).
  bool enter_queue();
  void leave_queue();
  // The queued wait was cut short by new work (not by a failure or stop()).
  bool interrupted() const { return interrupt_.load(std::memory_order_acquire) && !stop_.load(); }

private:
  void loop();
  // Slots whose holders differ between the placement of the last complete pass and `now`, and
  // of which this process is the first holder now.
  std::vector<SlotId> candidates(const Placement &now);

  Store &s_;
  Agent agent_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::set<SlotId> requested_;
  bool view_dirty_ = false;
  std::atomic<bool> stop_{false};
  // The agent's stop flag: set by stop(), and by new work while the thread waits in a lock queue.
  std::atomic<bool> interrupt_{false};
  bool queueing_ = false;                     // in a queued lock wait (enter_queue .. leave_queue)
  std::size_t others_ = 0;                    // slots of the current pass besides the one being repaired
  std::shared_ptr<const Placement> repaired_; // placement the last complete pass repaired for
  int repaired_failures_ = 0;
  std::atomic<std::uint64_t> backlog_{0}, repaired_slots_{0}, repaired_bytes_{0};
};

} // namespace rmastore::internal
