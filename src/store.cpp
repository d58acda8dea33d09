#include "store.hpp"

#include "ulfm.hpp"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <new>

#include "clock.hpp"
#include "errors.hpp"
#include "fault.hpp"
#include "repair.hpp"

namespace rmastore::internal {
namespace {

constexpr std::size_t kFirstReadBytes = 4096;

SlotId slot_of(const CtrlMsg &m) {
  return SlotId{m.key, static_cast<Ns>(m.ns)};
}

bool contains(const std::vector<int> &v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
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
        (cfg.recovery == STORE_RECOVERY_LOCALIZED && cfg.detector == STORE_DETECTOR_OFF)) {
      local = STORE_ERR_ARG;
    }
    if (local == STORE_OK) local = local_error;
    // Every process learns every other's verdict and the range of each setting in one call.
    const auto as64 = [](auto v) { return static_cast<std::int64_t>(v); };
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
    s->placement_ = std::make_shared<Placement>(detect_nodes(s->comm_, cfg.node_id), cfg.replicas);
    Store *raw = s.get();
    s->allocator_ = std::make_unique<SlotAllocator>(cfg.initial_slot_size, cfg.capacity_hint,
                                                    [raw](void *p, std::size_t n) { raw->window_->attach(p, n); });
    s->build_runtime();
    s->start_helper();
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
  if (!all_ok(s->comm_, ok)) throw StoreError(ok ? STORE_ERR_PEER : failure, "store creation failed");
  return s;
}

void Store::build_runtime() {
  check_mpi(MPI_Comm_dup(comm_, &ctrl_), "MPI_Comm_dup");
  check_mpi(MPI_Comm_set_errhandler(ctrl_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  // Fault points on each collective step, so that tests can kill a process at every stage of
  // the rebuild store_recover does.
  RMASTORE_FAULT_POINT("runtime.after_ctrl_dup");
  failures_ = std::make_unique<FailureState>(size_);
  RMASTORE_FAULT_POINT("runtime.before_window");
  // A recovery that lost no process keeps its window (rebuild_window).
  if (!window_) {
    window_ = std::make_unique<RmaWindow>(comm_);
    for (const SlotAllocator::Region &r : allocator_->regions()) window_->attach(r.base, r.bytes);
  }
  RMASTORE_FAULT_POINT("runtime.before_bells");
  bells_ = std::make_unique<Doorbells>(comm_);
  helper_ = std::make_unique<Helper>(ctrl_, *bells_, *failures_, config_.detector, config_.helper_max_sleep_us);
}

// The repairer exists before the helper starts and until it has stopped: the helper's failure
// handling hands it work.
void Store::start_helper() {
  std::function<void()> on_fail;
  if (localized()) {
    repairer_ = std::make_unique<Repairer>(*this);
    repairer_->start();
    on_fail = [this] { on_failures(); };
  }
  helper_->start([this](const CtrlMsg &m, int src) { on_helper_message(m, src); }, std::move(on_fail));
}

// Stops the repair and helper threads and drops the local parts of the runtime; the collective
// parts (window, communicators) are freed by the caller, who knows whether that is safe.
void Store::stop_runtime() {
  if (repairer_) repairer_->stop();
  if (helper_) helper_->stop();
  repairer_.reset();
  helper_.reset();
  bells_.reset();
}

Store::Store(MPI_Comm comm, const Config &config) : comm_(comm), config_(config) {
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  members_ = size_;
  id_ = rank_;
  fault_set_rank(id_);
  ids_.resize(static_cast<std::size_t>(size_));
  rank_of_id_.resize(static_cast<std::size_t>(size_));
  for (int i = 0; i < size_; ++i) ids_[static_cast<std::size_t>(i)] = rank_of_id_[static_cast<std::size_t>(i)] = i;
  app_ = std::make_unique<Agent>(*this, 0);
  last_recovery_.struct_size = sizeof last_recovery_;
}

Store::~Store() {
  if (finalized_) return;
  // Error paths only (creation or finalization failed). The thread stops before anything it
  // uses goes away. The window is collective and other processes may not be freeing theirs, so
  // it is left to MPI_Finalize, together with the memory attached to it.
  stop_runtime();
  (void)window_.release();
  (void)allocator_.release();
  if (ctrl_ != MPI_COMM_NULL) MPI_Comm_free(&ctrl_);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void Store::stop_for_mpi_finalize() {
  stop_runtime();
}

void Store::finalize() {
  // After the barrier nobody sends a request any more, so the helpers may stop. A repair still
  // waiting on a process whose helper stopped gives up when its own store stops.
  require_healthy();
  app_->drain();
  // The localized variant carries on after failures, so its communicator may hold failed
  // processes: a barrier that tolerates them, which also tells every process whether any of
  // them knew of a failure, so that all decide alike how to let go of the window.
  RMASTORE_FAULT_POINT("finalize.before_barrier");
  bool failed = false;
  if (localized()) {
    failed = tolerant_barrier(comm_, *failures_) > 0;
  } else {
    // A process that dies while the others wait here is a process failure, like any other.
    const int rc = MPI_Barrier(comm_);
    if (is_failure_error(rc)) throw StoreError(STORE_ERR_PROC_FAILED, "a process failed during store_finalize");
    check_mpi(rc, "MPI_Barrier");
  }
  stop_runtime();
  if (failed) {
    // Flushing or freeing a window that spans a failed process can wait forever (see
    // recovery.cpp): it is left to MPI_Finalize, with the memory attached to it.
    window_->abandon();
    window_.reset();
    (void)allocator_.release();
  } else {
    window_->close();
    window_.reset();
  }
  {
    std::lock_guard lk(table_mutex_);
    table_.clear();
    allocator_.reset();
  }
  check_mpi(MPI_Comm_free(&ctrl_), "MPI_Comm_free");
  check_mpi(MPI_Comm_free(&comm_), "MPI_Comm_free");
  finalized_ = true;
}

// ------------------------------------------------------------------------------------------------
// Agents

Store::Agent::Agent(Store &s, int k) : store(s), kind(k), reply_tag(k == 0 ? kTagReply : kTagRepairReply) {
  staging.resize(kWriterBytes + kInPlaceLimit);
}

bool Store::Agent::dead(int rank) const {
  return store.detecting() && store.failures_->dead(rank);
}

// A lock wait also ends when the failure count changed since it started (see acquire_locks).
bool Store::Agent::revoked() const {
  if (stop != nullptr && stop->load(std::memory_order_acquire)) return true;
  if (!store.detecting()) return false;
  return store.failures_->revoked() || (lock_view >= 0 && store.failures_->failures() != lock_view);
}

void Store::Agent::check() const {
  store.check_helper();
}

std::uint64_t Store::Agent::lock_word() const {
  return internal::lock_word(store.id_, store.epoch_, kind);
}

void Store::Agent::post(int dest, const CtrlMsg &msg) {
  RMASTORE_TRACE("agent %d posts type %u #%llu %llu/%u flags %u to %d", kind, static_cast<unsigned>(msg.type),
                 (unsigned long long)msg.request, (unsigned long long)msg.key, msg.ns, msg.flags, dest);
  Outgoing &o = outbox_.emplace_back();
  o.msg = msg;
  o.dest = dest;
  const int rc = MPI_Isend(&o.msg, sizeof o.msg, MPI_BYTE, dest, kTagHelper, store.ctrl_, &o.request);
  if (rc != MPI_SUCCESS) {
    outbox_.pop_back();
    if (is_failure_error(rc)) return; // to a failed process: dropped
    check_mpi(rc, "MPI_Isend");
  }
  store.bells_->ring(dest);
}

void Store::Agent::flush() {
  for (auto it = outbox_.begin(); it != outbox_.end();) {
    int done = 0;
    const int rc = MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS && !is_failure_error(rc)) check_mpi(rc, "MPI_Test");
    if (rc == MPI_SUCCESS && !done && !dead(it->dest)) {
      ++it;
      continue;
    }
    auto next = std::next(it);
    if (rc == MPI_SUCCESS && !done) {
      abandoned_sends_.splice(abandoned_sends_.end(), outbox_, it); // MPI keeps the request, and its buffer
    } else {
      outbox_.erase(it);
    }
    it = next;
  }
}

void Store::Agent::drain() {
  Backoff backoff;
  const std::int64_t give_up = monotonic_ns() + 10'000'000'000;
  for (flush(); !outbox_.empty() && monotonic_ns() < give_up; flush()) backoff.pause();
}

// ------------------------------------------------------------------------------------------------
// Holder side

void Store::on_helper_message(const CtrlMsg &msg, int source) {
  RMASTORE_TRACE("helper got type %u #%llu %llu/%u flags %u from %d", static_cast<unsigned>(msg.type),
                 (unsigned long long)msg.request, (unsigned long long)msg.key, msg.ns, msg.flags, source);
  switch (msg.type) {
  case MsgType::kAcquireWrite:
  case MsgType::kLookup:
    if (auto reply = serve(msg, source, false)) helper_->send(source, kTagReply, *reply);
    break;
  case MsgType::kInvalidate:
    on_invalidate(msg, source);
    break;
  case MsgType::kInvalidateAck:
    on_invalidate_ack(msg);
    break;
  case MsgType::kRegister:
    on_register(msg, source);
    break;
  case MsgType::kLock:
    if (auto reply = serve_lock(msg, source, false)) helper_->send(source, msg.reply_tag, *reply);
    break;
  case MsgType::kUnlock:
    serve_unlock(msg, source, false);
    break;
  case MsgType::kRepairNeeded:
    on_repair_needed(msg);
    break;
  case MsgType::kLost:
    on_lost(msg);
    break;
  default:
    break;
  }
}

std::optional<CtrlMsg> Store::serve(const CtrlMsg &msg, int source, bool inline_call) {
  std::lock_guard lk(table_mutex_);
  auto it = table_.find(slot_of(msg));
  if (it == table_.end()) {
    if (msg.type == MsgType::kLookup) return reply_to(msg, ReplyStatus::kNotFound);
    const CtrlMsg refused = or_refusal(msg, [&] {
      HeldSlot fresh;
      fresh.block = allocator_->allocate(std::max<std::size_t>(msg.length, config_.initial_slot_size), msg.key,
                                         static_cast<Ns>(msg.ns));
      ++enlargements_served_;
      it = table_.emplace(slot_of(msg), std::move(fresh)).first;
      return reply_to(msg);
    });
    if (refused.status != ReplyStatus::kOk) return refused;
  }
  HeldSlot &slot = it->second;
  if (slot.pending_acks > 0) {
    if (!inline_call) slot.queued.push_back(Deferred{msg, source});
    return std::nullopt;
  }
  if (inline_call) {
    // The application thread may not wait on its own helper for acks: hand over if needed.
    const bool moves = msg.type == MsgType::kAcquireWrite && slot.block.capacity < msg.length;
    const bool other_writer = msg.type == MsgType::kAcquireWrite && slot.writer >= 0 && slot.writer != source;
    if (other_writer || (moves && !slot.readers.empty())) return std::nullopt;
  }
  return grant_or_defer_locked(slot, msg, source);
}

std::optional<CtrlMsg> Store::grant_or_defer_locked(HeldSlot &slot, const CtrlMsg &msg, int source) {
  std::vector<int> invalidate;
  const CtrlMsg r = or_refusal(msg, [&] { return grant_locked(slot, msg, source, invalidate); });
  if (r.status != ReplyStatus::kOk) return r;
  if (invalidate.empty()) {
    allocator_->release(slot.retired);
    slot.retired = {};
    return r;
  }
  slot.pending_acks = static_cast<int>(invalidate.size());
  slot.stashed_reply = Deferred{r, source};
  for (int target : invalidate) {
    CtrlMsg inv;
    inv.type = MsgType::kInvalidate;
    inv.ns = msg.ns;
    inv.key = msg.key;
    inv.grant = r.grant - 1;
    helper_->send(target, kTagHelper, inv);
  }
  return std::nullopt;
}

CtrlMsg Store::grant_locked(HeldSlot &slot, const CtrlMsg &msg, int source, std::vector<int> &invalidate) {
  if (msg.type == MsgType::kAcquireWrite) {
    if (slot.writer >= 0 && slot.writer != source) invalidate.push_back(slot.writer);
    if (slot.block.capacity < msg.length) {
      // The slot moves. The old copy stays readable until every cached reader has let go, and
      // its value comes along so the key keeps its last complete value if the writer dies.
      RMASTORE_FAULT_POINT("enlarge.serve");
      SlotAllocator::Block bigger = allocator_->allocate(msg.length, msg.key, static_cast<Ns>(msg.ns));
      SlotAllocator::copy_value(slot.block, bigger);
      allocator_->mark_moved(slot.block); // the copy is counted in `bigger` from now on
      slot.retired = slot.block;
      slot.block = bigger;
      for (int reader : slot.readers) {
        if (reader != source && !contains(invalidate, reader)) invalidate.push_back(reader);
      }
      slot.readers.clear();
      ++enlargements_served_;
    }
    slot.writer = source;
    slot.writer_id = ids_[static_cast<std::size_t>(source)];
  } else if (!contains(slot.readers, source)) {
    slot.readers.push_back(source);
  }
  SlotHeader h;
  CtrlMsg r = copy_reply(msg, slot.block, h);
  r.grant = ++slot.last_grant;
  return r;
}

CtrlMsg copy_reply(const CtrlMsg &msg, const SlotAllocator::Block &block, SlotHeader &h) {
  h = load_header(block.base);
  CtrlMsg r = reply_to(msg);
  r.address = reinterpret_cast<std::uintptr_t>(block.base);
  r.capacity = block.capacity;
  r.version = h.version;
  r.length = h.length;
  r.writer = h.writer;
  r.half = (flag_bits(h.flags) & kFlagHalfB) != 0 ? 1 : 0;
  return r;
}

void Store::on_invalidate_ack(const CtrlMsg &msg) {
  std::lock_guard lk(table_mutex_);
  auto it = table_.find(slot_of(msg));
  if (it == table_.end() || it->second.pending_acks == 0) return;
  HeldSlot &slot = it->second;
  if (--slot.pending_acks > 0) return;
  // Retire the old slot before the writer hears back: from then on a reader that still used
  // the old address sees the mark and looks again, instead of returning an outdated value.
  allocator_->release(slot.retired);
  slot.retired = {};
  helper_->send(slot.stashed_reply->source, kTagReply, slot.stashed_reply->msg);
  slot.stashed_reply.reset();
  dispatch_queued_locked(slot);
}

void Store::dispatch_queued_locked(HeldSlot &slot) {
  while (slot.pending_acks == 0 && !slot.queued.empty()) {
    const Deferred d = slot.queued.front();
    slot.queued.pop_front();
    if (auto r = grant_or_defer_locked(slot, d.msg, d.source)) helper_->send(d.source, kTagReply, *r);
  }
}

// ------------------------------------------------------------------------------------------------
// Client side

std::vector<int> Store::holders_of(const SlotId &id, const Placement &p) const {
  // Transaction records are placed by a hash of their key, apart from the values they name.
  const std::uint64_t where = id.ns == Ns::kTxRecord ? mix64(id.key ^ 0x7472616e73616374ULL) : id.key;
  std::vector<int> ids(static_cast<std::size_t>(p.replicas()));
  p.holders(where, ids);
  std::vector<int> ranks;
  for (int i : ids) {
    if (i >= 0) ranks.push_back(rank_of_id_[static_cast<std::size_t>(i)]);
  }
  return ranks;
}

std::shared_ptr<const Placement> Store::placement() const {
  std::lock_guard lk(view_mutex_);
  return placement_;
}

std::vector<int> Store::holders_of(const SlotId &id) const {
  return holders_of(id, *placement());
}

std::vector<int> Store::read_order(const SlotId &id) {
  std::lock_guard lk(cache_mutex_);
  return key_state_locked(id).read_order;
}

int Store::update_view() {
  // Every put and get asks; the failure set rarely changes, so the common answer takes no lock.
  if (!localized() || failures_ == nullptr || failures_->failures() == view_failures_.load()) return view_failures_;
  std::lock_guard lk(view_mutex_);
  if (failures_->failures() == view_failures_.load()) return view_failures_;
  // A new placement object: threads that hold the old one keep using it undisturbed.
  auto next = std::make_shared<Placement>(*placement_);
  int n = 0;
  for (int r = 0; r < size_; ++r) {
    if (failures_->dead(r)) {
      next->remove(ids_[static_cast<std::size_t>(r)]);
      ++n;
    }
  }
  placement_ = std::move(next);
  view_failures_ = n;
  return n;
}

Store::KeyState &Store::key_state_locked(const SlotId &id) {
  auto [it, created] = cache_.try_emplace(id);
  const int view = localized() ? update_view() : 0;
  if (created || it->second.view != view) {
    // Placement changed since (localized variant): the cached addresses may belong to holders
    // that are no longer the key's.
    KeyState &ks = it->second;
    ks.holders.clear();
    ks.view = view;
    const std::shared_ptr<const Placement> p = placement();
    std::vector<std::pair<int, int>> order; // (cost, holder); cost ties keep placement order
    for (int rank : holders_of(id, *p)) {
      HolderCache hc;
      hc.holder = rank;
      ks.holders.push_back(hc);
      const int cost = rank == rank_ ? 0 : p->node_of(ids_[static_cast<std::size_t>(rank)]) == p->node_of(id_) ? 1 : 2;
      order.emplace_back(cost * 1024 + static_cast<int>(order.size()), rank);
    }
    std::sort(order.begin(), order.end());
    ks.read_order.clear();
    for (const auto &o : order) ks.read_order.push_back(o.second);
  }
  return it->second;
}

void Store::on_invalidate(const CtrlMsg &msg, int source) {
  {
    std::lock_guard lk(cache_mutex_);
    KeyState &ks = key_state_locked(slot_of(msg));
    for (HolderCache &hc : ks.holders) {
      if (hc.holder != source) continue;
      hc.floor = std::max(hc.floor, msg.grant);
      if (hc.grant <= msg.grant) {
        hc.can_write = false;
        hc.can_read = false;
      }
    }
  }
  CtrlMsg ack;
  ack.type = MsgType::kInvalidateAck;
  ack.ns = msg.ns;
  ack.key = msg.key;
  helper_->send(source, kTagHelper, ack);
}

void Store::on_register(const CtrlMsg &msg, int source) {
  known_.add(msg.key);
  helper_->send(source, kTagReply, reply_to(msg));
}

void Store::install_reply(const SlotId &id, int holder, const CtrlMsg &reply, bool write) {
  std::lock_guard lk(cache_mutex_);
  KeyState &ks = key_state_locked(id);
  for (HolderCache &hc : ks.holders) {
    if (hc.holder != holder || reply.grant <= hc.floor) continue;
    if (reply.address != hc.address) hc.can_write = false;
    hc.address = reply.address;
    hc.capacity = reply.capacity;
    hc.grant = std::max(hc.grant, reply.grant);
    hc.length_hint = reply.length;
    if (write) hc.half_b = reply.half != 0;
    hc.can_read = true;
    hc.can_write = hc.can_write || write;
    if (write) ks.version = std::max(ks.version, reply.version);
  }
}

std::vector<CtrlMsg> Store::ask_all(Agent &a, const std::vector<Ask> &asks) {
  a.flush();
  const std::size_t n = asks.size();
  std::vector<CtrlMsg> out(n), sent(n);
  std::vector<bool> answered(n, false);
  // Replies are matched to requests by number, not by which receive they land in: a holder
  // asked several times answers in order, but a reply to an earlier request this agent stopped
  // waiting for (a lock wait that started over) can come first and take any receive from it.
  std::deque<std::pair<int, CtrlMsg>> inbox; // (holder, reply); a deque keeps their addresses
  RequestSet rs(&a);                         // declared after the buffers: on unwinding it waits before they go
  const auto receive = [&](int holder) {
    auto &[from, reply] = inbox.emplace_back(holder, CtrlMsg{});
    MPI_Request rr;
    check_mpi(MPI_Irecv(&reply, sizeof(CtrlMsg), MPI_BYTE, from, a.reply_tag, ctrl_, &rr), "MPI_Irecv");
    rs.add(rr, from, RequestSet::Kind::kRecv, sizeof(CtrlMsg));
  };
  for (std::size_t i = 0; i < n; ++i) {
    sent[i] = asks[i].msg;
    sent[i].ns = static_cast<std::uint32_t>(asks[i].id.ns);
    sent[i].key = asks[i].id.key;
    sent[i].request = a.next_request++;
    sent[i].reply_tag = a.reply_tag;
    if (asks[i].holder == rank_ && sent[i].type != MsgType::kRegister) {
      std::optional<CtrlMsg> r =
          sent[i].type == MsgType::kLock ? serve_lock(sent[i], rank_, true) : serve(sent[i], rank_, true);
      if (r) {
        out[i] = *r;
        answered[i] = true;
        continue;
      }
    }
    receive(asks[i].holder);
    // Sent from the agent's outbox, which keeps the message for as long as MPI may read it: a
    // wait that gives up (a lock wait that starts over) leaves the send behind. A send to a
    // failed holder is dropped; its receive reports the failure.
    a.post(asks[i].holder, sent[i]);
    ++a.requests_sent;
  }
  for (std::size_t next = 0; next < inbox.size();) {
    rs.wait_all();
    for (const std::size_t end = inbox.size(); next < end; ++next) {
      const auto &[from, reply] = inbox[next];
      std::size_t i = 0;
      while (i < n && (answered[i] || asks[i].holder != from || sent[i].request != reply.request)) ++i;
      if (i < n) {
        out[i] = reply;
        answered[i] = true;
        continue;
      }
      if (reply.type != MsgType::kReply || reply.request >= a.next_request) {
        throw StoreError(STORE_ERR_INTERNAL, "control reply does not match any request");
      }
      RMASTORE_TRACE("agent %d drops stale reply #%llu from %d", a.kind, (unsigned long long)reply.request, from);
      receive(from); // the reply this receive was meant for is still to come
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!answered[i] || out[i].type != MsgType::kReply) {
      throw StoreError(STORE_ERR_INTERNAL,
                       "control reply does not match its request (holder " + std::to_string(asks[i].holder) +
                           ", request type " + std::to_string(static_cast<unsigned>(sent[i].type)) + " #" +
                           std::to_string(sent[i].request) + (answered[i] ? ", answered with type " : ", unanswered") +
                           (answered[i] ? std::to_string(static_cast<unsigned>(out[i].type)) : std::string()) + ")");
    }
    if (out[i].status == ReplyStatus::kError)
      throw StoreError(STORE_ERR_INTERNAL, "a holder could not serve a request");
  }
  return out;
}

std::vector<CtrlMsg> Store::request(Agent &a, const SlotId &id, const std::vector<int> &holders, const CtrlMsg &msg) {
  std::vector<Ask> asks;
  for (int h : holders) asks.push_back(Ask{id, h, msg});
  std::vector<CtrlMsg> out = ask_all(a, asks);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i].status == ReplyStatus::kOk && (msg.type == MsgType::kAcquireWrite || msg.type == MsgType::kLookup)) {
      install_reply(id, holders[i], out[i], msg.type == MsgType::kAcquireWrite);
    }
  }
  return out;
}

