#include "store/store.hpp"

#include <signal.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include "common/errors.hpp"
#include "common/fault.hpp"
#include "durable/format.hpp"
#include "variants/global/global.hpp"
#include "variants/localized/localized.hpp"

namespace rmastore::internal {
namespace {

// A site's own Open MPI, without the fixes scripts/setup.sh builds in, is said once per process,
// by the store's rank 0, with what fails without them in this store's layout.
void warn_missing_fixes([[maybe_unused]] int rank, [[maybe_unused]] int nodes) {
#ifdef OPEN_MPI
  static std::once_flag once;
  if (rank != 0 || RmaWindow::mpi_facts().has_fixes) return;
  std::call_once(once, [nodes] {
    if (nodes > 1) {
      std::fprintf(stderr,
                   "rmastore: this Open MPI lacks the fixes of rmastore's scripts/openmpi-patches, and the store "
                   "spans %d nodes: after a process failure, survivors can hang in RMA toward the dead process "
                   "(patch 0004) or crash (0006, 0007, 0010), and the loss of a whole node ends the job (0003). "
                   "docs/operations.md, \"Which Open MPI\", says what survives without them.\n",
                   nodes);
    } else {
      std::fprintf(stderr, "rmastore: this Open MPI lacks the fixes of rmastore's scripts/openmpi-patches: after a "
                           "process failure, survivors can crash in store_recover (patches 0001, 0009, 0010). "
                           "docs/operations.md, \"Which Open MPI\", says what survives without them.\n");
    }
    std::fflush(stderr);
  });
#endif
}

// Node index of every process: by explicit node_id, or by shared-memory domain.
std::vector<int> detect_nodes(MPI_Comm comm, int node_id) {
  int rank = 0, size = 0;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  int label = node_id;
  if (node_id < 0) {
    MPI_Comm node_comm;
    check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node_comm), "MPI_Comm_split_type");
    int rc = MPI_Allreduce(&rank, &label, 1, MPI_INT, MPI_MIN, node_comm);
    const int free_rc = MPI_Comm_free(&node_comm);
    check_mpi(rc, "MPI_Allreduce");
    check_mpi(free_rc, "MPI_Comm_free");
  }
  std::vector<int> labels(static_cast<std::size_t>(size));
  check_mpi(MPI_Allgather(&label, 1, MPI_INT, labels.data(), 1, MPI_INT, comm), "MPI_Allgather");
  std::map<int, int> index;
  for (int l : labels) index.emplace(l, 0);
  int next = 0;
  for (auto &kv : index) kv.second = next++;
  for (int &l : labels) l = index[l];
  return labels;
}

// Agrees on one status: every process learns whether any failed.
bool all_ok(MPI_Comm comm, bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  check_mpi(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  return all == 1;
}

} // namespace

// ------------------------------------------------------------------------------------------------
// Creation and teardown

