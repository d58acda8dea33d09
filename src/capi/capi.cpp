// The C boundary: argument checks, handle validation, one mutex per handle, and the exception
// firewall. Nothing thrown inside the core crosses this file.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_set>
#include <vector>

#include "capi/finalize_hook.hpp"
#include "capi/handle.hpp"
#include "capi/put_queue.hpp"
#include "capi/test_access.hpp"
#include "common/errors.hpp"
#include "rmastore/store.h"
#include "rmastore/store_hooks.h"
#include "store/store.hpp"

using rmastore::internal::Store;
using rmastore::internal::StoreError;

using namespace rmastore::internal::capi;

namespace {

// Runs `body` on the live store behind `s`, serialised with other calls on the same handle.
template <class F> store_status_t with_store(store_t s, F &&body) noexcept {
  if (s == nullptr) return STORE_ERR_HANDLE;
  return guarded([&]() -> store_status_t {
    std::lock_guard lk(s->mutex);
    run_queued_locked(s);
    if (s->magic == kMpiGoneMagic) return STORE_ERR_MPI_STATE;
    if (s->magic != kLiveMagic || !s->impl) return STORE_ERR_HANDLE;
    if (!mpi_usable()) return STORE_ERR_MPI_STATE;
    return body(*s->impl);
  });
}

} // namespace

namespace rmastore::internal {
Store *impl(store_t s) {
  return s != nullptr && s->magic == kLiveMagic ? s->impl.get() : nullptr;
}
} // namespace rmastore::internal