void Store::check_helper() const {
  // Our own helper serves our requests to ourselves; if it stopped, nobody answers them.
  if (helper_->failed()) throw StoreError(STORE_ERR_MPI, "helper thread stopped: " + helper_->failure());
}

void Store::require_healthy() const {
  // Between an unfinished store_recover and the next one the helper threads may not run and the
  // communicators may be new: a request would wait for an answer that never comes.
  if (recover_pending_) {
    throw StoreError(STORE_ERR_PROC_FAILED, "store_recover did not complete: call it again on every survivor");
  }
  if (!detecting()) return;
  if (failures_->revoked()) {
    throw StoreError(STORE_ERR_PROC_FAILED, "another process started store_recover: call store_recover");
  }
  if (!localized() && failures_->any()) {
    throw StoreError(STORE_ERR_PROC_FAILED, "a process of the store failed: call store_recover");
  }
}

void Store::register_key(Agent &a, std::uint64_t key) {
  if (known_.put_again(key)) return;
  CtrlMsg m;
  m.type = MsgType::kRegister;
  Retry retry(*this);
  for (;;) {
    std::vector<int> others;
    for (int r = 0; r < size_; ++r) {
      if (r != rank_ && !(localized() && failures_->dead(r))) others.push_back(r);
    }
    try {
      request(a, SlotId{key, Ns::kValue}, others, m);
      break;
    } catch (const StoreError &e) {
      // Localized: a process that fails meanwhile needs no notice; tell the others again.
      if (!localized() || !retry.after(e)) throw;
    }
  }
  known_.add(key);
}