std::unique_ptr<Store> Store::create(MPI_Comm comm, const Config &cfg, store_status_t local_error) {
  // Open MPI 5.0.7's btl/tcp writes to its sockets without MSG_NOSIGNAL: once a process of
  // another host died, a write to its connection raises SIGPIPE, whose default action ends this
  // survivor (seen when a host was lost: tests/test_failure --host-loss). A process that left
  // SIGPIPE at its default gets it ignored (the write then fails with EPIPE, and ULFM reports the
  // failure); a handler the application installed is left alone.
  struct sigaction pipe_action {};
  if (sigaction(SIGPIPE, nullptr, &pipe_action) == 0 && pipe_action.sa_handler == SIG_DFL &&
      (pipe_action.sa_flags & SA_SIGINFO) == 0) {
    signal(SIGPIPE, SIG_IGN);
  }
  int provided = MPI_THREAD_SINGLE;
  check_mpi(MPI_Query_thread(&provided), "MPI_Query_thread");
  // The caller's communicator may have a fatal error handler; ours must return errors, even
  // from the duplication itself.
  MPI_Errhandler caller_handler;
  check_mpi(MPI_Comm_get_errhandler(comm, &caller_handler), "MPI_Comm_get_errhandler");
  MPI_Comm dup = MPI_COMM_NULL;
  int rc = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_dup(comm, &dup);
  MPI_Comm_set_errhandler(comm, caller_handler);
  MPI_Errhandler_free(&caller_handler);
  check_mpi(rc, "MPI_Comm_dup");
  int size = 0;
  try {
    check_mpi(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check_mpi(MPI_Comm_size(dup, &size), "MPI_Comm_size");

    store_status_t local = STORE_OK;
    if (cfg.replicas < 1 || cfg.replicas > size || cfg.initial_slot_size == 0 ||
        cfg.initial_slot_size > STORE_MAX_VALUE_SIZE || cfg.capacity_hint > kMaxCapacityHint ||
        cfg.helper_max_sleep_us < 0 || cfg.detector < STORE_DETECTOR_NOTIFY || cfg.detector > STORE_DETECTOR_OFF ||
        cfg.helper_max_sleep_us > 1'000'000 || cfg.node_id < -1 || cfg.recovery < STORE_RECOVERY_GLOBAL ||
        cfg.recovery > STORE_RECOVERY_LOCALIZED ||
        (cfg.recovery == STORE_RECOVERY_LOCALIZED && cfg.detector == STORE_DETECTOR_OFF) || cfg.snapshot_keep < 1 ||
        (cfg.restore && cfg.snapshot_dir.empty()) || !durable::valid_name(cfg.snapshot_name) ||
        (!cfg.snapshot_local_dir.empty() && (cfg.snapshot_dir.empty() || cfg.snapshot_local_dir == cfg.snapshot_dir))) {
      local = STORE_ERR_ARG;
    }
    if (local == STORE_OK) local = local_error;
    // Every process learns every other's verdict and the range of each setting in one call.
    const auto as64 = [](auto v) { return static_cast<std::int64_t>(v); };
    // Kept below 2^62, so that negating it cannot overflow.
    const std::int64_t dir_hash = as64(bytes_checksum(cfg.snapshot_dir.data(), cfg.snapshot_dir.size()) >> 2);
    const std::int64_t name_hash = as64(bytes_checksum(cfg.snapshot_name.data(), cfg.snapshot_name.size()) >> 2);
    const std::int64_t local_hash =
        as64(bytes_checksum(cfg.snapshot_local_dir.data(), cfg.snapshot_local_dir.size()) >> 2);
    const std::int64_t mine[] = {
        provided < MPI_THREAD_MULTIPLE ? 1 : 0,
        local != STORE_OK ? 1 : 0,
        as64(cfg.replicas),
        -as64(cfg.replicas),
        as64(cfg.initial_slot_size),
        -as64(cfg.initial_slot_size),
        as64(cfg.capacity_hint),
        -as64(cfg.capacity_hint),
        as64(cfg.helper_max_sleep_us),
        -as64(cfg.helper_max_sleep_us),
        as64(cfg.detector),
        -as64(cfg.detector),
        as64(cfg.recovery),
        -as64(cfg.recovery),
        cfg.node_id >= 0 ? 1 : 0,
        cfg.node_id >= 0 ? -1 : 0,
        dir_hash,
        -dir_hash,
        name_hash,
        -name_hash,
        local_hash,
        -local_hash,
        as64(cfg.snapshot_keep),
        -as64(cfg.snapshot_keep),
        as64(cfg.restore),
        -as64(cfg.restore),
    };
    constexpr int n = sizeof mine / sizeof mine[0];
    std::int64_t mx[n];
    check_mpi(MPI_Allreduce(mine, mx, n, MPI_INT64_T, MPI_MAX, dup), "MPI_Allreduce");
    if (mx[0] != 0) throw StoreError(STORE_ERR_THREAD_LEVEL, "MPI must be initialised with MPI_THREAD_MULTIPLE");
    if (local != STORE_OK) throw StoreError(local, "invalid configuration");
    if (mx[1] != 0) throw StoreError(STORE_ERR_PEER, "another process passed an invalid configuration");
    for (int i = 2; i < n; i += 2) {
      if (mx[i] != -mx[i + 1]) throw StoreError(STORE_ERR_CONFIG_MISMATCH, "configurations differ across processes");
    }
  } catch (...) {
    MPI_Comm_free(&dup);
    throw;
  }

  std::unique_ptr<Store> s(new Store(dup, cfg));
  bool ok = true;
  store_status_t failure = STORE_OK;
  try {
    Core &c = *s->core_;
    c.membership.init(detect_nodes(c.rt.comm, cfg.node_id), cfg.replicas);
    c.rt.build(c.holder.slots.regions());
    s->start_threads();
    warn_missing_fixes(c.rt.rank, c.membership.view()->placement->nodes());
  } catch (const StoreError &e) {
    ok = false;
    failure = e.status();
  } catch (const std::bad_alloc &) {
    ok = false;
    failure = STORE_ERR_NO_MEMORY;
  } catch (const std::exception &) {
    ok = false; // e.g. the helper thread could not be started
    failure = STORE_ERR_INTERNAL;
  }
  if (!all_ok(s->core_->rt.comm, ok)) throw StoreError(ok ? STORE_ERR_PEER : failure, "store creation failed");
  return s;
}

Store::Store(MPI_Comm comm, const Config &config)
    : core_(std::make_unique<Core>(comm, config)), local_dir_(durable::expand_host(config.snapshot_local_dir)) {
  if (config.recovery == STORE_RECOVERY_LOCALIZED) {
    variant_ = std::make_unique<LocalizedVariant>(*core_);
  } else {
    variant_ = std::make_unique<GlobalVariant>(*core_);
  }
  members_ = core_->rt.size;
  // Not fatal here (creation is collective): without it, a store_recover reports the survivors'
  // views as differing (recovery.cpp).
  if (MPI_Comm_group(core_->rt.comm, &origin_) != MPI_SUCCESS) origin_ = MPI_GROUP_NULL;
  fault_set_rank(core_->id);
  last_recovery_.struct_size = sizeof last_recovery_;
}

Store::~Store() {
  end_snapshot();
  abandon_flush();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (origin_ != MPI_GROUP_NULL && !finalized) MPI_Group_free(&origin_);
  if (finalized_) return;
  // Error paths only (creation or finalization failed). The threads stop before anything they
  // use goes away. The window is collective and other processes may not be freeing theirs, so
  // it is left to MPI_Finalize, together with the memory attached to it.
  stop_threads();
  Runtime &rt = core_->rt;
  (void)rt.window.release();
  core_->holder.slots.abandon();
  if (rt.ctrl != MPI_COMM_NULL) MPI_Comm_free(&rt.ctrl);
  if (rt.comm != MPI_COMM_NULL) MPI_Comm_free(&rt.comm);
  rt.free_retired();
}

// The variant's threads exist before the helper starts and until it has stopped: the helper's
// failure handling hands them work.
void Store::start_threads() {
  std::function<void()> on_failures = variant_->start();
  // Requests to the holder side are served there; the rest concern this process as a client.
  core_->rt.helper->start(
      [this](const CtrlMsg &m, int src) {
        RMASTORE_TRACE("helper got type %u #%llu %llu/%u flags %u from %d", static_cast<unsigned>(m.type),
                       (unsigned long long)m.request, (unsigned long long)m.key, m.ns, m.flags, src);
        if (!core_->holder.serve(m, src)) on_message(m, src);
      },
      std::move(on_failures));
}

void Store::stop_threads() {
  variant_->stop();
  core_->rt.stop_helper();
  variant_->after_helper_stopped();
}

void Store::stop_for_mpi_finalize() {
  stop_threads();
}

void Store::finalize() {
  end_snapshot(); // a snapshot not waited for is abandoned
  // After the barrier nobody sends a request any more, so the helpers may stop. A repair still
  // waiting on a process whose helper stopped gives up when its own store stops.
  bool failed = false;
  try {
    require_healthy();
    core_->app.drain();
    // The flush ends after the barrier, with no collective of its own (close_flush): one that
    // a process died in must not fail the finalize of the localized variant, which needs no
    // store_recover.
    if (flush_) flush_->copied.wait(false);
    RMASTORE_FAULT_POINT("finalize.before_barrier");
    failed = variant_->finalize_barrier();
  } catch (...) {
    // A failure known before the call or met in its barrier: store_finalize then abandons the
    // store without destroying it (its collective teardown did not complete), but its threads
    // must not outlive the call: left running, they polled MPI inside the caller's MPI_Finalize
    // and aborted the job (test_finalize_death, both modes).
    abandon_flush();
    stop_threads();
    throw;
  }
  close_flush(!failed);
  stop_threads();
  Runtime &rt = core_->rt;
  if (failed) {
    // Flushing or freeing a window that spans a failed process can wait forever (see
    // recovery.cpp): it is left to MPI_Finalize, with the memory attached to it.
    rt.window->abandon();
    rt.window.reset();
    core_->holder.slots.abandon();
  } else {
    rt.window->close();
    rt.window.reset();
    core_->holder.slots.clear();
  }
  check_mpi(MPI_Comm_free(&rt.ctrl), "MPI_Comm_free");
  check_mpi(MPI_Comm_free(&rt.comm), "MPI_Comm_free");
  rt.free_retired();
  finalized_ = true;
}

// ------------------------------------------------------------------------------------------------
// Messages to this process as a client

void Store::on_message(const CtrlMsg &msg, int source) {
  Core &c = *core_;
  switch (msg.type) {
  case MsgType::kInvalidate: {
    c.cache.invalidate(slot_of(msg), source, msg.grant);
    CtrlMsg ack;
    ack.type = MsgType::kInvalidateAck;
    ack.ns = msg.ns;
    ack.key = msg.key;
    c.rt.helper->send(source, kTagHelper, ack);
    break;
  }
  case MsgType::kRepairNeeded:
  case MsgType::kLost:
  case MsgType::kRevoke:
    variant_->on_message(msg, source);
    break;
  default:
    break;
  }
}

// ------------------------------------------------------------------------------------------------
// Operations

void Store::require_healthy() const {
  if (broken_) throw StoreError(STORE_ERR_MPI, kDisagree);
  if (recover_pending_) {
    throw StoreError(STORE_ERR_PROC_FAILED, "store_recover did not complete: call it again on every survivor");
  }
  if (core_->rt.revoked()) {
    throw StoreError(STORE_ERR_PROC_FAILED, "another process started store_recover: call store_recover");
  }
  variant_->check_usable();
}

void Store::put(std::uint64_t key, const void *buf, std::size_t len) {
  require_healthy();
  if (tx_open_) {
    const auto *b = static_cast<const std::byte *>(buf);
    TxOp &op = tx_values_[key];
    op.del = false;
    op.bytes.assign(b, b + len);
    return;
  }
  if (variant_->mode() == STORE_MODE_TRANSACTION) {
    throw StoreError(STORE_ERR_MODE, "after store_recover, puts must be inside a transaction");
  }
  RMASTORE_FAULT_POINT("put.start");
  variant_->put(key, buf, len);
}

void Store::del(std::uint64_t key) {
  require_healthy();
  if (tx_open_) {
    TxOp &op = tx_values_[key];
    op.del = true;
    op.bytes.clear();
    return;
  }
  if (variant_->mode() == STORE_MODE_TRANSACTION) {
    throw StoreError(STORE_ERR_MODE, "after store_recover, deletes must be inside a transaction");
  }
  variant_->del(key);
}

std::vector<std::uint64_t> Store::list(std::uint64_t first, std::uint64_t last, std::size_t limit, bool *more) {
  require_healthy();
  return variant_->list(first, last, limit, more);
}

void Store::put_many(const std::vector<PutItem> &items) {
  require_healthy();
  if (tx_open_) {
    for (const PutItem &it : items) {
      const auto *b = static_cast<const std::byte *>(it.buf);
      TxOp &op = tx_values_[it.key];
      op.del = false;
      op.bytes.assign(b, b + it.len);
    }
    return;
  }
  if (variant_->mode() == STORE_MODE_TRANSACTION) {
    throw StoreError(STORE_ERR_MODE, "after store_recover, puts must be inside a transaction");
  }
  RMASTORE_FAULT_POINT("put.start");
  variant_->put_many(items);
}

void Store::get_many(std::vector<GetItem> &items) {
  require_healthy();
  if (!tx_open_) {
    variant_->get_many(items);
    return;
  }
  // Keys of the open transaction are read back from it; the others go to the store.
  std::vector<GetItem> rest;
  std::vector<std::size_t> where;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (tx_values_.count(items[i].key) > 0) {
      items[i].status = get(items[i].key, items[i].buf, items[i].capacity, &items[i].len);
    } else {
      rest.push_back(items[i]);
      where.push_back(i);
    }
  }
  variant_->get_many(rest);
  for (std::size_t k = 0; k < rest.size(); ++k) items[where[k]] = rest[k];
}