extern "C" {

store_status_t store_config_init(store_config_t *config) {
  if (config == nullptr) return STORE_ERR_ARG;
  std::memset(config, 0, sizeof *config);
  config->struct_size = sizeof *config;
  const rmastore::internal::Config d;
  config->replicas = d.replicas;
  config->initial_slot_size = d.initial_slot_size;
  config->capacity_hint = d.capacity_hint;
  config->node_id = d.node_id;
  config->helper_max_sleep_us = d.helper_max_sleep_us;
  config->detector = d.detector;
  config->recovery = d.recovery;
  config->snapshot_keep = d.snapshot_keep;
  return STORE_OK;
}

const char *store_strerror(store_status_t status) {
  switch (status) {
  case STORE_OK:
    return "success";
  case STORE_ERR_ARG:
    return "invalid argument";
  case STORE_ERR_HANDLE:
    return "invalid store handle (NULL or already finalized)";
  case STORE_ERR_NOT_FOUND:
    return "key not found";
  case STORE_ERR_TRUNCATED:
    return "buffer too small for the value; the needed length was returned";
  case STORE_ERR_CONFIG_MISMATCH:
    return "store configuration differs across processes";
  case STORE_ERR_THREAD_LEVEL:
    return "MPI must be initialised with MPI_THREAD_MULTIPLE on every process";
  case STORE_ERR_MPI_STATE:
    return "MPI is not initialised or already finalized";
  case STORE_ERR_MPI:
    return "an MPI call failed";
  case STORE_ERR_NO_MEMORY:
    return "out of memory for slots or internal state";
  case STORE_ERR_TOO_LARGE:
    return "value larger than STORE_MAX_VALUE_SIZE";
  case STORE_ERR_VERSION:
    return "header and library versions are incompatible";
  case STORE_ERR_PEER:
    return "another process failed or rejected its arguments in this collective call";
  case STORE_ERR_INTERNAL:
    return "internal error in rmastore";
  case STORE_ERR_PROC_FAILED:
    return "a process of the store failed: call store_recover on every survivor";
  case STORE_ERR_RECOVER_AGAIN:
    return "another process failed during store_recover: call it again";
  case STORE_ERR_DATA_LOST:
    return "every copy of this key was lost to failures";
  case STORE_ERR_MODE:
    return "not allowed in the store's current mode (transaction mode: puts only in transactions)";
  case STORE_ERR_TX_STATE:
    return "no transaction is open, or one is open already";
  case STORE_ERR_IO:
    return "the file system refused a snapshot's write or read (see the message on standard error)";
  case STORE_ERR_SNAPSHOT_FORMAT:
    return "the snapshot directory holds a snapshot of a format this library cannot read";
  case STORE_ERR_SNAPSHOT_OTHER:
    return "the snapshot directory holds snapshots of another data set (another snapshot_name)";
  }
  return "unknown status";
}

store_status_t store_init_version(MPI_Comm comm, const store_config_t *config, store_t *store, int api_major,
                                  int api_minor) {
  (void)api_minor; // minor versions only add fields, which struct_size already tells apart
  if (store == nullptr) return STORE_ERR_ARG;
  *store = nullptr;
  if (api_major != STORE_API_VERSION_MAJOR) return STORE_ERR_VERSION;
  if (!mpi_usable()) return STORE_ERR_MPI_STATE;
  if (comm == MPI_COMM_NULL) return STORE_ERR_ARG;
  return guarded([&]() -> store_status_t {
    rmastore::internal::Config c;
    if (config != nullptr) {
      // Read only the fields the caller's header had; the rest keep their defaults.
      store_config_t full;
      store_config_init(&full);
      const std::size_t n = config->struct_size;
      if (n < offsetof(store_config_t, replicas) + sizeof(int) || n > sizeof full) {
        // Without a plausible struct_size the config was not initialised with store_config_init.
        // This still has to be collective, so it becomes an invalid replica count on this rank.
        full.replicas = 0;
      } else {
        std::memcpy(&full, config, n);
      }
      c.replicas = full.replicas;
      c.initial_slot_size = full.initial_slot_size;
      c.capacity_hint = full.capacity_hint;
      c.node_id = full.node_id;
      c.helper_max_sleep_us = full.helper_max_sleep_us;
      c.detector = full.detector;
      c.recovery = full.recovery;
      if (full.snapshot_dir != nullptr) c.snapshot_dir = full.snapshot_dir;
      if (full.snapshot_name != nullptr) c.snapshot_name = full.snapshot_name;
      if (full.snapshot_local_dir != nullptr) c.snapshot_local_dir = full.snapshot_local_dir;
      c.snapshot_keep = full.snapshot_keep;
      c.restore = full.restore != 0;
    }
    // A hook that cannot be installed fails creation on every process (it is collective).
    const store_status_t hook = install_finalize_hook();
    auto handle = std::make_unique<store_handle>();
    handle->impl = Store::create(comm, c, hook);
    if (c.restore) {
      try {
        handle->impl->restore();
      } catch (const rmastore::internal::StoreError &e) {
        // Every process met the same status (restore agrees on it), so this finalize is
        // collective; after a process failure the store is abandoned instead.
        if (e.status() != STORE_ERR_PROC_FAILED) {
          try {
            handle->impl->finalize();
          } catch (...) {
          }
        }
        throw;
      }
    }
    handle->magic = kLiveMagic;
    remember_store(handle.get());
    *store = handle.release();
    return STORE_OK;
  });
}

store_status_t store_put(store_t store, store_key_t key, const void *buf, size_t len) {
  if (buf == nullptr && len > 0) return store == nullptr ? STORE_ERR_HANDLE : STORE_ERR_ARG;
  if (len > STORE_MAX_VALUE_SIZE) return store == nullptr ? STORE_ERR_HANDLE : STORE_ERR_TOO_LARGE;
  return with_store(store, [&](Store &s) {
    s.put(key, buf, len);
    return STORE_OK;
  });
}

namespace {

// The keys of a batch: distinct, or STORE_ERR_ARG.
bool distinct(std::size_t count, const store_key_t *keys) {
  std::vector<store_key_t> sorted(keys, keys + count);
  std::sort(sorted.begin(), sorted.end());
  return std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
}

} // namespace

store_status_t store_put_many(store_t store, size_t count, const store_key_t *keys, const void *const *bufs,
                              const size_t *lens) {
  if (store == nullptr) return STORE_ERR_HANDLE;
  if (count == 0) return with_store(store, [](Store &) { return STORE_OK; });
  if (keys == nullptr || bufs == nullptr || lens == nullptr) return STORE_ERR_ARG;
  for (size_t i = 0; i < count; ++i) {
    if (bufs[i] == nullptr && lens[i] > 0) return STORE_ERR_ARG;
    if (lens[i] > STORE_MAX_VALUE_SIZE) return STORE_ERR_TOO_LARGE;
  }
  return guarded([&]() -> store_status_t {
    if (!distinct(count, keys)) return STORE_ERR_ARG;
    std::vector<rmastore::internal::PutItem> items(count);
    for (size_t i = 0; i < count; ++i) items[i] = rmastore::internal::PutItem{keys[i], bufs[i], lens[i]};
    return with_store(store, [&](Store &s) {
      s.put_many(items);
      return STORE_OK;
    });
  });
}

store_status_t store_get_many(store_t store, size_t count, const store_key_t *keys, void *const *bufs,
                              const size_t *capacities, size_t *lens, store_status_t *statuses) {
  if (store == nullptr) return STORE_ERR_HANDLE;
  if (count == 0) return with_store(store, [](Store &) { return STORE_OK; });
  if (keys == nullptr || bufs == nullptr || capacities == nullptr || lens == nullptr || statuses == nullptr)
    return STORE_ERR_ARG;
  for (size_t i = 0; i < count; ++i) {
    if (bufs[i] == nullptr && capacities[i] > 0) return STORE_ERR_ARG;
  }
  return guarded([&]() -> store_status_t {
    std::vector<rmastore::internal::GetItem> items(count);
    for (size_t i = 0; i < count; ++i) {
      items[i].key = keys[i];
      items[i].buf = bufs[i];
      items[i].capacity = capacities[i];
    }
    return with_store(store, [&](Store &s) {
      s.get_many(items);
      for (size_t i = 0; i < count; ++i) {
        lens[i] = items[i].len;
        statuses[i] = items[i].status;
      }
      return STORE_OK;
    });
  });
}

store_status_t store_list(store_t store, store_key_t first, store_key_t last, store_key_t *keys, size_t capacity,
                          size_t *count, int *more) {
  if (store == nullptr) return STORE_ERR_HANDLE;
  if (keys == nullptr || count == nullptr || more == nullptr || capacity == 0 || first > last) return STORE_ERR_ARG;
  // Each process answers with up to this many keys: it bounds the memory a call takes at
  // every process (8 bytes a key, times the processes here).
  constexpr size_t kPage = 4096;
  return with_store(store, [&](Store &s) {
    bool m = false;
    const std::vector<std::uint64_t> got = s.list(first, last, std::min(capacity, kPage), &m);
    std::copy(got.begin(), got.end(), keys);
    *count = got.size();
    *more = m ? 1 : 0;
    return STORE_OK;
  });
}

store_status_t store_put_nb(store_t store, store_key_t key, const void *buf, size_t len, store_request_t *request) {
  if (store == nullptr) return STORE_ERR_HANDLE;
  if (request == nullptr || (buf == nullptr && len > 0)) return STORE_ERR_ARG;
  if (len > STORE_MAX_VALUE_SIZE) return STORE_ERR_TOO_LARGE;
  *request = nullptr;
  return guarded([&]() -> store_status_t {
    auto r = std::make_unique<store_request>();
    r->store = store;
    r->key = key;
    r->buf = buf;
    r->len = len;
    const store_status_t queued = queue_put(r.get());
    if (queued != STORE_OK) return queued;
    *request = r.release();
    return STORE_OK;
  });
}

store_status_t store_test(store_request_t *request, int *done) {
  if (request == nullptr || *request == nullptr || done == nullptr) return STORE_ERR_ARG;
  store_request *r = *request;
  *done = r->done.load(std::memory_order_acquire) ? 1 : 0;
  if (!*done) return STORE_OK;
  const store_status_t st = r->status;
  delete r;
  *request = nullptr;
  return st;
}

store_status_t store_wait(store_request_t *request) {
  if (request == nullptr || *request == nullptr) return STORE_ERR_ARG;
  store_request *r = *request;
  if (!r->done.load(std::memory_order_acquire)) {
    // The worker runs puts with the handle's mutex held: once this thread has it, the put is
    // done or still queued, and then runs here.
    std::lock_guard lk(r->store->mutex);
    run_queued_locked(r->store);
  }
  if (!r->done.load(std::memory_order_acquire)) return STORE_ERR_INTERNAL;
  const store_status_t st = r->status;
  delete r;
  *request = nullptr;
  return st;
}

store_status_t store_delete(store_t store, store_key_t key) {
  return with_store(store, [&](Store &s) {
    s.del(key);
    return STORE_OK;
  });
}

store_status_t store_get(store_t store, store_key_t key, void *buf, size_t capacity, size_t *len) {
  if (store == nullptr) return STORE_ERR_HANDLE;
  if (len == nullptr || (buf == nullptr && capacity > 0)) return STORE_ERR_ARG;
  return with_store(store, [&](Store &s) { return s.get(key, buf, capacity, len); });
}

store_status_t store_finalize(store_t *store) {
  if (store == nullptr) return STORE_ERR_ARG;
  store_t s = *store;
  if (s == nullptr) return STORE_ERR_HANDLE;
  // The worker of store_put_nb goes first; puts still queued run below, before the store goes.
  stop_worker(s);
  return guarded([&]() -> store_status_t {
    // One hold of the lock from the check to the end: a call from another thread either runs
    // before, or finds the handle dead. The handle itself stays allocated, marked dead, so calls
    // through stale copies of the pointer get STORE_ERR_HANDLE; it is a few bytes per store.
    std::lock_guard lk(s->mutex);
    run_queued_locked(s);
    const bool mpi_gone = s->magic == kMpiGoneMagic;
    if (s->magic != kLiveMagic && !mpi_gone) return STORE_ERR_HANDLE;
    if (!mpi_gone && !s->impl) return STORE_ERR_HANDLE;
    s->magic = kDeadMagic;
    *store = nullptr;
    forget_store(s);
    if (mpi_gone || !mpi_usable()) {
      (void)s->impl.release(); // nothing can be freed without MPI
      return STORE_ERR_MPI_STATE;
    }
    finalize_impl(s);
    return STORE_OK;
  });
}

store_status_t store_recover(store_t store, MPI_Comm *new_comm) {
  return with_store(store, [&](Store &s) { return s.recover(new_comm); });
}

store_status_t store_snapshot(store_t store, uint64_t *snapshot) {
  return with_store(store, [&](Store &s) {
    const std::uint64_t seq = s.snapshot();
    if (snapshot != nullptr) *snapshot = seq;
    return STORE_OK;
  });
}

store_status_t store_snapshot_start(store_t store, uint64_t *snapshot) {
  return with_store(store, [&](Store &s) {
    const std::uint64_t seq = s.snapshot_start();
    if (snapshot != nullptr) *snapshot = seq;
    return STORE_OK;
  });
}

store_status_t store_snapshot_wait(store_t store) {
  return with_store(store, [&](Store &s) {
    s.snapshot_wait();
    return STORE_OK;
  });
}

store_status_t store_snapshot_flush_wait(store_t store, uint64_t *snapshot) {
  return with_store(store, [&](Store &s) {
    const std::uint64_t seq = s.flush_wait();
    if (snapshot != nullptr) *snapshot = seq;
    return STORE_OK;
  });
}

store_status_t store_restore_lost(store_t store, uint64_t *snapshot, store_key_t *keys, size_t capacity,
                                  size_t *count) {
  if (store == nullptr) return STORE_ERR_HANDLE;
  if (count == nullptr || (keys == nullptr && capacity > 0)) return STORE_ERR_ARG;
  return with_store(store, [&](Store &s) {
    std::vector<std::uint64_t> back;
    const std::uint64_t seq = s.restore_lost(&back);
    std::copy_n(back.begin(), std::min(back.size(), capacity), keys);
    *count = back.size();
    if (snapshot != nullptr) *snapshot = seq;
    return STORE_OK;
  });
}

store_status_t store_get_mode(store_t store, store_mode_t *mode) {
  if (store == nullptr) return STORE_ERR_HANDLE;
  if (mode == nullptr) return STORE_ERR_ARG;
  return with_store(store, [&](Store &s) {
    *mode = s.mode();
    return STORE_OK;
  });
}

store_status_t store_back_to_normal(store_t store) {
  return with_store(store, [&](Store &s) {
    s.back_to_normal();
    return STORE_OK;
  });
}

store_status_t store_tx_begin(store_t store) {
  return with_store(store, [&](Store &s) {
    s.tx_begin();
    return STORE_OK;
  });
}

store_status_t store_tx_commit(store_t store) {
  return with_store(store, [&](Store &s) {
    s.tx_commit();
    return STORE_OK;
  });
}

store_status_t store_tx_abort(store_t store) {
  return with_store(store, [&](Store &s) {
    s.tx_abort();
    return STORE_OK;
  });
}

store_status_t store_recovery_init_size(store_recovery_t *report, size_t size) {
  if (report == nullptr || size < sizeof(size_t) || size > sizeof(store_recovery_t)) return STORE_ERR_ARG;
  std::memset(report, 0, size);
  report->struct_size = size;
  return STORE_OK;
}

// The exported init of programs built before store_recovery_init became inline: their struct
// ends before bytes_quarantined, and the library must not write past it.
store_status_t rmastore_store_recovery_init(store_recovery_t *report);
store_status_t rmastore_store_recovery_init(store_recovery_t *report) {
  return store_recovery_init_size(report, offsetof(store_recovery_t, bytes_quarantined));
}

store_status_t store_last_recovery(store_t store, store_recovery_t *report) {
  if (store == nullptr) return STORE_ERR_HANDLE;
  if (report == nullptr || report->struct_size < sizeof(size_t) || report->struct_size > sizeof(store_recovery_t)) {
    return STORE_ERR_ARG;
  }
  return with_store(store, [&](Store &s) {
    store_recovery_t full;
    store_recovery_init(&full);
    s.last_recovery(full);
    const std::size_t n = report->struct_size;
    std::memcpy(report, &full, n);
    report->struct_size = n;
    return STORE_OK;
  });
}

store_status_t store_info_init(store_info_t *info) {
  if (info == nullptr) return STORE_ERR_ARG;
  std::memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
  return STORE_OK;
}

store_status_t store_get_info(store_t store, store_info_t *info) {
  if (store == nullptr) return STORE_ERR_HANDLE;
  if (info == nullptr || info->struct_size < sizeof(size_t) || info->struct_size > sizeof(store_info_t)) {
    return STORE_ERR_ARG;
  }
  return with_store(store, [&](Store &s) {
    store_info_t full;
    store_info_init(&full);
    s.info(full);
    const std::size_t n = info->struct_size;
    std::memcpy(info, &full, n);
    info->struct_size = n;
    return STORE_OK;
  });
}

// ---- store_hooks.h: for benchmarks and tests, not part of the stable API ----

store_status_t store_key_holders(store_t store, store_key_t key, int *ranks, int capacity, int *count) {
  if (store == nullptr) return STORE_ERR_HANDLE;
  if (count == nullptr || capacity < 0 || (ranks == nullptr && capacity > 0)) return STORE_ERR_ARG;
  return with_store(store, [&](Store &s) {
    const std::vector<int> holders = s.current_holders(key);
    const int n = static_cast<int>(holders.size());
    std::copy_n(holders.begin(), std::min(n, capacity), ranks);
    *count = n;
    return n > capacity ? STORE_ERR_TRUNCATED : STORE_OK;
  });
}

store_status_t store_key_keepers(store_t store, store_key_t key, int *ranks, int capacity, int *count) {
  if (store == nullptr) return STORE_ERR_HANDLE;
  if (count == nullptr || capacity < 0 || (ranks == nullptr && capacity > 0)) return STORE_ERR_ARG;
  return with_store(store, [&](Store &s) {
    (void)s.current_holders(key); // the localized variant's view follows the failures known
    const std::vector<int> keepers = s.keepers_of(key);
    const int n = static_cast<int>(keepers.size());
    std::copy_n(keepers.begin(), std::min(n, capacity), ranks);
    *count = n;
    return n > capacity ? STORE_ERR_TRUNCATED : STORE_OK;
  });
}

// The Fortran module (src/fortran/rmastore.f90) passes MPI handles as Fortran integers: the
// handles of the `mpi` module are, and mpi_f08's carry one (MPI_VAL). Converting here keeps the
// module free of MPI's own Fortran modules, which differ between compilers.
store_status_t rmastore_store_init_fortran(MPI_Fint comm, const store_config_t *config, store_t *store, int api_major,
                                           int api_minor);
store_status_t rmastore_store_init_fortran(MPI_Fint comm, const store_config_t *config, store_t *store, int api_major,
                                           int api_minor) {
  if (store == nullptr) return STORE_ERR_ARG;
  *store = nullptr;
  if (!mpi_usable()) return STORE_ERR_MPI_STATE;
  return store_init_version(MPI_Comm_f2c(comm), config, store, api_major, api_minor);
}

store_status_t rmastore_store_recover_fortran(store_t store, MPI_Fint *new_comm);
store_status_t rmastore_store_recover_fortran(store_t store, MPI_Fint *new_comm) {
  MPI_Comm c = MPI_COMM_NULL;
  const store_status_t st = store_recover(store, new_comm != nullptr ? &c : nullptr);
  if (new_comm != nullptr && st == STORE_OK) *new_comm = MPI_Comm_c2f(c);
  return st;
}

} // extern "C"
