// The store core: ties placement, slots, the RMA transport and the helper thread together.
//
// Roles of a process:
//   holder - keeps copies in slots of its window memory (the slot table), and through its helper
//            thread hands out slot addresses.
//   client - an "agent" (the application thread; in the localized variant also the repair
//            thread) that writes and reads copies with one-sided RMA.
//
// Two variants (store_config_t::recovery, docs/design.md):
//   global    - the holder gives a write grant to one writer per slot, which the writer caches:
//               a repeat put is purely one-sided. Writers of one key must not overlap. A failure
//               stops everybody until all survivors call store_recover.
//   localized - every put takes the lock of each copy's slot, a word in the slot header that the
//               holder's threads set with atomic operations on the requester's behalf. Locks of
//               failed processes are broken by repairs, which the repair thread of each process
//               runs in the background; nobody has to stop.
//
// Processes have a stable id (their rank in the communicator the store was created on), which
// placement uses, and a current rank in the store's communicator, which changes when
// store_recover shrinks it.
#pragma once

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "doorbell.hpp"
#include "errors.hpp"
#include "failure.hpp"
#include "helper.hpp"
#include "known_keys.hpp"
#include "placement.hpp"
#include "protocol.hpp"
#include "rma.hpp"
#include "rmastore/store.h"
#include "slot.hpp"

namespace rmastore::internal {

struct Config {
  int replicas = 2;
  std::size_t initial_slot_size = 64;
  std::size_t capacity_hint = std::size_t{1} << 20;
  int node_id = -1;
  int helper_max_sleep_us = 1000;
  int detector = STORE_DETECTOR_NOTIFY;
  int recovery = STORE_RECOVERY_GLOBAL;
};

// Largest capacity_hint accepted: it sizes address space, and 1 TiB is far beyond any node.
inline constexpr std::size_t kMaxCapacityHint = std::size_t{1} << 40;

// A slot is named by a key and a namespace: the application's values, and internal records.
struct SlotId {
  std::uint64_t key;
  Ns ns;
  bool operator==(const SlotId &) const = default;
  bool operator<(const SlotId &o) const { return key != o.key ? key < o.key : ns < o.ns; }
};
struct SlotIdHash {
  std::size_t operator()(const SlotId &s) const { return mix64(s.key ^ (std::uint64_t(s.ns) << 56)); }
};

// A kReply to `msg` that describes the copy in `block`: where it is and what its header (read
// into `h`) says.
CtrlMsg copy_reply(const CtrlMsg &msg, const SlotAllocator::Block &block, SlotHeader &h);

class Store final {
public:
  // Collective over comm. Throws StoreError with the status every process agreed on.
  // `local_error` is a failure this process found before the call (the caller's set-up): it
  // fails creation on every process like an invalid argument does.
  static std::unique_ptr<Store> create(MPI_Comm comm, const Config &config, store_status_t local_error = STORE_OK);
  ~Store();
  Store(const Store &) = delete;
  Store &operator=(const Store &) = delete;

  void put(std::uint64_t key, const void *buf, std::size_t len);
  // Returns STORE_OK, STORE_ERR_NOT_FOUND, STORE_ERR_DATA_LOST or STORE_ERR_TRUNCATED (with
  // *len = needed length).
  store_status_t get(std::uint64_t key, void *buf, std::size_t capacity, std::size_t *len);
  // Collective over the survivors. Returns STORE_OK or STORE_ERR_RECOVER_AGAIN.
  store_status_t recover(MPI_Comm *new_comm);
  // Transactions and modes (tx.cpp).
  void tx_begin();
  void tx_commit();
  void tx_abort();
  store_mode_t mode() const { return mode_; }
  void back_to_normal(); // collective
  // Collective.
  void finalize();
  // Local, with no collective call: stops the helper and repair threads, so that no thread of
  // the store calls MPI after MPI_Finalize. Called at the start of MPI_Finalize (capi.cpp);
  // the store is unusable afterwards, and whatever MPI holds for it is freed by MPI_Finalize.
  void stop_for_mpi_finalize();
  void info(store_info_t &out) const;
  void last_recovery(store_recovery_t &out) const;

