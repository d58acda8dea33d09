#include "capi/finalize_hook.hpp"

#include <vector>

#include "capi/put_queue.hpp"

namespace rmastore::internal::capi {

namespace {

// Stores whose store_finalize has not run, so that MPI_Finalize can stop their threads.
std::mutex live_mutex;
store_t live_stores = nullptr;            // guarded by live_mutex
int finalize_keyval = MPI_KEYVAL_INVALID; // guarded by live_mutex

// A few stores at most are open at a time: a singly linked list keeps the handle small.
void forget_store_locked(store_t s) noexcept {
  for (store_t *p = &live_stores; *p != nullptr; p = &(*p)->live_next) {
    if (*p != s) continue;
    *p = s->live_next;
    s->live_next = nullptr;
    return;
  }
}

// MPI_Finalize deletes the attributes of MPI_COMM_SELF first, while MPI is still fully usable:
// this is the only moment at which stores the application did not finalize (an exit through
// an error path, a forgotten store_finalize) can be taken down before their threads call MPI
// after MPI_Finalize, which aborts the job. Each is finalized as store_finalize would, which is
// collective: MPI_Finalize is collective too, so the other processes come, through their own
// MPI_Finalize or store_finalize. Stopping the threads at once instead left a peer still inside
// a call waiting forever for an answer from this process's helper (tests/test_finalize_race.cpp).
// Newest store first, the order of store_init, which is collective too.
int on_mpi_finalize(MPI_Comm, int keyval, void *, void *) {
  try {
    std::vector<store_t> stores;
    {
      std::lock_guard lk(live_mutex);
      for (store_t s = live_stores; s != nullptr; s = s->live_next) stores.push_back(s);
      while (live_stores != nullptr) forget_store_locked(live_stores);
      finalize_keyval = MPI_KEYVAL_INVALID;
    }
    for (store_t s : stores) {
      stop_worker(s);
      std::lock_guard lk(s->mutex);
      run_queued_locked(s); // as store_finalize: puts still queued run first
      if (s->magic != kLiveMagic) continue;
      s->magic = kMpiGoneMagic;
      if (!s->impl) continue;
      try {
        finalize_impl(s);
      } catch (...) {
        // A failure known or met on the way: handled as store_finalize does, with no status to
        // return.
      }
    }
  } catch (...) {
    // Nothing can be reported from inside MPI_Finalize; a store left running is what happened
    // before this hook existed.
  }
  int kv = keyval;
  MPI_Comm_free_keyval(&kv);
  return MPI_SUCCESS;
}

} // namespace

void finalize_impl(store_t s) {
  try {
    s->impl->finalize();
    s->impl.reset();
  } catch (...) {
    (void)s->impl.release();
    throw;
  }
}

store_status_t install_finalize_hook() noexcept {
  std::lock_guard lk(live_mutex);
  if (finalize_keyval != MPI_KEYVAL_INVALID) return STORE_OK;
  int kv = MPI_KEYVAL_INVALID;
  if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_mpi_finalize, &kv, nullptr) != MPI_SUCCESS) return STORE_ERR_MPI;
  if (MPI_Comm_set_attr(MPI_COMM_SELF, kv, nullptr) != MPI_SUCCESS) {
    MPI_Comm_free_keyval(&kv);
    return STORE_ERR_MPI;
  }
  finalize_keyval = kv;
  return STORE_OK;
}

void remember_store(store_t s) noexcept {
  std::lock_guard lk(live_mutex);
  s->live_next = live_stores;
  live_stores = s;
}

void forget_store(store_t s) noexcept {
  std::lock_guard lk(live_mutex);
  forget_store_locked(s);
}

} // namespace rmastore::internal::capi
