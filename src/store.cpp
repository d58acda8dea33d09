#include "store.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <new>

#include "errors.hpp"

namespace rmastore::internal {
namespace {

constexpr std::size_t kFirstReadBytes = 4096;

CtrlMsg refusal(const CtrlMsg &msg, ReplyStatus status) {
  CtrlMsg r;
  r.type = MsgType::kReply;
  r.status = status;
  r.key = msg.key;
  r.request = msg.request;
  return r;
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

std::unique_ptr<Store> Store::create(MPI_Comm comm, const Config &cfg) {
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
        cfg.helper_max_sleep_us < 0 || cfg.helper_max_sleep_us > 1'000'000 || cfg.node_id < -1) {
      local = STORE_ERR_ARG;
    }
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
    s->ctrl_ = MPI_COMM_NULL;
    check_mpi(MPI_Comm_dup(s->comm_, &s->ctrl_), "MPI_Comm_dup");
    check_mpi(MPI_Comm_set_errhandler(s->ctrl_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    s->placement_ = std::make_unique<Placement>(detect_nodes(s->comm_, cfg.node_id), cfg.replicas);
    s->window_ = std::make_unique<RmaWindow>(s->comm_);
    s->allocator_ = std::make_unique<SlotAllocator>(
        cfg.initial_slot_size, cfg.capacity_hint, [w = s->window_.get()](void *p, std::size_t n) { w->attach(p, n); });
    s->bells_ = std::make_unique<Doorbells>(s->comm_);
    s->helper_ = std::make_unique<Helper>(s->ctrl_, *s->bells_, cfg.helper_max_sleep_us);
    Store *raw = s.get();
    s->helper_->start([raw](const CtrlMsg &m, int src) { raw->on_helper_message(m, src); });
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

Store::Store(MPI_Comm comm, const Config &config) : comm_(comm), config_(config) {
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  staging_.resize(kWriterBytes + kStagingLimit);
}

Store::~Store() {
  if (finalized_) return;
  // Error paths only (creation or finalization failed). The thread stops before anything it
  // uses goes away. The window is collective and other processes may not be freeing theirs, so
  // it is left to MPI_Finalize, together with the memory attached to it.
  if (helper_) helper_->stop();
  helper_.reset();
  bells_.reset();
  (void)window_.release();
  (void)allocator_.release();
  if (ctrl_ != MPI_COMM_NULL) MPI_Comm_free(&ctrl_);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void Store::finalize() {
  // After the barrier nobody sends a request any more, so the helpers may stop.
  check_mpi(MPI_Barrier(comm_), "MPI_Barrier");
  helper_->stop();
  helper_.reset();
  bells_.reset();
  window_->close();
  window_.reset();
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
// Holder side

void Store::on_helper_message(const CtrlMsg &msg, int source) {
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
  default:
    break;
  }
}

std::optional<CtrlMsg> Store::serve(const CtrlMsg &msg, int source, bool inline_call) {
  std::lock_guard lk(table_mutex_);
  auto it = table_.find(msg.key);
  if (it == table_.end()) {
    if (msg.type == MsgType::kLookup) return refusal(msg, ReplyStatus::kNotFound);
    HeldSlot fresh;
    try {
      fresh.block = allocator_->allocate(std::max<std::size_t>(msg.length, config_.initial_slot_size), msg.key);
    } catch (const std::bad_alloc &) {
      return refusal(msg, ReplyStatus::kNoMemory);
    } catch (const StoreError &) {
      return refusal(msg, ReplyStatus::kNoMemory); // the window refused another region
    }
    ++enlargements_served_;
    it = table_.emplace(msg.key, std::move(fresh)).first;
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
  CtrlMsg r;
  try {
    r = grant_locked(slot, msg, source, invalidate);
  } catch (const std::bad_alloc &) {
    return refusal(msg, ReplyStatus::kNoMemory);
  } catch (const StoreError &) {
    return refusal(msg, ReplyStatus::kNoMemory); // the window refused another region
  }
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
      SlotAllocator::Block bigger = allocator_->allocate(msg.length, msg.key);
      SlotHeader old;
      std::memcpy(&old, slot.block.base, sizeof old);
      std::size_t keep = kWriterBytes;
      if (old.version != kNoVersion && old.length <= slot.block.capacity) keep += old.length;
      std::memcpy(bigger.base + kWriterOffset, slot.block.base + kWriterOffset, keep);
      slot.retired = slot.block;
      slot.block = bigger;
      for (int reader : slot.readers) {
        if (reader != source && !contains(invalidate, reader)) invalidate.push_back(reader);
      }
      slot.readers.clear();
      ++enlargements_served_;
    }
    slot.writer = source;
  } else if (!contains(slot.readers, source)) {
    slot.readers.push_back(source);
  }
  SlotHeader h;
  std::memcpy(&h, slot.block.base, sizeof h);
  CtrlMsg r;
  r.type = MsgType::kReply;
  r.key = msg.key;
  r.request = msg.request;
  r.address = reinterpret_cast<std::uintptr_t>(slot.block.base);
  r.capacity = slot.block.capacity;
  r.version = h.version;
  r.length = h.length;
  r.grant = ++slot.last_grant;
  return r;
}

void Store::on_invalidate_ack(const CtrlMsg &msg) {
  std::lock_guard lk(table_mutex_);
  auto it = table_.find(msg.key);
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

Store::KeyState &Store::key_state_locked(std::uint64_t key) {
  auto [it, created] = cache_.try_emplace(key);
  if (created) {
    std::vector<int> ids(static_cast<std::size_t>(placement_->replicas()));
    placement_->holders(key, ids);
    for (int id : ids) {
      if (id < 0) continue;
      HolderCache hc;
      hc.holder = id;
      it->second.holders.push_back(hc);
    }
  }
  return it->second;
}

void Store::on_invalidate(const CtrlMsg &msg, int source) {
  {
    std::lock_guard lk(cache_mutex_);
    KeyState &ks = key_state_locked(msg.key);
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
  ack.key = msg.key;
  helper_->send(source, kTagHelper, ack);
}

void Store::install_reply(std::uint64_t key, int holder, const CtrlMsg &reply, bool write) {
  std::lock_guard lk(cache_mutex_);
  KeyState &ks = key_state_locked(key);
  for (HolderCache &hc : ks.holders) {
    if (hc.holder != holder || reply.grant <= hc.floor) continue;
    if (reply.address != hc.address) hc.can_write = false;
    hc.address = reply.address;
    hc.capacity = reply.capacity;
    hc.grant = std::max(hc.grant, reply.grant);
    hc.length_hint = reply.length;
    hc.can_read = true;
    hc.can_write = hc.can_write || write;
    if (write) ks.version = std::max(ks.version, reply.version);
  }
}

std::vector<CtrlMsg> Store::request(std::uint64_t key, const std::vector<int> &holders, const CtrlMsg &msg) {
  const std::size_t n = holders.size();
  std::vector<CtrlMsg> out(n), replies(n);
  std::vector<CtrlMsg> sent(n, msg);
  std::vector<bool> answered(n, false);
  RequestSet rs; // declared after the buffers: on unwinding it waits before they go
  for (std::size_t i = 0; i < n; ++i) {
    sent[i].request = next_request_++;
    if (holders[i] == rank_) {
      if (auto r = serve(sent[i], rank_, true)) {
        out[i] = *r;
        answered[i] = true;
        continue;
      }
    }
    MPI_Request rr, sr;
    check_mpi(MPI_Irecv(&replies[i], sizeof(CtrlMsg), MPI_BYTE, holders[i], kTagReply, ctrl_, &rr), "MPI_Irecv");
    rs.add(rr, holders[i], sizeof(CtrlMsg));
    check_mpi(MPI_Isend(&sent[i], sizeof(CtrlMsg), MPI_BYTE, holders[i], kTagHelper, ctrl_, &sr), "MPI_Isend");
    rs.add(sr, holders[i], sizeof(CtrlMsg));
    bells_->ring(holders[i]);
    ++requests_sent_;
  }
  wait(rs);
  for (std::size_t i = 0; i < n; ++i) {
    if (!answered[i]) out[i] = replies[i];
    if (out[i].request != sent[i].request || out[i].type != MsgType::kReply) {
      throw StoreError(STORE_ERR_INTERNAL, "control reply does not match its request");
    }
    if (out[i].status == ReplyStatus::kOk) {
      install_reply(key, holders[i], out[i], msg.type == MsgType::kAcquireWrite);
    }
  }
  return out;
}

void Store::wait(RequestSet &rs) {
  rs.wait_all(bells_.get(), [this] {
    // Our own helper serves our requests to ourselves; if it stopped, nobody answers them.
    if (helper_->failed()) throw StoreError(STORE_ERR_MPI, "helper thread stopped: " + helper_->failure());
  });
}

void Store::put(std::uint64_t key, const void *buf, std::size_t len) {
  std::vector<HolderCache> hcs;
  std::uint64_t version = 0;
  for (int attempt = 0;; ++attempt) {
    std::vector<int> need;
    {
      std::lock_guard lk(cache_mutex_);
      KeyState &ks = key_state_locked(key);
      hcs = ks.holders;
      version = ks.version;
    }
    for (const HolderCache &hc : hcs) {
      if (!hc.can_write || hc.capacity < len) need.push_back(hc.holder);
    }
    if (need.empty()) break;
    // Grants are revoked only by another writer of the same key, which the API forbids while
    // this put runs; a few rounds absorb a revocation that crossed our request.
    if (attempt == 8) throw StoreError(STORE_ERR_INTERNAL, "write grant revoked repeatedly: concurrent writers?");
    CtrlMsg m;
    m.type = MsgType::kAcquireWrite;
    m.key = key;
    m.length = len;
    for (const CtrlMsg &r : request(key, need, m)) {
      if (r.status == ReplyStatus::kNoMemory) throw StoreError(STORE_ERR_NO_MEMORY, "a holder is out of memory");
      if (r.status != ReplyStatus::kOk) throw StoreError(STORE_ERR_INTERNAL, "holder refused a write grant");
    }
  }

  SlotHeader h{};
  h.key = key;
  h.version = version + 1;
  {
    // Taken now, not after success: if this put fails half-way, the next must not reuse the
    // version with another value (a sequenced reader compares versions, not values).
    std::lock_guard lk(cache_mutex_);
    KeyState &ks = key_state_locked(key);
    ks.version = std::max(ks.version, h.version);
  }
  h.length = len;
  h.epoch = epoch_;
  h.writer = static_cast<std::uint32_t>(rank_);
  const auto *hw = reinterpret_cast<const std::byte *>(&h) + kWriterOffset;
  // Writes `bytes` at `offset` of every copy: remote ones by RMA, our own by memcpy.
  RequestSet rs;
  const auto to_all = [&](std::size_t offset, const void *src, std::size_t bytes) {
    for (const HolderCache &hc : hcs) {
      if (hc.holder == rank_) {
        std::memcpy(reinterpret_cast<std::byte *>(hc.address) + offset, src, bytes);
        std::atomic_thread_fence(std::memory_order_release);
      } else if (bytes > 0) {
        rs.put(*window_, hc.holder, static_cast<MPI_Aint>(hc.address + offset), src, bytes);
      }
    }
  };
  if (sequenced(len)) {
    h.flags = kFlagWriting;
    h.checksum = header_checksum(h);
    to_all(kWriterOffset, hw, kWriterBytes);
    wait(rs);
    to_all(kHeaderBytes, buf, len);
    wait(rs);
    h.flags = 0;
    h.checksum = header_checksum(h);
    to_all(kWriterOffset, hw, kWriterBytes);
  } else {
    h.checksum = slot_checksum(h, buf);
    if (len <= kStagingLimit) {
      // One put per copy: header and value side by side in a staging buffer.
      std::memcpy(staging_.data(), hw, kWriterBytes);
      if (len > 0) std::memcpy(staging_.data() + kWriterBytes, buf, len);
      to_all(kWriterOffset, staging_.data(), kWriterBytes + len);
    } else {
      to_all(kHeaderBytes, buf, len);
      to_all(kWriterOffset, hw, kWriterBytes);
    }
  }
  wait(rs);
  std::lock_guard lk(cache_mutex_);
  for (HolderCache &hc : key_state_locked(key).holders) hc.length_hint = len;
}

Store::ReadResult Store::read_local(std::uint64_t key, void *buf, std::size_t capacity, std::size_t *len) {
  SlotAllocator::Block block;
  {
    std::lock_guard lk(table_mutex_);
    auto it = table_.find(key);
    if (it == table_.end()) return ReadResult::kNotFound;
    block = it->second.block;
  }
  // The copy is read without the lock: a writer's put may land meanwhile, and a concurrent move
  // may even retire the slot (its memory stays mapped). The protocols in slot.hpp tell both
  // apart from a good copy.
  SlotHeader h;
  std::memcpy(&h, block.base, sizeof h);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (h.state != kSlotLive) return ReadResult::kRetry;
  if (slot_empty(h) && h.key == key) return ReadResult::kNotFound;
  if (h.version == kNoVersion || h.key != key || h.length > block.capacity || h.flags != 0) {
    return ReadResult::kRetry; // torn, or moved away: look again
  }
  const std::byte *value = block.base + kHeaderBytes;
  std::vector<std::byte> tmp;
  std::byte *dst = static_cast<std::byte *>(buf);
  if (h.length > capacity) {
    if (sequenced(h.length)) {
      // Only the length is wanted: a header that stays the same across a re-read is current.
      SlotHeader again;
      std::memcpy(&again, block.base, sizeof again);
      if (!sequenced_valid(h, again)) return ReadResult::kRetry;
      *len = h.length;
      return ReadResult::kTruncated;
    }
    tmp.resize(h.length);
    dst = tmp.data();
  }
  if (h.length > 0) std::memcpy(dst, value, h.length);
  bool ok;
  if (sequenced(h.length)) {
    std::atomic_thread_fence(std::memory_order_acquire);
    SlotHeader again;
    std::memcpy(&again, block.base, sizeof again);
    ok = sequenced_valid(h, again);
  } else {
    ok = slot_valid(h, dst);
  }
  if (!ok) return ReadResult::kRetry;
  *len = h.length;
  return h.length > capacity ? ReadResult::kTruncated : ReadResult::kOk;
}

Store::ReadResult Store::read_remote(std::uint64_t key, const HolderCache &hc, void *buf, std::size_t capacity,
                                     std::size_t *len) {
  const MPI_Aint header_at = static_cast<MPI_Aint>(hc.address);
  const MPI_Aint value_at = static_cast<MPI_Aint>(hc.address + kHeaderBytes);
  // A checksummed value is fetched with its header in one round trip (guessing its length from
  // the last read); a sequenced one must be read after its header, so nothing is guessed.
  std::size_t fetch = 0;
  if (!sequenced(hc.length_hint)) {
    fetch = std::min<std::size_t>({capacity, static_cast<std::size_t>(hc.capacity),
                                   std::max<std::size_t>(hc.length_hint, kFirstReadBytes), kChecksumLimit});
  }
  SlotHeader h;
  RequestSet rs;
  rs.get(*window_, hc.holder, header_at, &h, sizeof h);
  if (fetch > 0) rs.get(*window_, hc.holder, value_at, buf, fetch);
  wait(rs);
  if (h.state != kSlotLive || h.capacity != hc.capacity) return ReadResult::kStale;
  // Another key's slot: ours moved away and the slot was reused. Look the key up again.
  if (h.key != key) return ReadResult::kStale;
  if (slot_empty(h)) return ReadResult::kNotFound;
  if (h.version == kNoVersion || h.length > h.capacity || h.flags != 0) return ReadResult::kRetry;

  if (sequenced(h.length)) {
    SlotHeader again;
    if (h.length <= capacity) {
      rs.get(*window_, hc.holder, value_at, buf, h.length);
      wait(rs);
    }
    rs.get(*window_, hc.holder, header_at, &again, sizeof again);
    wait(rs);
    if (!sequenced_valid(h, again)) return ReadResult::kRetry;
    *len = h.length;
    return h.length > capacity ? ReadResult::kTruncated : ReadResult::kOk;
  }

  std::vector<std::byte> tmp;
  std::byte *dst = static_cast<std::byte *>(buf);
  std::size_t have = fetch;
  if (h.length > capacity) {
    tmp.resize(h.length); // checksummed values are small; the checksum needs all of it
    dst = tmp.data();
    have = 0;
  }
  if (h.length > have) {
    rs.get(*window_, hc.holder, value_at + static_cast<MPI_Aint>(have), dst + have, h.length - have);
    wait(rs);
  }
  if (!slot_valid(h, dst)) return ReadResult::kRetry;
  *len = h.length;
  return h.length > capacity ? ReadResult::kTruncated : ReadResult::kOk;
}

store_status_t Store::get(std::uint64_t key, void *buf, std::size_t capacity, std::size_t *len) {
  // Cheapest copy: our own, else one on our node, else the first in placement order. A reader
  // keeps to its copy while a put lands there: switching to another copy could return an older
  // value than the one it just read, because a put reaches its copies at different times.
  int chosen = -1, best = 3;
  {
    std::lock_guard lk(cache_mutex_);
    for (const HolderCache &hc : key_state_locked(key).holders) {
      const int cost = hc.holder == rank_ ? 0 : placement_->node_of(hc.holder) == placement_->node_of(rank_) ? 1 : 2;
      if (cost < best) {
        best = cost;
        chosen = hc.holder;
      }
    }
  }
  Backoff backoff;
  for (;;) {
    ReadResult r;
    if (chosen == rank_) {
      r = read_local(key, buf, capacity, len);
    } else {
      HolderCache hc;
      {
        std::lock_guard lk(cache_mutex_);
        for (const HolderCache &c : key_state_locked(key).holders) {
          if (c.holder == chosen) hc = c;
        }
      }
      if (!hc.can_read) {
        CtrlMsg m;
        m.type = MsgType::kLookup;
        m.key = key;
        // The reply is used for this read even if an invalidation overtook it (then it is not
        // cached): a moved slot is marked retired, which the read below detects.
        const CtrlMsg reply = request(key, {chosen}, m).front();
        if (reply.status == ReplyStatus::kNotFound) return STORE_ERR_NOT_FOUND;
        if (reply.status != ReplyStatus::kOk) throw StoreError(STORE_ERR_INTERNAL, "lookup failed");
        hc.address = reply.address;
        hc.capacity = reply.capacity;
        hc.length_hint = reply.length;
      }
      r = read_remote(key, hc, buf, capacity, len);
      std::lock_guard lk(cache_mutex_);
      for (HolderCache &c : key_state_locked(key).holders) {
        if (c.holder != chosen || c.address != hc.address) continue;
        if (r == ReadResult::kStale) c.can_read = c.can_write = false;
        if (r == ReadResult::kOk) c.length_hint = *len;
      }
    }
    switch (r) {
    case ReadResult::kOk:
      last_read_holder_ = chosen;
      return STORE_OK;
    case ReadResult::kNotFound:
      return STORE_ERR_NOT_FOUND;
    case ReadResult::kTruncated:
      return STORE_ERR_TRUNCATED;
    case ReadResult::kRetry:
    case ReadResult::kStale:
      break;
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
  out.nodes = placement_->nodes();
  std::lock_guard lk(table_mutex_);
  out.local_copies = 0;
  out.local_bytes = 0;
  for (const auto &kv : table_) {
    SlotHeader h;
    std::memcpy(&h, kv.second.block.base, sizeof h);
    if (h.version == kNoVersion) continue;
    ++out.local_copies;
    out.local_bytes += h.length;
  }
  out.attached_bytes = allocator_ ? allocator_->attached_bytes() : 0;
  out.attached_regions = allocator_ ? static_cast<int>(allocator_->regions().size()) : 0;
  out.helper_cpu_seconds = helper_ ? helper_->cpu_seconds() : 0.0;
  out.enlargements_served = enlargements_served_;
  out.requests_sent = requests_sent_;
}

bool Store::read_local_copy(std::uint64_t key, SlotHeader &header, std::vector<std::byte> &value) const {
  std::lock_guard lk(table_mutex_);
  auto it = table_.find(key);
  if (it == table_.end()) return false;
  std::memcpy(&header, it->second.block.base, sizeof header);
  if (header.version == kNoVersion || header.length > it->second.block.capacity) return false;
  value.assign(it->second.block.base + kHeaderBytes, it->second.block.base + kHeaderBytes + header.length);
  if (!sequenced(header.length)) return slot_valid(header, value.data());
  SlotHeader again;
  std::memcpy(&again, it->second.block.base, sizeof again);
  return sequenced_valid(header, again);
}

} // namespace rmastore::internal