  // For tests: reads this process's own copy straight from its memory, with no MPI call.
  bool read_local_copy(std::uint64_t key, SlotHeader &header, std::vector<std::byte> &value) const;
  // For tests: the holder whose copy the last successful get returned (current rank).
  int last_read_holder() const { return last_read_holder_; }
  // For tests: current ranks of the holders of `key`, best first (failed processes left out).
  std::vector<int> holders(std::uint64_t key) const { return holders_of(SlotId{key, Ns::kValue}); }
  // store_key_holders (store_hooks.h): holders() once placement accounts for the failures this
  // process knows of (localized variant; the global variant's placement changes only in
  // store_recover).
  std::vector<int> current_holders(std::uint64_t key) {
    if (localized()) update_view();
    return holders(key);
  }
  // The current placement (localized variant: it changes when failures become known).
  std::shared_ptr<const Placement> placement() const;
  int rank() const { return rank_; }
  int size() const { return size_; }
  int stable_id() const { return id_; }
  bool localized() const { return config_.recovery == STORE_RECOVERY_LOCALIZED; }

private:
  Store(MPI_Comm comm, const Config &config);
  class Repairer;

  // A client thread's state: its reply tag, request numbers, staging buffer, and the messages
  // it sent without waiting for them. Also what its waits need to know about the others.
  class Agent final : public WaitContext {
  public:
    Agent(Store &store, int kind);
    bool dead(int rank) const override;
    bool revoked() const override;
    void abandon(MPI_Request r) override { abandoned_rma.push_back(r); }
    void check() const override;
    Doorbells *bells() const override { return store.bells_.get(); }
    // Sends `msg` to `dest`'s helper without waiting; completed by later calls of flush().
    void post(int dest, const CtrlMsg &msg);
    // Completes what post() sent, without waiting: sends to failed processes are dropped.
    void flush();
    // Waits (bounded by failure detection) until everything post() sent has completed.
    void drain();
    std::uint64_t lock_word() const;

    Store &store;
    int kind;      // 0: application thread, 1: repair thread
    int reply_tag; // tag of the replies it receives
    std::uint64_t next_request = 1;
    std::uint64_t requests_sent = 0;
    std::vector<std::byte> staging;
    std::vector<MPI_Request> abandoned_rma; // RMA to failed processes: Open MPI cannot free it
    // While >= 0, waits on messages give up when the failure count differs from it (a lock
    // wait must start over when placement changed: see acquire_locks).
    int lock_view = -1;
    const std::atomic<bool> *stop = nullptr; // repair thread: set when it must give up

  private:
    struct Outgoing {
      CtrlMsg msg;
      MPI_Request request = MPI_REQUEST_NULL;
      int dest = -1;
    };
    std::list<Outgoing> outbox_;          // a list: entries keep their address while MPI sends them
    std::list<Outgoing> abandoned_sends_; // to failed processes: MPI may still hold the buffer
  };

  bool detecting() const { return config_.detector != STORE_DETECTOR_OFF; }
  // Global variant: throws STORE_ERR_PROC_FAILED if a failure is known (the store needs
  // store_recover). Both variants: throws it once another process started store_recover.
  void require_healthy() const;
  void check_helper() const;

  // Communicators, window, doorbells, helper for the current set of processes. The helper
  // thread starts separately: during re-replication it would only compete with the collectives
  // for MPI's progress engine (measured: a 20 MiB alltoallv took 400 ms instead of 20 ms).
  void build_runtime();
  void start_helper();
  void stop_runtime();
  std::vector<int> holders_of(const SlotId &id) const;
  std::vector<int> holders_of(const SlotId &id, const Placement &p) const;
  // The holders of the key's copies, cheapest to read first: this process, then its node, then
  // placement order. Worked out when the key's cache entry is made, not on every get.
  std::vector<int> read_order(const SlotId &id);
  // Localized variant: takes failures the helper recorded into placement. Returns the number
  // of failures placement now accounts for.
  int update_view();
  // Localized variant: decides whether an operation that failed with `e` starts over. It does
  // when a process failed: the failure set and placement are first brought up to what MPI
  // knows (the helper's notice may lag behind the error the operation saw), with a short wait
  // while nothing new is known. Not for other errors, after a revocation, or after 30 s without
  // news. One object per operation: it carries the failure count and deadline between attempts.
  class Retry {
  public:
    explicit Retry(Store &s) : s_(s), seen_(s.failures_ ? s.failures_->failures() : 0) {}
    bool after(const StoreError &e);

