#include "capi/put_queue.hpp"

#include <unordered_set>
#include <vector>

namespace rmastore::internal::capi {

namespace {

void worker_main(store_t s) noexcept {
  for (;;) {
    {
      std::unique_lock q(s->queue_mutex);
      s->work.wait(q, [&] { return s->worker_stop || !s->queued.empty(); });
      if (s->worker_stop) return;
    }
    std::lock_guard lk(s->mutex);
    run_queued_locked(s);
  }
}

} // namespace

store_status_t queue_put(store_request *r) {
  store_t s = r->store;
  {
    // What the put finds when it runs (a finalized store, MPI gone) is its status then.
    std::lock_guard q(s->queue_mutex);
    if (s->worker_stop) return STORE_ERR_HANDLE;
    if (!s->worker.joinable()) s->worker = std::thread(worker_main, s);
    s->queued.push_back(r);
  }
  s->work.notify_one();
  return STORE_OK;
}

void run_queued_locked(store_t s) noexcept {
  for (;;) {
    std::vector<store_request *> batch;
    std::vector<rmastore::internal::PutItem> items;
    {
      std::lock_guard q(s->queue_mutex);
      std::unordered_set<store_key_t> keys;
      while (!s->queued.empty() && keys.insert(s->queued.front()->key).second) {
        store_request *r = s->queued.front();
        s->queued.pop_front();
        batch.push_back(r);
        items.push_back(rmastore::internal::PutItem{r->key, r->buf, r->len});
      }
    }
    if (batch.empty()) return;
    store_status_t st = STORE_ERR_HANDLE;
    if (s->magic == kMpiGoneMagic || !mpi_usable()) {
      st = STORE_ERR_MPI_STATE;
    } else if (s->magic == kLiveMagic && s->impl) {
      st = guarded([&] {
        s->impl->put_many(items);
        return STORE_OK;
      });
    }
    for (store_request *r : batch) {
      r->status = st;
      r->done.store(true, std::memory_order_release);
    }
  }
}

void stop_worker(store_t s) noexcept {
  {
    std::lock_guard q(s->queue_mutex);
    s->worker_stop = true;
  }
  s->work.notify_all();
  if (s->worker.joinable() && s->worker.get_id() != std::this_thread::get_id()) s->worker.join();
}

} // namespace rmastore::internal::capi
