// What is behind the opaque store_t and store_request_t, and what every file of the C boundary
// (capi/) shares: the handle's states, and the firewall that turns exceptions into statuses.
// Private to capi/; tests use capi/test_access.hpp.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <thread>

#include "common/errors.hpp"
#include "rmastore/store.h"
#include "store/store.hpp"

// A store_put_nb: run by the handle's worker thread, or by the next call on the handle, in the
// order the puts were made.
struct store_handle;
struct store_request {
  store_handle *store = nullptr; // handles are never freed: valid after store_finalize too
  store_key_t key = 0;
  const void *buf = nullptr;
  std::size_t len = 0;
  store_status_t status = STORE_OK;
  std::atomic<bool> done{false};
};

struct store_handle {
  std::mutex mutex;
  // Live, finalized, or stopped by MPI_Finalize (kLiveMagic and the others, below).
  std::uint64_t magic = 0;
  std::unique_ptr<rmastore::internal::Store> impl;
  // The list of stores not finalized yet (finalize_hook.cpp): intrusive, so that joining it
  // cannot fail.
  store_handle *live_next = nullptr;
  // store_put_nb: puts not started yet and the thread that runs them, started by the first one.
  // Their own lock, not `mutex`: queueing a put must not wait for the batch the worker runs.
  std::mutex queue_mutex;
  std::deque<store_request *> queued; // guarded by queue_mutex
  std::thread worker;                 // started under queue_mutex
  std::condition_variable work;
  bool worker_stop = false; // guarded by queue_mutex; no put is queued any more once set
};

namespace rmastore::internal::capi {

inline constexpr std::uint64_t kLiveMagic = 0x726d6173746f7265ULL; // "rmastore"
inline constexpr std::uint64_t kDeadMagic = 0x6465616473746f72ULL;
// MPI_Finalize began with the store open: its threads are stopped, every call returns
// STORE_ERR_MPI_STATE, and store_finalize kills the handle.
inline constexpr std::uint64_t kMpiGoneMagic = 0x6d7069676f6e6521ULL;

inline bool mpi_usable() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

// With RMASTORE_VERBOSE set, failures print their detail (the failing MPI call and MPI's own
// message) to stderr; the status alone cannot carry it.
inline void report(const char *what) noexcept {
  static const bool verbose = std::getenv("RMASTORE_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "rmastore: %s\n", what);
}

// Runs `body`, whose exceptions become statuses: nothing thrown in the core crosses the boundary.
template <class F> store_status_t guarded(F &&body) noexcept {
  try {
    return body();
  } catch (const StoreError &e) {
    report(e.what());
    return e.status();
  } catch (const std::bad_alloc &) {
    report("out of memory");
    return STORE_ERR_NO_MEMORY;
  } catch (const std::exception &e) {
    report(e.what());
    return STORE_ERR_INTERNAL;
  } catch (...) {
    report("unknown exception");
    return STORE_ERR_INTERNAL;
  }
}

} // namespace rmastore::internal::capi