std::vector<Store::HolderCache> Store::acquire_write(Agent &a, const SlotId &id, std::size_t len,
                                                     std::uint64_t *version) {
  for (int attempt = 0;; ++attempt) {
    std::vector<HolderCache> hcs;
    std::vector<int> need;
    {
      std::lock_guard lk(cache_mutex_);
      KeyState &ks = key_state_locked(id);
      hcs = ks.holders;
      *version = ks.version;
    }
    for (const HolderCache &hc : hcs) {
      if (!hc.can_write || hc.capacity < len) need.push_back(hc.holder);
    }
    if (need.empty()) return hcs;
    // Grants are revoked only by another writer of the same key, which the API forbids while
    // this put runs; a few rounds absorb a revocation that crossed our request.
    if (attempt == 8) throw StoreError(STORE_ERR_INTERNAL, "write grant revoked repeatedly: concurrent writers?");
    CtrlMsg m;
    m.type = MsgType::kAcquireWrite;
    m.length = len;
    for (const CtrlMsg &r : request(a, id, need, m)) {
      if (r.status == ReplyStatus::kNoMemory) throw StoreError(STORE_ERR_NO_MEMORY, "a holder is out of memory");
      if (r.status != ReplyStatus::kOk) throw StoreError(STORE_ERR_INTERNAL, "holder refused a write grant");
    }
  }
}

