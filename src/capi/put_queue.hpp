// store_put_nb's queue: the puts it queued run in order, by the handle's worker thread or by the
// next call on the handle, as batches of distinct keys.
#pragma once

#include "capi/handle.hpp"

namespace rmastore::internal::capi {

// Queues `r` on its store and starts the worker on the first put. STORE_ERR_HANDLE once the
// worker was stopped (the store is being finalized). Takes the queue's lock, not the handle's.
store_status_t queue_put(store_request *r);

// Runs the puts queued, in order, as batches of distinct keys, and completes their requests.
// With the handle's mutex held: every other call on the handle runs them first, so that calls
// take effect in the order they were made.
void run_queued_locked(store_t s) noexcept;

// Stops the worker thread, without the handle's mutex (the worker takes it). Puts still queued
// are run by the caller's next run_queued_locked.
void stop_worker(store_t s) noexcept;

} // namespace rmastore::internal::capi
