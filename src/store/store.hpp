// The store's façade: what the C API (capi.cpp) calls. It creates the parts of the core
// (core.hpp) and the recovery variant (variant.hpp), routes the helper thread's messages to
// them, runs the checks every operation shares, and owns the store's life: creation,
// store_recover's rebuild (recovery.cpp) and finalization.
//
// Roles of a process:
//   holder - keeps copies in slots of its window memory, and through its helper thread hands
//            out slot addresses, grants and locks (holder/holder.hpp serves every request).
//   client - an agent (agent.hpp: the application thread; in the localized variant also the
//            repair thread) that writes and reads copies with one-sided RMA (engine.hpp).
//
// Processes have a stable id (their rank in the communicator the store was created on), which
// placement uses, and a current rank in the store's communicator, which changes when
// store_recover shrinks it (membership.hpp).
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client/core.hpp"
#include "common/config.hpp"
#include "durable/format.hpp"
#include "rmastore/store.h"
#include "variants/variant.hpp"

namespace rmastore::internal {

class Store final {
public:
  // Collective over comm. Throws StoreError with the status every process agreed on.
  // `local_error` is a failure this process found before the call (the caller's set-up): it
  // fails creation on every process like an invalid argument does.
  static std::unique_ptr<Store> create(MPI_Comm comm, const Config &config, store_status_t local_error = STORE_OK);
  ~Store();
  Store(const Store &) = delete;
  Store &operator=(const Store &) = delete;

  // store_put: STORE_ERR_PROC_FAILED while a failure is known and not recovered; inside a
  // transaction only staged for commit; STORE_ERR_MODE outside one in STORE_MODE_TRANSACTION;
  // otherwise the variant's put (variant_).
  void put(std::uint64_t key, const void *buf, std::size_t len);
  void del(std::uint64_t key);
  // Keys must be distinct (the C boundary checks).
  void put_many(const std::vector<PutItem> &items);
  void get_many(std::vector<GetItem> &items);
  // store_list: at most `limit` keys in [first, last], ascending; *more if some may follow.
  std::vector<std::uint64_t> list(std::uint64_t first, std::uint64_t last, std::size_t limit, bool *more);
  // Returns STORE_OK, STORE_ERR_NOT_FOUND, STORE_ERR_DATA_LOST or STORE_ERR_TRUNCATED (with
  // *len = needed length).
  store_status_t get(std::uint64_t key, void *buf, std::size_t capacity, std::size_t *len);
  // Collective over the survivors. Returns STORE_OK or STORE_ERR_RECOVER_AGAIN.
  store_status_t recover(MPI_Comm *new_comm);
  void tx_begin();
  void tx_commit();
  void tx_abort();
  store_mode_t mode() const { return variant_->mode(); }
  void back_to_normal(); // collective
  // Collective.
  void finalize();
  // The durable tier (snapshot.cpp). All collective; snapshot() returns the new snapshot's
  // number, restore() the number of the one it loaded (0: none in the directory).
  std::uint64_t snapshot();
  // store_snapshot_start and store_snapshot_wait: snapshot() in two halves, the files written
  // in between by a thread of this process (no MPI in it).
  // `background` false: the part is written before it returns (store_snapshot's first half).
  std::uint64_t snapshot_start(bool background = true);
  void snapshot_wait();
  // store_snapshot_flush_wait: the newest snapshot this store completed in snapshot_dir.
  std::uint64_t flush_wait();
  std::uint64_t restore();
  // store_restore_lost: collective. The snapshot it read (0: nothing lost, or no snapshot), and
  // in *back the keys it put back, ascending, the same on every process.
  std::uint64_t restore_lost(std::vector<std::uint64_t> *back);
  // Local, with no collective call: stops the helper and repair threads, so that no thread of
  // the store calls MPI after MPI_Finalize. Called at the start of MPI_Finalize (capi.cpp);
  // the store is unusable afterwards, and whatever MPI holds for it is freed by MPI_Finalize.
  void stop_for_mpi_finalize();
  void info(store_info_t &out) const;
  void last_recovery(store_recovery_t &out) const;