void Store::ping(Agent &, const std::vector<HolderCache> &hcs) {
  if (config_.detector != STORE_DETECTOR_PING) return;
  for (const HolderCache &hc : hcs) {
    if (hc.holder == rank_) continue;
    char ping = 0;
    const int rc = MPI_Send(&ping, 1, MPI_BYTE, hc.holder, kTagPing, ctrl_);
    if (is_failure_error(rc)) {
      absorb_failures(ctrl_, *failures_);
      throw StoreError(STORE_ERR_PROC_FAILED, "ping to a holder failed");
    }
    check_mpi(rc, "MPI_Send");
  }
}

void Store::put(std::uint64_t key, const void *buf, std::size_t len) {
  require_healthy();
  if (tx_open_) {
    const auto *b = static_cast<const std::byte *>(buf);
    tx_values_[key].assign(b, b + len);
    return;
  }
  if (mode_ == STORE_MODE_TRANSACTION) {
    throw StoreError(STORE_ERR_MODE, "after store_recover, puts must be inside a transaction");
  }
  RMASTORE_FAULT_POINT("put.start");
  if (localized()) {
    put_localized(key, buf, len);
  } else {
    const SlotId id{key, Ns::kValue};
    std::uint64_t version = 0;
    const std::vector<HolderCache> hcs = acquire_write(*app_, id, len, &version);
    SlotHeader h{};
    h.key = key;
    h.version = version + 1;
    h.length = len;
    h.flags = make_flags(0, Ns::kValue);
    write_copies(*app_, hcs, h, buf);
  }
  // A key's first value tells everybody the key exists, so that a recovery that finds all its
  // copies gone reports it lost. Only values whose put returned are promised, so this comes
  // after the copies are written and before the put returns.
  register_key(*app_, key);
}