store_status_t Store::get(std::uint64_t key, void *buf, std::size_t capacity, std::size_t *len) {
  require_healthy();
  if (tx_open_) {
    // A value put or deleted in the open transaction is read back by this process.
    auto it = tx_values_.find(key);
    if (it != tx_values_.end()) {
      if (it->second.del) return STORE_ERR_NOT_FOUND;
      const std::vector<std::byte> &v = it->second.bytes;
      *len = v.size();
      if (v.size() > capacity) return STORE_ERR_TRUNCATED;
      if (!v.empty()) std::memcpy(buf, v.data(), v.size());
      return STORE_OK;
    }
  }
  return variant_->get(key, buf, capacity, len);
}

void Store::tx_begin() {
  require_healthy();
  if (tx_open_) throw StoreError(STORE_ERR_TX_STATE, "a transaction is already open");
  tx_open_ = true;
  tx_values_.clear();
}

void Store::tx_abort() {
  if (!tx_open_) throw StoreError(STORE_ERR_TX_STATE, "no transaction is open");
  tx_open_ = false;
  tx_values_.clear();
}

void Store::tx_commit() {
  if (!tx_open_) throw StoreError(STORE_ERR_TX_STATE, "no transaction is open");
  // Closed whatever happens below: a failed commit is decided by store_recover (global) or by
  // the repairs (localized).
  tx_open_ = false;
  const TxValues values = std::move(tx_values_);
  tx_values_.clear();
  require_healthy();
  if (values.size() == 1 && !values.begin()->second.del) {
    // One key: a put is all or nothing already (tx.hpp).
    const auto &[key, op] = *values.begin();
    variant_->put(key, op.bytes.data(), op.bytes.size());
  } else if (!values.empty()) {
    variant_->commit(values);
  }
}

void Store::back_to_normal() {
  variant_->back_to_normal(tx_open_);
}

// ------------------------------------------------------------------------------------------------
// Introspection

void Store::info(store_info_t &out) const {
  const Core &c = *core_;
  out.size = c.rt.size;
  out.rank = c.rt.rank;
  out.replicas = c.config.replicas;
  out.nodes = c.membership.view()->placement->nodes();
  c.holder.slots.count(out);
  out.helper_cpu_seconds = c.rt.helper ? c.rt.helper->cpu_seconds() : 0.0;
  out.enlargements_served = c.holder.slots.enlargements_served();
  out.requests_sent = c.app.requests_sent;
  out.failed_processes = c.rt.detecting() ? c.rt.failures->failures() : 0;
  variant_->stats(out);
  out.last_snapshot = last_snapshot_;
  out.restored_snapshot = restored_snapshot_;
  out.restored_keys = restored_keys_;
  out.snapshots_skipped = snapshots_skipped_;
  out.flushed_snapshot = local_dir_.empty() ? last_snapshot_ : flushed_snapshot_;
  out.restored_local_parts = restored_local_parts_;
}

} // namespace rmastore::internal