  // For tests: reads this process's own copy straight from its memory, with no MPI call.
  bool read_local_copy(std::uint64_t key, SlotHeader &header, std::vector<std::byte> &value) const {
    return core_->holder.slots.read_local_copy(key, header, value);
  }
  // For tests: the holder whose copy the last successful get returned (current rank).
  int last_read_holder() const { return variant_->last_read_holder(); }
  // For tests: gives back the locks this process keeps cached (localized variant), and waits
  // until the unlocks are sent.
  void give_back_locks() { variant_->give_back_locks(); }
  // For tests: current ranks of the holders of `key`, best first, under the placement of the
  // current view.
  std::vector<int> holders(std::uint64_t key) const {
    return core_->membership.view()->holders_of(SlotId{key, Ns::kValue});
  }
  // store_key_holders (store_hooks.h): holders() once placement accounts for the failures this
  // process knows of.
  std::vector<int> current_holders(std::uint64_t key) { return variant_->holders(key); }
  std::shared_ptr<const Placement> placement() const { return core_->membership.view()->placement; }
  // For tests: the keys recorded here (witnesses.hpp), and the current ranks of a key's
  // witnesses and of all its keepers (holders, then witnesses).
  std::vector<std::uint64_t> recorded_keys() const { return core_->holder.witnesses.all(); }
  std::vector<int> witnesses_of(std::uint64_t key) const { return core_->membership.view()->witnesses_of(key); }
  std::vector<int> keepers_of(std::uint64_t key) const { return core_->membership.view()->keepers_of(key); }
  int rank() const { return core_->rt.rank; }
  int size() const { return core_->rt.size; }
  int stable_id() const { return core_->id; }
  bool localized() const { return core_->config.recovery == STORE_RECOVERY_LOCALIZED; }

  // A snapshot between snapshot_start and snapshot_wait: this process's values as the cut found
  // them, and the thread that writes them to its part.
  // Snapshots complete in snapshot_dir: number and part count, newest first.
  using Complete = std::vector<std::pair<std::uint64_t, std::size_t>>;
  struct SnapshotInFlight {
    std::uint64_t seq = 0;
    Complete before; // complete when it started: the older ones it drops go once it is
    std::vector<std::pair<std::uint64_t, std::size_t>> records; // key, length
    std::vector<std::byte> bytes;                               // the values, one after another
    std::thread writer;
    // Written by the thread, read after it is joined.
    std::uint64_t part[3] = {0, 0, 0}; // the part's size, record count and checksum chain
    store_status_t status = STORE_OK;
    std::string why;
  };

  // Two levels: a snapshot complete in snapshot_local_dir whose parts a thread copies to
  // snapshot_dir. On rank 0 the same thread then waits for every process's part there and writes
  // the manifest.
  struct FlushInFlight {
    std::uint64_t seq = 0;
    std::thread thread;
    std::atomic<bool> copied{false};     // this process's copy ended: status and why are set
    std::atomic<bool> stop{false};       // stop copying, or (rank 0) waiting for the others' parts
    std::atomic<bool> all_copied{false}; // every process's copy succeeded: its part is in place
    store_status_t status = STORE_OK;
    std::string why;
    // Rank 0 only: the manifest to write, and whether the thread wrote it (read after joining).
    std::optional<durable::Manifest> manifest;
    Complete before;
    store_status_t manifest_status = STORE_ERR_IO;
    std::string manifest_why = "the flush was abandoned";
    // Tells the thread to stop (rank 0's looks once more for every part first) and joins it.
    void end() {
      stop.store(true);
      if (thread.joinable()) thread.join();
    }
  };

private:
  Store(MPI_Comm comm, const Config &config);

