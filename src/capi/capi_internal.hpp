// What is behind the opaque store_t, for the C boundary and for tests that look inside.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

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
  // Live, finalized, or stopped by MPI_Finalize (capi.cpp).
  std::uint64_t magic = 0;
  std::unique_ptr<rmastore::internal::Store> impl;
  // The list of stores not finalized yet (capi.cpp): intrusive, so that joining it cannot fail.
  store_handle *live_next = nullptr;
  // store_put_nb: puts not started yet and the thread that runs them, started by the first one.
  // Their own lock, not `mutex`: queueing a put must not wait for the batch the worker runs.
  std::mutex queue_mutex;
  std::deque<store_request *> queued; // guarded by queue_mutex
  std::thread worker;                 // started under queue_mutex
  std::condition_variable work;
  bool worker_stop = false; // guarded by queue_mutex; no put is queued any more once set
};

namespace rmastore::internal {
// The store behind a live handle, or nullptr.
Store *impl(store_t s);
} // namespace rmastore::internal