std::vector<Store::HolderCache> Store::write_copies(Agent &a, const std::vector<HolderCache> &copies, SlotHeader h,
                                                    const void *buf, bool tolerant, bool keep_writer) {
  const SlotId id{h.key, flags_ns(h.flags)};
  if (!localized()) {
    // Taken now, not after success: if this put fails half-way, the next must not reuse the
    // version with another value (a double-buffered reader compares headers, not values).
    std::lock_guard lk(cache_mutex_);
    KeyState &ks = key_state_locked(id);
    ks.version = std::max(ks.version, h.version);
  }
  const std::size_t len = h.length;
  if (!keep_writer) {
    h.epoch = epoch_;
    h.writer = static_cast<std::uint32_t>(id_);
  }
  std::vector<HolderCache> hcs = copies;
  std::vector<bool> half_b(hcs.size(), false);
  ping(a, hcs);
  RequestSet rs(&a);
  // Waits for the copies written so far. Tolerant: copies on processes that failed are dropped
  // from the rest of the protocol; an error if none is left.
  const auto complete = [&] {
    try {
      rs.wait_all();
    } catch (const StoreError &e) {
      if (!tolerant || e.status() != STORE_ERR_PROC_FAILED || failures_->revoked()) throw;
      for (std::size_t i = hcs.size(); i-- > 0;) {
        if (!failures_->dead(hcs[i].holder)) continue;
        hcs.erase(hcs.begin() + static_cast<std::ptrdiff_t>(i));
        half_b.erase(half_b.begin() + static_cast<std::ptrdiff_t>(i));
      }
      if (hcs.empty()) throw;
    }
  };
  // Writes `bytes` at `offset` of one copy: a remote one by RMA, our own by memcpy.
  const auto write = [&](const HolderCache &hc, std::size_t offset, const void *src, std::size_t bytes) {
    if (hc.holder == rank_) {
      copy_to_window(reinterpret_cast<std::byte *>(hc.address) + offset, src, bytes);
      std::atomic_thread_fence(std::memory_order_release);
    } else if (bytes > 0) {
      rs.put(*window_, hc.holder, static_cast<MPI_Aint>(hc.address + offset), src, bytes);
    }
  };
  if (in_place(len)) {
    // One put per copy: header and value side by side in a staging buffer.
    h.checksum = slot_checksum(h, buf);
    std::byte *staging = a.staging.data();
    std::memcpy(staging, reinterpret_cast<const std::byte *>(&h) + kWriterOffset, kWriterBytes);
    if (len > 0) std::memcpy(staging + kWriterBytes, buf, len);
    if (RMASTORE_FAULT_ARMED("put.stale")) {
      // Test build: this process dies with its write to every copy unsent; the test lands the
      // write after the recovery, as a delayed put would.
      for (const HolderCache &hc : hcs) {
        fault_save_write(ids_[static_cast<std::size_t>(hc.holder)], hc.address + kWriterOffset, staging,
                         kWriterBytes + len);
      }
      raise(SIGKILL);
    }
    for (std::size_t i = 0; i < hcs.size(); ++i) {
      if (i > 0) RMASTORE_FAULT_POINT("put.between_copies");
      write(hcs[i], kWriterOffset, staging, kWriterBytes + len);
    }
    complete();
  } else {
    // The value goes to the half each copy's header does not point to; only when every copy
    // has it do the headers switch over.
    for (std::size_t i = 0; i < hcs.size(); ++i) {
      if (i > 0) RMASTORE_FAULT_POINT("put.between_copies");
      half_b[i] = !hcs[i].half_b;
      write(hcs[i], kHeaderBytes + (half_b[i] ? hcs[i].capacity : 0), buf, len);
    }
    complete();
    RMASTORE_FAULT_POINT("put.before_switch");
    SlotHeader ha = h, hb = h;
    hb.flags |= kFlagHalfB;
    ha.checksum = header_checksum(ha);
    hb.checksum = header_checksum(hb);
    for (std::size_t i = 0; i < hcs.size(); ++i) {
      const SlotHeader &hh = half_b[i] ? hb : ha;
      write(hcs[i], kWriterOffset, reinterpret_cast<const std::byte *>(&hh) + kWriterOffset, kWriterBytes);
    }
    complete();
  }
  if (!localized()) {
    std::lock_guard lk(cache_mutex_);
    for (HolderCache &c : key_state_locked(id).holders) {
      c.length_hint = len;
      for (std::size_t i = 0; i < hcs.size(); ++i) {
        if (hcs[i].holder == c.holder) c.half_b = half_b[i];
      }
    }
  }
  return hcs;
}

