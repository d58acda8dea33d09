// The store core: ties placement, slots, the RMA transport and the helper thread together.
//
// Roles of a process:
//   holder - keeps copies in slots of its window memory (the slot table), and through its helper
//            thread hands out slot addresses: a write grant to one writer per slot, read grants
//            to any number of readers. A slot that must grow moves; before the reply, every
//            other process that cached the old address is told to forget it and has answered.
//   client - caches the addresses it was granted. A put whose value fits the granted slots is
//            purely one-sided: one MPI_Rput per remote copy, no message.
//
// Processes have a stable id (their rank in the communicator the store was created on), which
// placement uses, and a current rank in the store's communicator, which changes when
// store_recover shrinks it.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "doorbell.hpp"
#include "failure.hpp"
#include "helper.hpp"
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
};

// Largest capacity_hint accepted: it sizes address space, and 1 TiB is far beyond any node.
inline constexpr std::size_t kMaxCapacityHint = std::size_t{1} << 40;

// A slot is named by a key and a namespace: the application's values, and internal records.
struct SlotId {
  std::uint64_t key;
  Ns ns;
  bool operator==(const SlotId &) const = default;
};
struct SlotIdHash {
  std::size_t operator()(const SlotId &s) const { return mix64(s.key ^ (std::uint64_t(s.ns) << 56)); }
};

class Store final : private WaitContext {
public:
  // Collective over comm. Throws StoreError with the status every process agreed on.
  static std::unique_ptr<Store> create(MPI_Comm comm, const Config &config);
  ~Store() override;
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
  void info(store_info_t &out) const;
  void last_recovery(store_recovery_t &out) const;

  // For tests: reads this process's own copy straight from its memory, with no MPI call.
  bool read_local_copy(std::uint64_t key, SlotHeader &header, std::vector<std::byte> &value) const;
  // For tests: the holder whose copy the last successful get returned (current rank).
  int last_read_holder() const { return last_read_holder_; }
  // For tests: current ranks of the holders of `key`, best first.
  std::vector<int> holders(std::uint64_t key) const { return holders_of(SlotId{key, Ns::kValue}); }
  const Placement &placement() const { return *placement_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  int stable_id() const { return id_; }

private:
  Store(MPI_Comm comm, const Config &config);

  // ---- WaitContext: what waits need to know ----
  bool dead(int rank) const override { return detecting() && failures_->dead(rank); }
  bool revoked() const override { return detecting() && failures_->revoked(); }
  void abandon(MPI_Request r) override { abandoned_.push_back(r); }
  void check() const override;
  Doorbells *bells() const override { return bells_.get(); }
  bool detecting() const { return config_.detector != STORE_DETECTOR_OFF; }
  // Throws STORE_ERR_PROC_FAILED if a failure is known: the store needs store_recover.
  void require_healthy() const;

  // Communicators, window, doorbells, helper for the current set of processes. The helper
  // thread starts separately: during re-replication it would only compete with the collectives
  // for MPI's progress engine (measured: a 20 MiB alltoallv took 400 ms instead of 20 ms).
  void build_runtime();
  void start_helper();
  void stop_runtime();
  std::vector<int> holders_of(const SlotId &id) const;

  // ---- holder side (slot table), guarded by table_mutex_ ----
  struct Deferred {
    CtrlMsg msg;
    int source;
  };
  struct HeldSlot {
    SlotAllocator::Block block;
    int writer = -1;    // current rank of the write grant's holder
    int writer_id = -1; // its stable id: recovery must know whether it failed
    std::vector<int> readers;
    std::uint64_t last_grant = 0;
    // A grant that waits for invalidation acks: its reply, the old block to free, and requests
    // for the same slot that arrived meanwhile.
    int pending_acks = 0;
    std::optional<Deferred> stashed_reply;
    SlotAllocator::Block retired;
    std::deque<Deferred> queued;
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
    std::vector<HolderCache> holders;
    std::uint64_t version = 0;
  };
  KeyState &key_state_locked(const SlotId &id);
  void on_invalidate(const CtrlMsg &msg, int source);
  void on_register(const CtrlMsg &msg, int source);

  // Sends `msg` to each listed holder (served inline for this process when possible) and
  // installs the replies into the cache. Returns the replies in the order of `holders`.
  std::vector<CtrlMsg> request(const SlotId &id, const std::vector<int> &holders, const CtrlMsg &msg);
  void install_reply(const SlotId &id, int holder, const CtrlMsg &reply, bool write);
  // Tells every process that `key` exists, so that a later recovery can report it lost. Sends
  // nothing if this process knows the key already.
  void register_key(std::uint64_t key);
  // Makes sure we hold write grants big enough for `len` at every holder of `id`.
  std::vector<HolderCache> acquire_write(const SlotId &id, std::size_t len, std::uint64_t *version);
  // Writes `h` (version, length, flags filled in) and the value to every copy in `hcs`.
  void write_copies(const std::vector<HolderCache> &hcs, SlotHeader h, const void *buf);
  void ping(const std::vector<HolderCache> &hcs);

  enum class ReadResult { kOk, kNotFound, kLost, kTruncated, kRetry, kStale };
  ReadResult read_local(const SlotId &id, void *buf, std::size_t capacity, std::size_t *len);
  ReadResult read_remote(const SlotId &id, const HolderCache &hc, void *buf, std::size_t capacity, std::size_t *len);

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

  // ---- recovery (recovery.cpp) ----
  void shrink_and_agree(double *seconds);
  void rebuild_window(double *seconds);
  void rereplicate(double *seconds);
  void reset_grants();

  MPI_Comm comm_ = MPI_COMM_NULL; // collectives of the store
  MPI_Comm ctrl_ = MPI_COMM_NULL; // control messages
  int rank_ = 0;
  int size_ = 0;
  int id_ = 0;                  // stable id of this process
  std::vector<int> ids_;        // current rank -> stable id
  std::vector<int> rank_of_id_; // stable id -> current rank, -1 once failed
  Config config_;
  std::unique_ptr<Placement> placement_;
  std::unique_ptr<RmaWindow> window_;
  std::unique_ptr<Doorbells> bells_;
  std::unique_ptr<FailureState> failures_;
  std::unique_ptr<Helper> helper_;
  std::uint32_t epoch_ = 0; // number of completed recoveries
  std::vector<MPI_Request> abandoned_;

  mutable std::mutex table_mutex_;
  std::unique_ptr<SlotAllocator> allocator_;
  Table table_;
  std::uint64_t enlargements_served_ = 0;
  // Slots a failed process could still write into (its data may be in flight): never reused.
  std::vector<SlotAllocator::Block> quarantined_;

  std::mutex cache_mutex_;
  std::unordered_map<SlotId, KeyState, SlotIdHash> cache_;

  mutable std::mutex known_mutex_;
  std::unordered_set<std::uint64_t> known_keys_; // every key ever put, on every process

  // Application thread only.
  std::uint64_t next_request_ = 1;
  std::uint64_t requests_sent_ = 0;
  std::vector<std::byte> staging_;
  bool finalized_ = false;
  int last_read_holder_ = -1;
  int recover_attempts_ = 0;
  store_mode_t mode_ = STORE_MODE_NORMAL;
  bool tx_open_ = false;
  std::uint64_t tx_seq_ = 0; // transactions committed (or attempted) by this process
  std::map<std::uint64_t, std::vector<std::byte>> tx_values_;
  store_recovery_t last_recovery_{};
  std::vector<store_key_t> lost_keys_;
};

} // namespace rmastore::internal
