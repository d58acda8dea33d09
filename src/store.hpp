// The store core: ties placement, slots, the RMA transport and the helper thread together.
//
// Roles of a process:
//   holder - keeps copies in slots of its window memory (SlotTable), and through its helper
//            thread hands out slot addresses: a write grant to one writer per key, read grants
//            to any number of readers. A slot that must grow moves; before the reply, every
//            other process that cached the old address is told to forget it and has answered.
//   client - caches the addresses it was granted (ClientCache). A put whose value fits the
//            granted slots is purely one-sided: one MPI_Rput per remote copy, no message.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "doorbell.hpp"
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
};

// Largest capacity_hint accepted: it sizes address space, and 1 TiB is far beyond any node.
inline constexpr std::size_t kMaxCapacityHint = std::size_t{1} << 40;

// Values up to this size travel in one put together with their header (copied into a staging
// buffer); larger ones are put straight from the caller's buffer, header separately.
inline constexpr std::size_t kStagingLimit = 16 * 1024;

class Store {
public:
  // Collective over comm. Throws StoreError with the status every process agreed on.
  static std::unique_ptr<Store> create(MPI_Comm comm, const Config &config);
  ~Store();
  Store(const Store &) = delete;
  Store &operator=(const Store &) = delete;

  void put(std::uint64_t key, const void *buf, std::size_t len);
  // Returns STORE_OK, STORE_ERR_NOT_FOUND or STORE_ERR_TRUNCATED (with *len = needed length).
  store_status_t get(std::uint64_t key, void *buf, std::size_t capacity, std::size_t *len);
  // Collective.
  void finalize();
  void info(store_info_t &out) const;

  // For tests: reads this process's own copy straight from its memory, with no MPI call.
  bool read_local_copy(std::uint64_t key, SlotHeader &header, std::vector<std::byte> &value) const;
  // For tests: the holder whose copy the last successful get returned.
  int last_read_holder() const { return last_read_holder_; }
  const Placement &placement() const { return *placement_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

private:
  Store(MPI_Comm comm, const Config &config);

  // ---- holder side (SlotTable), guarded by table_mutex_ ----
  struct Deferred {
    CtrlMsg msg;
    int source;
  };
  struct HeldSlot {
    SlotAllocator::Block block;
    int writer = -1;
    std::vector<int> readers;
    std::uint64_t last_grant = 0;
    // A grant that waits for invalidation acks: its reply, the old block to free, and requests
    // for the same key that arrived meanwhile.
    int pending_acks = 0;
    std::optional<Deferred> stashed_reply;
    SlotAllocator::Block retired;
    std::deque<Deferred> queued;
  };
  // Serves kAcquireWrite / kLookup. `inline_call`: the application thread asks its own table;
  // then nothing is changed and nullopt returned if the answer needs other processes.
  std::optional<CtrlMsg> serve(const CtrlMsg &msg, int source, bool inline_call);
  // Grants, or sends the invalidations the grant must wait for and returns nullopt.
  std::optional<CtrlMsg> grant_or_defer_locked(HeldSlot &slot, const CtrlMsg &msg, int source);
  CtrlMsg grant_locked(HeldSlot &slot, const CtrlMsg &msg, int source, std::vector<int> &invalidate);
  void on_helper_message(const CtrlMsg &msg, int source);
  void on_invalidate_ack(const CtrlMsg &msg);
  void dispatch_queued_locked(HeldSlot &slot);

  // ---- client side (ClientCache), guarded by cache_mutex_ ----
  struct HolderCache {
    int holder = -1;
    std::uint64_t address = 0;
    std::uint64_t capacity = 0;
    std::uint64_t grant = 0;
    std::uint64_t floor = 0; // grants up to here were invalidated
    std::uint64_t length_hint = 0;
    bool can_write = false;
    bool can_read = false;
  };
  struct KeyState {
    std::vector<HolderCache> holders;
    std::uint64_t version = 0;
  };
  KeyState &key_state_locked(std::uint64_t key);
  void on_invalidate(const CtrlMsg &msg, int source);

  // Sends `msg` to each listed holder (served inline for this process when possible) and
  // installs the replies into the cache. Returns the replies in the order of `holders`.
  std::vector<CtrlMsg> request(std::uint64_t key, const std::vector<int> &holders, const CtrlMsg &msg);
  void install_reply(std::uint64_t key, int holder, const CtrlMsg &reply, bool write);
  // Waits for every request in `rs`, ringing slow targets; throws if they cannot complete.
  void wait(RequestSet &rs);

  enum class ReadResult { kOk, kNotFound, kTruncated, kRetry, kStale };
  ReadResult read_local(std::uint64_t key, void *buf, std::size_t capacity, std::size_t *len);
  ReadResult read_remote(std::uint64_t key, const HolderCache &hc, void *buf, std::size_t capacity, std::size_t *len);

  MPI_Comm comm_ = MPI_COMM_NULL; // collectives of the store
  MPI_Comm ctrl_ = MPI_COMM_NULL; // control messages
  int rank_ = 0;
  int size_ = 0;
  Config config_;
  std::unique_ptr<Placement> placement_;
  std::unique_ptr<RmaWindow> window_;
  std::unique_ptr<Doorbells> bells_;
  std::unique_ptr<Helper> helper_;
  std::uint32_t epoch_ = 0;

  mutable std::mutex table_mutex_;
  std::unique_ptr<SlotAllocator> allocator_;
  std::unordered_map<std::uint64_t, HeldSlot> table_;
  std::uint64_t enlargements_served_ = 0;

  std::mutex cache_mutex_;
  std::unordered_map<std::uint64_t, KeyState> cache_;

  // Application thread only.
  std::uint64_t next_request_ = 1;
  std::uint64_t requests_sent_ = 0;
  std::vector<std::byte> staging_;
  bool finalized_ = false;
  int last_read_holder_ = -1;
};

} // namespace rmastore::internal