Store::ReadResult Store::read_local(const SlotId &id, void *buf, std::size_t capacity, std::size_t *len) {
  const std::uint64_t key = id.key;
  SlotAllocator::Block block;
  {
    std::lock_guard lk(table_mutex_);
    auto it = table_.find(id);
    if (it == table_.end()) return ReadResult::kNotFound;
    block = it->second.block;
  }
  // The copy is read without the lock: a writer's put may land meanwhile, and a concurrent move
  // may even retire the slot (its memory stays mapped). The protocols in slot.hpp tell both
  // apart from a good copy.
  SlotHeader h = load_header(block.base);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (h.owner == kSlotRetired) return ReadResult::kRetry;
  const bool mine = h.key == key && flags_ns(h.flags) == id.ns;
  if (mine && slot_empty(h)) return ReadResult::kNotFound;
  if (mine && slot_lost(h)) return ReadResult::kLost;
  if (!mine || h.version == kNoVersion || h.length > block.capacity) return ReadResult::kRetry;
  const auto reread = [&] {
    SlotHeader again;
    std::atomic_thread_fence(std::memory_order_acquire);
    again = load_header(block.base);
    return again;
  };
  if (!in_place(h.length)) {
    if (h.length <= capacity) copy_from_window(buf, block.base + value_offset(h, block.capacity), h.length);
    if (!buffered_valid(h, reread())) return ReadResult::kRetry;
    *len = h.length;
    return h.length > capacity ? ReadResult::kTruncated : ReadResult::kOk;
  }
  // In place: the checksum needs the whole value, even when only its length is wanted.
  std::byte tmp[kInPlaceLimit];
  std::byte *dst = h.length > capacity ? tmp : static_cast<std::byte *>(buf);
  if (h.length > 0) copy_from_window(dst, block.base + kHeaderBytes, h.length);
  if (!slot_valid(h, dst)) return ReadResult::kRetry;
  *len = h.length;
  return h.length > capacity ? ReadResult::kTruncated : ReadResult::kOk;
}