  private:
    Store &s_;
    int seen_;
    std::int64_t deadline_ = 0;
  };

  // ---- holder side (slot table), guarded by table_mutex_ ----
  struct Deferred {
    CtrlMsg msg;
    int source;
  };
  struct HeldSlot {
    SlotAllocator::Block block;
    int writer = -1;    // global: current rank of the write grant's holder
    int writer_id = -1; // its stable id: recovery must know whether it failed
    std::vector<int> readers;
    std::uint64_t last_grant = 0;
    // A grant that waits for invalidation acks: its reply, the old block to free, and requests
    // for the same slot that arrived meanwhile.
    int pending_acks = 0;
    std::optional<Deferred> stashed_reply;
    SlotAllocator::Block retired;
    std::deque<Deferred> queued; // global: requests waiting for acks; localized: lock waiters
  };
  using Table = std::unordered_map<SlotId, HeldSlot, SlotIdHash>;
  // Serves kAcquireWrite / kLookup. `inline_call`: the application thread asks its own table;
  // then nothing is changed and nullopt returned if the answer needs other processes.
  std::optional<CtrlMsg> serve(const CtrlMsg &msg, int source, bool inline_call);
  // Grants, or sends the invalidations the grant must wait for and returns nullopt.
  std::optional<CtrlMsg> grant_or_defer_locked(HeldSlot &slot, const CtrlMsg &msg, int source);
  CtrlMsg grant_locked(HeldSlot &slot, const CtrlMsg &msg, int source, std::vector<int> &invalidate);
  void on_helper_message(const CtrlMsg &msg, int source);
  void on_invalidate_ack(const CtrlMsg &msg);
  void dispatch_queued_locked(HeldSlot &slot);
  // Moves `slot` to a block of at least `need` bytes, keeping its value; the old block is
  // retired. Throws std::bad_alloc or StoreError when memory runs out.
  void grow_locked(const SlotId &id, HeldSlot &slot, std::size_t need);
  // A failed process may still have a put in flight into `block`: the block is retired (marked,
  // and kept out of the allocator for good); the slot continues in a fresh block of at least
  // `need` bytes, with the same contents and lock word.
  void quarantine_locked(const SlotId &id, SlotAllocator::Block &block, std::size_t need);

  // ---- client side (address cache), guarded by cache_mutex_ ----
  struct HolderCache {
    int holder = -1;
    std::uint64_t address = 0;
    std::uint64_t capacity = 0;
    std::uint64_t grant = 0;
    std::uint64_t floor = 0; // grants up to here were invalidated
    std::uint64_t length_hint = 0;
    bool can_write = false;
    bool can_read = false;
    bool half_b = false; // the copy's value is in the second half
  };
  struct KeyState {
    std::vector<HolderCache> holders; // in placement order
    std::vector<int> read_order;      // the same holders, cheapest to read first (read_order())
    std::uint64_t version = 0;
    int view = 0; // failures placement accounted for when `holders` was made
  };
  KeyState &key_state_locked(const SlotId &id);
  void on_invalidate(const CtrlMsg &msg, int source);
  void on_register(const CtrlMsg &msg, int source);

