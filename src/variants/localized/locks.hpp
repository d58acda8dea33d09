// Localized variant: the client side of slot locks.
//
// Each copy's slot has a lock: the owner word of its header (slot.hpp), in window memory. Only
// the holder's threads change it, with atomic operations, on the lockers' behalf: the holder's
// helper thread serves kLock and kUnlock messages, and a process's own agents lock their local
// slots inline (holder/lock_server.hpp). MPI's atomics are not used: in Open MPI 5.0.x, MPI_Compare_and_swap
// and MPI_Fetch_and_op toward a dead process block forever, and every accumulate to a live
// process blocks forever once a process died holding that process's accumulate lock
// (docs/failures.md). A message to a helper is waited for with failure-aware polling, like every
// other wait in the store.
//
// Order: a locker takes the locks of its slots in one global order (namespace, then key, then
// placement order: a transaction's values before its decision record), so lockers never wait
// in a cycle. It first asks for all of them at once without queueing (kLockTry), which is all
// an uncontended put pays; when one is busy it gives back what it got and takes them one at a
// time, queueing at each holder. Placement changes when a process fails, and lockers that have
// not noticed yet see another order: so a wait gives up as soon as the failure count changes,
// and the locker releases everything and starts over.
//
// A lock whose owner failed stays taken until a repair (kLockRepair, repair.hpp) takes it over,
// brings the key's copies in line and releases it; lockers queued behind it get it after that.
// Taking it over moves the slot to fresh memory: a put the owner issued before it died may still
// land in the old block, which is retired and never reused.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <vector>

#include "client/core.hpp"

namespace rmastore::internal {

struct LockRequest {
  SlotId id;
  int holder;              // current rank
  std::size_t length;      // capacity the slot must have
  std::uint32_t flags = 0; // kLockRepair, kLockPending
};

struct Lock {
  LockRequest req;
  CtrlMsg grant;       // the holder's reply
  std::uint64_t owner; // the lock word it was taken with, and is released with

  Copy copy() const;
  Copy pending_copy() const;
  // The newest complete version the grant shows, value or pending (kNoVersion if none).
  std::uint64_t newest_version() const;
};

// Whether a locker may queue at a busy lock, asked before it does (the repair thread may not
// while it has other work: repair.hpp).
class QueueGate {
public:
  virtual ~QueueGate() = default;
  virtual bool enter() = 0;
  virtual void leave() = 0;
  // The queued wait was cut short by new work (not by a failure or a stop).
  virtual bool interrupted() const = 0;
};

// Thrown by LockClient::acquire when a lock is busy and the gate refused the queue, or when new
// work cut its queued wait short: the caller comes back to the slot later.
class LocksBusy final : public std::runtime_error {
public:
  LocksBusy() : std::runtime_error("a lock the repair needs is busy") {}
};

class LockClient {
public:
  explicit LockClient(Core &core) : c_(core) {}

  // The lock requests for the copies of `id` under the current placement.
  std::vector<LockRequest> requests(const SlotId &id, std::size_t length, std::uint32_t flags) const;
  // Takes every lock in `reqs`, which must be sorted by the global lock order. Throws
  // STORE_ERR_PROC_FAILED when a holder failed or placement changed meanwhile: nothing is held
  // then, and the caller starts over. `gate` (may be null) rules on queueing.
  std::vector<Lock> acquire(Agent &a, const std::vector<LockRequest> &reqs, QueueGate *gate);
  // Releases what acquire returned (nothing waits).
  void release(Agent &a, const std::vector<Lock> &locks, std::uint32_t flags = 0);
  // A kLock request for a slot of >= `length` bytes.
  static CtrlMsg lock_msg(std::uint64_t owner, std::size_t length, std::uint32_t flags);

private:
  void send_unlock(Agent &a, const LockRequest &req, std::uint64_t owner, std::uint32_t flags = 0);
  // The unlock of `req`'s lock, unless there is nothing to send: its holder died, or the lock is
  // ours and was released inline (nobody waited for it).
  std::optional<CtrlMsg> unlock_to_send(const LockRequest &req, std::uint64_t owner, std::uint32_t flags);

  Core &c_;
};

} // namespace rmastore::internal