Store::ReadResult Store::read_remote(Agent &a, const SlotId &id, const HolderCache &hc, void *buf, std::size_t capacity,
                                     std::size_t *len) {
  const std::uint64_t key = id.key;
  const MPI_Aint header_at = static_cast<MPI_Aint>(hc.address);
  // An in-place value is fetched with its header in one round trip (guessing its length from
  // the last read); a double-buffered one must be read after its header, which says where.
  std::size_t fetch = 0;
  if (in_place(hc.length_hint)) {
    fetch = std::min<std::size_t>({capacity, static_cast<std::size_t>(hc.capacity),
                                   std::max<std::size_t>(hc.length_hint, kFirstReadBytes), kInPlaceLimit});
  }
  SlotHeader h;
  RequestSet rs(&a);
  ping(a, {hc});
  rs.get(*window_, hc.holder, header_at, &h, sizeof h);
  if (fetch > 0) rs.get(*window_, hc.holder, header_at + static_cast<MPI_Aint>(kHeaderBytes), buf, fetch);
  rs.wait_all();
  if (h.owner == kSlotRetired || h.capacity != hc.capacity) return ReadResult::kStale;
  // Another key's slot: ours moved away and the slot was reused. Look the key up again.
  if (h.key != key || flags_ns(h.flags) != id.ns) return ReadResult::kStale;
  if (slot_empty(h)) return ReadResult::kNotFound;
  if (slot_lost(h)) return ReadResult::kLost;
  if (h.version == kNoVersion || h.length > h.capacity) return ReadResult::kRetry;

  if (!in_place(h.length)) {
    SlotHeader again;
    if (h.length <= capacity) {
      rs.get(*window_, hc.holder, header_at + static_cast<MPI_Aint>(value_offset(h, hc.capacity)), buf, h.length);
      rs.wait_all();
    }
    rs.get(*window_, hc.holder, header_at, &again, sizeof again);
    rs.wait_all();
    if (!buffered_valid(h, again)) return ReadResult::kRetry;
    *len = h.length;
    return h.length > capacity ? ReadResult::kTruncated : ReadResult::kOk;
  }

  std::byte tmp[kInPlaceLimit];
  std::byte *dst = static_cast<std::byte *>(buf);
  std::size_t have = fetch;
  if (h.length > capacity) {
    dst = tmp; // the checksum needs all of it
    have = 0;
  }
  if (h.length > have) {
    rs.get(*window_, hc.holder, header_at + static_cast<MPI_Aint>(kHeaderBytes + have), dst + have, h.length - have);
    rs.wait_all();
  }
  if (!slot_valid(h, dst)) return ReadResult::kRetry;
  *len = h.length;
  return h.length > capacity ? ReadResult::kTruncated : ReadResult::kOk;
}

Store::ReadResult Store::read_copy(Agent &a, const SlotId &id, int holder, void *buf, std::size_t capacity,
                                   std::size_t *len) {
  if (holder == rank_) return read_local(id, buf, capacity, len);
  HolderCache hc;
  {
    std::lock_guard lk(cache_mutex_);
    for (const HolderCache &c : key_state_locked(id).holders) {
      if (c.holder == holder) hc = c;
    }
  }
  if (!hc.can_read) {
    CtrlMsg m;
    m.type = MsgType::kLookup;
    // The reply is used for this read even if an invalidation overtook it (then it is not
    // cached): a moved slot is marked retired, which the read below detects.
    const CtrlMsg reply = request(a, id, {holder}, m).front();
    if (reply.status == ReplyStatus::kNotFound) return ReadResult::kNotFound;
    if (reply.status != ReplyStatus::kOk) throw StoreError(STORE_ERR_INTERNAL, "lookup failed");
    hc.holder = holder;
    hc.address = reply.address;
    hc.capacity = reply.capacity;
    hc.length_hint = reply.length;
  }
  const ReadResult r = read_remote(a, id, hc, buf, capacity, len);
  std::lock_guard lk(cache_mutex_);
  for (HolderCache &c : key_state_locked(id).holders) {
    if (c.holder != holder || c.address != hc.address) continue;
    if (r == ReadResult::kStale) c.can_read = c.can_write = false;
    if (r == ReadResult::kOk) c.length_hint = *len;
  }
  return r;
}