  // Sends each message to its holder's helper (served inline for this process when possible)
  // and waits for all replies, which it returns in order. Replies to earlier requests of the
  // agent, which it stopped waiting for, are skipped.
  struct Ask {
    SlotId id;
    int holder; // current rank
    CtrlMsg msg;
  };
  std::vector<CtrlMsg> ask_all(Agent &a, const std::vector<Ask> &asks);
  // ask_all of one message to each listed holder, installing grants and lookups into the cache.
  std::vector<CtrlMsg> request(Agent &a, const SlotId &id, const std::vector<int> &holders, const CtrlMsg &msg);
  void install_reply(const SlotId &id, int holder, const CtrlMsg &reply, bool write);
  // Tells every process that `key` exists, so that a later recovery can report it lost. Sends
  // nothing if this process knows the key already.
  void register_key(Agent &a, std::uint64_t key);
  // Global variant: makes sure we hold write grants big enough for `len` at every holder.
  std::vector<HolderCache> acquire_write(Agent &a, const SlotId &id, std::size_t len, std::uint64_t *version);
  // Writes `h` (version, length, flags filled in) and the value to every copy in `hcs`; the
  // header's epoch and writer are set unless `keep_writer`. `tolerant` (localized): copies on
  // processes that fail meanwhile are skipped; returns the copies written. Otherwise a failure
  // throws STORE_ERR_PROC_FAILED.
  std::vector<HolderCache> write_copies(Agent &a, const std::vector<HolderCache> &hcs, SlotHeader h, const void *buf,
                                        bool tolerant = false, bool keep_writer = false);
  void ping(Agent &a, const std::vector<HolderCache> &hcs);

  enum class ReadResult { kOk, kNotFound, kLost, kTruncated, kRetry, kStale };
  ReadResult read_local(const SlotId &id, void *buf, std::size_t capacity, std::size_t *len);
  ReadResult read_remote(Agent &a, const SlotId &id, const HolderCache &hc, void *buf, std::size_t capacity,
                         std::size_t *len);
  // Reads the copy at `holder` (looking its address up when not cached).
  ReadResult read_copy(Agent &a, const SlotId &id, int holder, void *buf, std::size_t capacity, std::size_t *len);
  store_status_t get_localized(std::uint64_t key, void *buf, std::size_t capacity, std::size_t *len);

  // ---- localized variant: slot locks (locks.cpp) ----
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
  };
  // Holder side: serves kLock, kUnlock (helper thread, or the agent inline for its own slots).
  std::optional<CtrlMsg> serve_lock(const CtrlMsg &msg, int source, bool inline_call);
  CtrlMsg grant_lock_locked(const SlotId &id, HeldSlot &slot, const CtrlMsg &msg);
  CtrlMsg break_lock_locked(const SlotId &id, HeldSlot &slot, const CtrlMsg &msg);
  // Inline: returns false unless it released a lock nobody waits for; the agent then sends the
  // unlock to its helper, behind any lock request still on its way there.
  bool serve_unlock(const CtrlMsg &msg, int source, bool inline_call);
  void grant_next_locked(const SlotId &id, HeldSlot &slot);
  // Helper thread, after it recorded new failures: drops their queued lock requests and asks
  // for the repair of every slot whose lock a failed process holds.
  void on_failures();
  bool owner_dead(std::uint64_t owner) const;
  // Client side: takes every lock in `reqs`, which must be sorted by the global lock order
  // (namespace, key, then placement order). Throws STORE_ERR_PROC_FAILED when a holder failed or
  // placement changed meanwhile: nothing is held then, and the caller starts over.
  std::vector<Lock> acquire_locks(Agent &a, const std::vector<LockRequest> &reqs);
  // Releases what acquire_locks returned (nothing waits).
  void release_locks(Agent &a, const std::vector<Lock> &locks, std::uint32_t flags = 0);
  void send_unlock(Agent &a, const LockRequest &req, std::uint64_t owner, std::uint32_t flags = 0);
  static HolderCache as_copy(const Lock &l);
  static HolderCache as_pending_copy(const Lock &l);
  // A kLock request of `a` for a slot of >= `length` bytes.
  static CtrlMsg lock_msg(std::uint64_t owner, std::size_t length, std::uint32_t flags);
  // The newest complete version a lock's grant shows, value or pending (kNoVersion if none).
  static std::uint64_t newest_version(const Lock &l);
  // The lock requests for the copies of `id` under the current placement.
  std::vector<LockRequest> lock_requests(const SlotId &id, std::size_t length, std::uint32_t flags) const;
  void put_localized(std::uint64_t key, const void *buf, std::size_t len);

  // ---- localized variant: background repair (repair.cpp) ----
  // Brings the copies of `id` in line under the current placement: the newest complete value
  // (rolled forward from a committed transaction if need be) on every holder; a key without
  // one is marked lost. Returns the version the copies now have.
  std::uint64_t repair_slot(Agent &a, const SlotId &id);
  // Repairs the decision record of `committer` and says whether transaction `tx` committed.
  bool tx_committed(Agent &a, int committer, std::uint64_t tx);
  void on_repair_needed(const CtrlMsg &msg);
  void on_lost(const CtrlMsg &msg);

