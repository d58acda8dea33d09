// The recovery variant (store_config_t::recovery, docs/design.md), chosen once at store_init:
//   global    (global.hpp)    - write grants cached by one writer per slot; a failure stops
//                               everybody until all survivors call store_recover.
//   localized (localized.hpp) - slot locks and background repairs; nobody has to stop.
// Store calls the operations below after the checks both variants share (a store_recover left
// unfinished, a revoked communicator, an open transaction).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "common/protocol.hpp"
#include "rmastore/store.h"

namespace rmastore::internal {

// What a transaction does to one key: put `bytes`, or delete it.
struct TxOp {
  bool del = false;
  std::vector<std::byte> bytes;
};
using TxValues = std::map<std::uint64_t, TxOp>;

// store_put_many and store_get_many: one key each, distinct keys.
struct PutItem {
  std::uint64_t key;
  const void *buf;
  std::size_t len;
};
struct GetItem {
  std::uint64_t key;
  void *buf;
  std::size_t capacity;
  std::size_t len = 0;
  store_status_t status = STORE_OK; // as store_get's
};
// How many keys a batch works on at once: it bounds the requests in flight, the staging memory
// (up to 16 KiB per value) and the messages queued at one holder.
inline constexpr std::size_t kBatchKeys = 512;

class Variant {
public:
  virtual ~Variant() = default;

  // Starts what runs beside the helper thread, before the helper starts; returns what the
  // helper runs each time it recorded new failures (may be empty).
  virtual std::function<void()> start() = 0;
  // Stops it, before the helper stops.
  virtual void stop() = 0;
  // The helper has stopped too: nothing hands the variant's threads work any more.
  virtual void after_helper_stopped() = 0;
  // Throws STORE_ERR_PROC_FAILED when the store must be recovered before it can be used.
  virtual void check_usable() const = 0;

  // Returns once every copy is in its holder's memory. Global (global.cpp): Engine::request of
  // kAcquireWrite to the holders without a fitting grant in the cache (the first time, when the
  // value outgrew its slot, or after another writer took the grant), repeated until
  // the cache holds every grant; Engine::write_copies at the next version; Engine::record
  // (kWitness) if some holder had no complete value (needs_record). Localized (localized.cpp):
  // LockClient::acquire at the holders, write_copies, record if owed, LockClient::release.
  virtual void put(std::uint64_t key, const void *buf, std::size_t len) = 0;
  // store_delete: every copy goes (a tombstone first, then the slots), and the key's records.
  virtual void del(std::uint64_t key) = 0;
  // STORE_OK, STORE_ERR_NOT_FOUND, STORE_ERR_DATA_LOST or STORE_ERR_TRUNCATED.
  virtual store_status_t get(std::uint64_t key, void *buf, std::size_t capacity, std::size_t *len) = 0;
  // put and get of many keys, their round trips overlapped (at most kBatchKeys at a time).
  virtual void put_many(const std::vector<PutItem> &items) = 0;
  virtual void get_many(std::vector<GetItem> &items) = 0;
  // store_list, asked of every process this variant counts alive.
  virtual std::vector<std::uint64_t> list(std::uint64_t first, std::uint64_t last, std::size_t limit, bool *more) = 0;
  virtual void commit(const TxValues &values) = 0;
  // Gives back every lock kept after an operation (localized: cached slot locks). Application
  // thread, between operations.
  virtual void give_back_locks() {}
  // A helper message only this variant sends (kRepairNeeded, kLost, kRevoke), from `source`.
  // Helper thread.
  virtual void on_message(const CtrlMsg &msg, int source) = 0;

  virtual store_mode_t mode() const = 0;
  // Collective in the global variant; `tx_open`: this process has a transaction open.
  virtual void back_to_normal(bool tx_open) = 0;
  // store_finalize's barrier. Returns whether any process knew of a failure.
  virtual bool finalize_barrier() = 0;
  // store_recover, before the shrink (the runtime still runs), and after success.
  virtual void before_recover() = 0;
  virtual void after_recover() = 0;
  // store_last_recovery's lost keys: those of the last recovery (`recovered`), and whatever
  // else the variant found lost since. The array stays valid until the next call.
  virtual const store_key_t *lost_keys(const std::vector<store_key_t> &recovered, std::size_t *count) const = 0;
  virtual void stats(store_info_t &out) const = 0;
  // Current ranks of the holders of `key`, once placement accounts for the failures known.
  virtual std::vector<int> holders(std::uint64_t key) = 0;
  // The holder whose copy the last successful get of the application returned.
  int last_read_holder() const { return last_read_holder_; }

protected:
  int last_read_holder_ = -1;
};

} // namespace rmastore::internal
