// Localized variant: the repair thread (the protocol is described at the top of repair.cpp).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "client/core.hpp"
#include "variants/localized/locks.hpp"

namespace rmastore::internal {

class Repairer final : public QueueGate {
public:
  Repairer(Core &core, LockClient &locks);
  ~Repairer() override;
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

  // In LockClient::acquire when a lock is busy: may the thread wait in the holders' queues?
  // Only when it has no other slot to repair. A queued wait blocks the thread, and the lock it
  // waits for may be held by a live locker that itself waits for a lock only another of this
  // thread's repairs can free (one a failed process held): a cycle through the thread's work
  // list that the global lock order does not see. Work that arrives during the wait ends it
  // (the agent's wait gives up, acquire throws LocksBusy).
  bool enter() override;
  void leave() override;
  bool interrupted() const override { return interrupt_.load(std::memory_order_acquire) && !stop_.load(); }

private:
  void loop();
  // Slots whose holders differ between the placement of the last complete pass and `now`, and
  // of which this process is the first holder now.
  std::vector<SlotId> candidates(const View &view, const Placement &now);
  // Brings the copies of `id` in line under the current placement: the newest complete value
  // (rolled forward from a committed transaction if need be) on every holder; a key without
  // one is marked lost. Returns the version the copies now have.
  std::uint64_t repair_slot(const SlotId &id);
  // Repairs the decision record of `committer` and says whether transaction `tx` committed.
  bool tx_committed(int committer, std::uint64_t tx);
  // Every copy of `id` is gone: marks the copies under `locks` lost and tells every process.
  void mark_lost(const SlotId &id, const std::vector<Lock> &locks);

  Core &c_;
  LockClient &locks_;
  Agent agent_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::set<SlotId> requested_;
  bool view_dirty_ = false;
  std::atomic<bool> stop_{false};
  // The agent's stop flag: set by stop(), and by new work while the thread waits in a lock queue.
  std::atomic<bool> interrupt_{false};
  bool queueing_ = false;                     // in a queued lock wait (enter .. leave)
  std::size_t others_ = 0;                    // slots of the current pass besides the one being repaired
  std::shared_ptr<const Placement> repaired_; // placement the last complete pass repaired for
  int repaired_failures_ = 0;
  std::atomic<std::uint64_t> backlog_{0}, repaired_slots_{0}, repaired_bytes_{0};
};

} // namespace rmastore::internal