  // ---- transactions (tx.cpp) ----
  // The transaction a process committed last is recorded in its decision record: a slot of
  // namespace kTxRecord named by the process's stable id, whose version is the transaction's
  // sequence number. A record that exists is a commit.
  struct TxItem {
    std::uint64_t key;
    const std::vector<std::byte> *value;
    std::uint64_t version; // the value's version once committed
    std::vector<HolderCache> value_copies, pending_copies;
  };
  void tx_commit_localized(const std::map<std::uint64_t, std::vector<std::byte>> &values);
  void write_commit(std::uint64_t seq, const std::vector<TxItem> &items, const SlotId &rid,
                    const std::vector<HolderCache> &record_copies, const std::vector<std::uint64_t> &record,
                    bool tolerant);
  static std::vector<std::uint64_t> decision_record(std::uint64_t seq,
                                                    const std::map<std::uint64_t, std::vector<std::byte>> &values);

  // ---- recovery (recovery.cpp) ----
  // Returns whether every survivor may keep its window: no process failed since it was made.
  bool shrink_and_agree(double *seconds, int members);
  void rebuild_window(double *seconds, bool keep_window);
  // Fills the report's re-replication fields and the sorted keys lost, on every survivor alike.
  void rereplicate(double *seconds, store_recovery_t &report, std::vector<store_key_t> &all_lost);
  void reset_grants();

  MPI_Comm comm_ = MPI_COMM_NULL; // collectives of the store
  MPI_Comm ctrl_ = MPI_COMM_NULL; // control messages
  int rank_ = 0;
  int size_ = 0;
  int id_ = 0;                  // stable id of this process
  std::vector<int> ids_;        // current rank -> stable id
  std::vector<int> rank_of_id_; // stable id -> current rank, -1 once failed
  Config config_;
  // Guarded by view_mutex_ in the localized variant, where any thread may update it; readers
  // take a reference under the mutex and keep the shared_ptr while they use it.
  std::shared_ptr<Placement> placement_;
  mutable std::mutex view_mutex_;
  std::atomic<int> view_failures_{0}; // failures placement accounts for; written under view_mutex_
  std::unique_ptr<RmaWindow> window_;
  std::unique_ptr<Doorbells> bells_;
  std::unique_ptr<FailureState> failures_;
  std::unique_ptr<Helper> helper_;
  std::unique_ptr<Repairer> repairer_;
  std::uint32_t epoch_ = 0; // number of completed recoveries
  // A store_recover began and has not yet returned STORE_OK: the runtime may be half rebuilt.
  bool recover_pending_ = false;

  mutable std::mutex table_mutex_;
  std::unique_ptr<SlotAllocator> allocator_;
  Table table_;
  std::atomic<std::uint64_t> enlargements_served_{0};
  // Slots a failed process could still write into (its data may be in flight): never reused.
  std::vector<SlotAllocator::Block> quarantined_;

  std::mutex cache_mutex_;
  std::unordered_map<SlotId, KeyState, SlotIdHash> cache_;

  KnownKeys known_;

  // Application thread only.
  std::unique_ptr<Agent> app_;
  bool finalized_ = false;
  int last_read_holder_ = -1;
  int recover_attempts_ = 0;          // store_recover calls since the last that returned STORE_OK
  std::int64_t first_attempt_ns_ = 0; // when the first of them began
  int members_ = 0;                   // processes after store_init or the last successful recovery
  store_mode_t mode_ = STORE_MODE_NORMAL;
  bool tx_open_ = false;
  std::uint64_t tx_seq_ = 0; // transactions committed (or attempted) by this process
  std::map<std::uint64_t, std::vector<std::byte>> tx_values_;
  store_recovery_t last_recovery_{};
  std::vector<store_key_t> lost_keys_;
  mutable std::vector<store_key_t> lost_report_; // localized: what last_recovery hands out
};

} // namespace rmastore::internal