  // Between an unfinished store_recover and the next one the helper threads may not run and the
  // communicators may be new: a request would wait for an answer that never comes. Throws
  // STORE_ERR_PROC_FAILED then, once another process started store_recover, and when the variant
  // needs a recovery.
  void require_healthy() const;
  // What store_snapshot and store_restore_lost (`what`) need: a healthy store, no transaction
  // open, a snapshot_dir, no failure left to recover. Then waits for this process's posted
  // messages to complete.
  void require_ready_for_durable(const char *what);
  // Puts the records back through the store's placement, in batches.
  void put_records(const std::vector<durable::Record> &records);
  // Starts the variant's threads and the helper, which hands requests to the holder side
  // (Holder::serve) and the other messages to on_message.
  void start_threads();
  // Stops them; the collective parts of the runtime are freed by the caller.
  void stop_threads();
  void on_message(const CtrlMsg &msg, int source);
  // store_recover's steps (recovery.cpp). Revokes the store's communicators, shrinks to the
  // survivors and agrees on them; returns whether every survivor may keep its window: no
  // process failed since it was made.
  bool shrink_and_agree(double *seconds, int members);
  // Retires the old window (unless kept), renumbers, and builds the runtime on the survivors.
  void rebuild_runtime(double *seconds, bool keep_window);

  std::unique_ptr<Core> core_;
  // GlobalVariant or LocalizedVariant, as config.recovery says. Declared after core_: destroyed
  // first, as it uses it.
  std::unique_ptr<Variant> variant_;
  // The processes of the communicator the store was created on: stable ids are ranks in it.
  MPI_Group origin_ = MPI_GROUP_NULL;
  // store_recover found that the survivors disagree on who survived: every call but
  // store_finalize returns STORE_ERR_MPI, and store_finalize abandons the store.
  bool broken_ = false;
  static constexpr const char *kDisagree = "the survivors disagree on which processes survived (MPIX_Comm_shrink "
                                           "gave them different communicators): the store can only be finalized";
  bool finalized_ = false;
  // A store_recover began and has not yet returned STORE_OK: the runtime may be half rebuilt.
  bool recover_pending_ = false;
  int recover_attempts_ = 0;               // store_recover calls since the last that returned STORE_OK
  std::int64_t first_attempt_ns_ = 0;      // when the first of them began
  std::uint64_t quarantined_reported_ = 0; // SlotStore::quarantined_bytes() at the last STORE_OK
  int members_ = 0;                        // processes after store_init or the last successful recovery
  bool tx_open_ = false;
  TxValues tx_values_;
  store_recovery_t last_recovery_{};
  std::unique_ptr<SnapshotInFlight> snapshot_;
  // Removes this process's share of the parts of the snapshots the last one dropped; joined by
  // the next snapshot and by end_snapshot.
  std::thread dropper_;
  // Waits for the thread of a snapshot in flight and abandons the snapshot (it never gets a
  // manifest), and for the dropper: store_recover and store_finalize.
  void end_snapshot();
  // Two levels: store_snapshot_flush_wait's work, which store_snapshot, store_snapshot_start and
  // store_restore_lost do first. Collective.
  void finish_flush();
  // Stops the flush's thread and forgets it (store_recover, errors): local.
  void abandon_flush();
  // store_finalize's end of the flush, after its barrier (`everyone_copied`: no failure seen
  // there), with no collective: rank 0 writes the manifest if it sees every part, and a process
  // whose copy failed, or rank 0 if it wrote none, says so on standard error. Local.
  void close_flush(bool everyone_copied);
  // Removes this process's parts older than `seq` from the local level.
  void drop_local_parts(std::uint64_t seq);
  std::string local_dir_; // snapshot_local_dir, "%h" replaced; empty: one level
  std::unique_ptr<FlushInFlight> flush_;
  std::uint64_t last_snapshot_ = 0, flushed_snapshot_ = 0, restored_snapshot_ = 0, restored_keys_ = 0;
  int snapshots_skipped_ = 0, restored_local_parts_ = 0;
  std::vector<store_key_t> lost_keys_;
};

} // namespace rmastore::internal