store_status_t Store::get(std::uint64_t key, void *buf, std::size_t capacity, std::size_t *len) {
  require_healthy();
  if (tx_open_) {
    // A value put in the open transaction is read back by this process.
    auto it = tx_values_.find(key);
    if (it != tx_values_.end()) {
      *len = it->second.size();
      if (it->second.size() > capacity) return STORE_ERR_TRUNCATED;
      if (!it->second.empty()) std::memcpy(buf, it->second.data(), it->second.size());
      return STORE_OK;
    }
  }
  if (localized()) return get_localized(key, buf, capacity, len);
  const SlotId id{key, Ns::kValue};
  // The cheapest copy. A reader keeps to its copy while a put lands there: switching to another
  // copy could return an older value than the one it just read, because a put reaches its
  // copies at different times.
  int chosen = -1;
  {
    std::lock_guard lk(cache_mutex_);
    chosen = key_state_locked(id).read_order.front();
  }
  Backoff backoff;
  for (;;) {
    switch (read_copy(*app_, id, chosen, buf, capacity, len)) {
    case ReadResult::kOk:
      last_read_holder_ = chosen;
      return STORE_OK;
    case ReadResult::kNotFound:
      return STORE_ERR_NOT_FOUND;
    case ReadResult::kLost:
      return STORE_ERR_DATA_LOST;
    case ReadResult::kTruncated:
      return STORE_ERR_TRUNCATED;
    case ReadResult::kRetry:
    case ReadResult::kStale:
      break;
    }
    backoff.pause();
  }
}

// Localized variant: a holder may have failed, or be new and not have the key yet (the repair is
// under way): then the other holders are asked before the answer is "not found", and a key
// this process knows existed, of which no holder has a copy, is reported lost.
store_status_t Store::get_localized(std::uint64_t key, void *buf, std::size_t capacity, std::size_t *len) {
  const SlotId id{key, Ns::kValue};
  Backoff backoff;
  Retry retry(*this);
  for (;;) {
    const bool after_failure = failures_->failures() > 0;
    bool again = false;
    for (const int holder : read_order(id)) {
      ReadResult r;
      try {
        r = read_copy(*app_, id, holder, buf, capacity, len);
      } catch (const StoreError &e) {
        // The holder failed: placement changes, and the next round reads another copy.
        if (!retry.after(e)) throw;
        again = true;
        break;
      }
      if (r == ReadResult::kOk) {
        last_read_holder_ = holder;
        return STORE_OK;
      }
      if (r == ReadResult::kTruncated) return STORE_ERR_TRUNCATED;
      if (r == ReadResult::kLost) return STORE_ERR_DATA_LOST;
      if (r == ReadResult::kRetry || r == ReadResult::kStale) {
        again = true;
        break;
      }
      if (!after_failure) return STORE_ERR_NOT_FOUND; // kNotFound: with no failure, one answer will do
    }
    if (!again) {
      return known_.known_or_lost(key) ? STORE_ERR_DATA_LOST : STORE_ERR_NOT_FOUND;
    }
    backoff.pause();
  }
}

// ------------------------------------------------------------------------------------------------
// Introspection

void Store::info(store_info_t &out) const {
  out.size = size_;
  out.rank = rank_;
  out.replicas = config_.replicas;
  out.nodes = placement()->nodes();
  // Counted from the allocator's directory of slots, not from the slot table: the table's lock
  // would stop the helper, and with it every request of the other processes to this one, for
  // the whole walk (test_contract_info_nonblocking). Every slot in use holds a copy of its namespace; slots released or
  // quarantined are marked retired, and a moved slot is marked in the directory until it is released.
  out.local_copies = 0;
  out.local_bytes = 0;
  out.attached_bytes = 0;
  out.attached_regions = 0;
  if (allocator_) {
    RMASTORE_FAULT_DELAY("info.walk");
    allocator_->for_each_slot([&](const std::byte *base) {
      SlotHeader h = load_header(base);
      if (h.owner == kSlotRetired || flags_ns(h.flags) != Ns::kValue || h.version == kNoVersion) return;
      ++out.local_copies;
      out.local_bytes += h.length;
    });
    out.attached_bytes = allocator_->attached_bytes();
    out.attached_regions = allocator_->region_count();
  }
  out.helper_cpu_seconds = helper_ ? helper_->cpu_seconds() : 0.0;
  out.enlargements_served = enlargements_served_;
  out.requests_sent = app_->requests_sent;
  out.failed_processes = detecting() ? failures_->failures() : 0;
  if (repairer_) repairer_->stats(out);
}

bool Store::read_local_copy(std::uint64_t key, SlotHeader &header, std::vector<std::byte> &value) const {
  std::lock_guard lk(table_mutex_);
  auto it = table_.find(SlotId{key, Ns::kValue});
  if (it == table_.end()) return false;
  header = load_header(it->second.block.base);
  if (header.version == kNoVersion || header.length > it->second.block.capacity) return false;
  const std::byte *v = it->second.block.base + value_offset(header, it->second.block.capacity);
  value.assign(v, v + header.length);
  if (in_place(header.length)) return slot_valid(header, value.data());
  SlotHeader again = load_header(it->second.block.base);
  return buffered_valid(header, again);
}

} // namespace rmastore::internal
