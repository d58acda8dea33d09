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
// Cached locks: a put or commit of the application thread keeps the locks of its remote copies
// after it returns, so that the next one on the key takes them without a message. A holder that gets a
// request for a lock held that way asks the owner for it back (kRevoke); the owner's helper
// releases it at once, or the owner when its put is done. Only the locks of in-place values
// (kInPlaceLimit) are cached, and a lock stays cached across failures while its holder lives. A
// process that fails holding cached locks leaves them to the repairs, like any other lock.
//
// A lock whose owner failed stays taken until a repair (kLockRepair, repair.hpp) takes it over,
// brings the key's copies in line and releases it; lockers queued behind it get it after that.
// Taking it over moves the slot to fresh memory: a put the owner issued before it died may still
// land in the old block, which is retired and never reused.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <unordered_map>
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
  // then, and the caller starts over. `gate` (may be null) rules on queueing. With `cache`
  // (application thread: puts, and commits, whose value slots' requests carry kLockPending)
  // locks cached by earlier operations are taken without a message if they fit, and the others
  // may be cached by keep(); without, a cached lock of the same slot is given back first.
  std::vector<Lock> acquire(Agent &a, const std::vector<LockRequest> &reqs, QueueGate *gate, bool cache = false);
  // Releases what acquire returned (nothing waits).
  void release(Agent &a, const std::vector<Lock> &locks, std::uint32_t flags = 0);
  // Instead of release, after a put or commit under `locks` (acquired with `cache`): the locks of
  // remote copies stay held, in the cache, unless a holder asked for them meanwhile or `update`
  // returns false (the copy was not written); the others are released. `update` sets a lock's
  // grant to what its holder would answer now. It runs under the cache's mutex.
  using Update = std::function<bool(const Lock &lock, CtrlMsg &grant)>;
  void keep(Agent &a, const std::vector<Lock> &locks, const Update &update);
  // The copy of `written` at `holder`, or null.
  static const Copy *written_at(const std::vector<Copy> &written, int holder);
  // A grant after `written` got version `version` of `length` bytes in the value slot.
  static void set_value(CtrlMsg &g, const Copy &written, std::uint64_t version, std::size_t length);
  // Helper thread: holder `source` asks for the lock `msg.owner` holds on msg's slot.
  void on_revoke(const CtrlMsg &msg, int source);
  // Gives every cached lock back (store_finalize, compaction). Application thread, between
  // operations.
  void drop_cached(Agent &a);
  // How many locks are cached.
  std::size_t cached() const;
  // A kLock request for a slot of >= `length` bytes.
  static CtrlMsg lock_msg(std::uint64_t owner, std::size_t length, std::uint32_t flags);

private:
  void send_unlock(Agent &a, const LockRequest &req, std::uint64_t owner, std::uint32_t flags = 0);
  // The unlock of `req`'s lock, unless there is nothing to send: its holder died, or the lock is
  // ours and was released inline (nobody waited for it).
  std::optional<CtrlMsg> unlock_to_send(const LockRequest &req, std::uint64_t owner, std::uint32_t flags);

  // One cached lock, or one that an acquisition with `cache` is taking or holds (in_use).
  struct Cached {
    Lock lock;
    bool in_use = false;  // an operation holds it: a kRevoke only marks it
    bool revoked = false; // a holder asked for it back while in use
  };
  // The slot's entry at `holder`, or null. Under mu_.
  Cached *find_locked(const SlotId &id, int holder);
  void erase_locked(const SlotId &id, int holder, std::uint64_t owner);
  // Moves every cached lock no operation uses out of the cache, into `out`.
  void take_idle_locked(std::vector<Lock> &out);
  // Takes the cache's part of an acquisition: reuses the cached locks it can (into got[i]),
  // takes the others out, to be released (into stale), and with `cache` registers the requests
  // still to be asked with `owner`.
  void from_cache(const std::vector<LockRequest> &reqs, bool cache, std::uint64_t owner,
                  std::vector<std::optional<Lock>> &got, std::vector<Lock> &stale);
  // Registers the requests for remote slots with `owner`, in use, before they go out: a
  // kRevoke that overtakes the grant then finds them.
  void enlist(const std::vector<LockRequest> &reqs, std::uint64_t owner);
  void enlist_locked(const LockRequest &r, std::uint64_t owner);

  // Beyond this many cached locks, a put gives back all of them: each is a slot that a repair
  // must break if this process fails, which moves the slot's value to fresh memory. Nor are the
  // locks of larger values cached: their lock round trip is small beside the write, and the
  // move of each would stretch the repairs after a death.
  static constexpr std::size_t kMaxCached = 1024;
  static constexpr std::size_t kMaxCachedLength = kInPlaceLimit;

  Core &c_;
  mutable std::mutex mu_;
  std::unordered_map<SlotId, std::vector<Cached>, SlotIdHash> cache_; // application thread's
  std::size_t cached_ = 0;
};

} // namespace rmastore::internal
