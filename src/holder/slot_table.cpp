#include "holder/slot_table.hpp"

#include <algorithm>
#include <unordered_set>

#include "common/errors.hpp"
#include "common/fault.hpp"

namespace rmastore::internal {
namespace {

bool contains(const std::vector<int> &v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

} // namespace

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

SlotTable::SlotTable(const Config &config, Runtime &rt, Membership &membership)
    : config_(config), rt_(rt), membership_(membership),
      allocator_(std::make_unique<SlotAllocator>(config.initial_slot_size, config.capacity_hint,
                                                 [&rt](void *p, std::size_t n) { rt.window->attach(p, n); })) {}

// ------------------------------------------------------------------------------------------------
// Grants and lookups

SlotTable::HeldSlot *SlotTable::find_or_create_locked(const SlotId &id, const CtrlMsg &msg, CtrlMsg *refused) {
  auto it = table_.find(id);
  if (it != table_.end()) return &it->second;
  if (msg.type == MsgType::kLookup || (msg.flags & kRequestNoCreate) != 0) { // a reader or deleter makes none
    *refused = reply_to(msg, ReplyStatus::kNotFound);
    return nullptr;
  }
  *refused = or_refusal(msg, [&] {
    HeldSlot fresh;
    fresh.block = allocator_->allocate(std::max<std::size_t>(msg.length, config_.initial_slot_size), id.key, id.ns);
    ++enlargements_served_;
    it = table_.emplace(id, std::move(fresh)).first;
    return reply_to(msg);
  });
  return refused->status == ReplyStatus::kOk ? &it->second : nullptr;
}

std::optional<CtrlMsg> SlotTable::serve(const CtrlMsg &msg, int source) {
  std::lock_guard lk(mu_);
  return serve_locked(msg, source, false);
}

std::optional<CtrlMsg> SlotTable::serve_inline(const CtrlMsg &msg, int self) {
  std::lock_guard lk(mu_);
  if (msg.type == MsgType::kLock) return serve_lock_locked(msg, self, true);
  return serve_locked(msg, self, true);
}

std::optional<CtrlMsg> SlotTable::serve_locked(const CtrlMsg &msg, int source, bool inline_call) {
  CtrlMsg refused;
  HeldSlot *found = find_or_create_locked(slot_of(msg), msg, &refused);
  if (found == nullptr) return refused;
  HeldSlot &slot = *found;
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

std::optional<CtrlMsg> SlotTable::grant_or_defer_locked(HeldSlot &slot, const CtrlMsg &msg, int source) {
  std::vector<int> invalidate;
  const CtrlMsg r = or_refusal(msg, [&] { return grant_locked(slot, msg, source, invalidate); });
  if (r.status != ReplyStatus::kOk) return r;
  if (invalidate.empty()) {
    allocator_->release(slot.retired);
    slot.retired = {};
    return r;
  }
  slot.pending_acks = static_cast<int>(invalidate.size());
  slot.stashed_reply = std::make_unique<Deferred>(Deferred{r, source});
  for (int target : invalidate) {
    CtrlMsg inv;
    inv.type = MsgType::kInvalidate;
    inv.ns = msg.ns;
    inv.key = msg.key;
    inv.grant = r.grant - 1;
    send(target, kTagHelper, inv);
  }
  return std::nullopt;
}

CtrlMsg SlotTable::grant_locked(HeldSlot &slot, const CtrlMsg &msg, int source, std::vector<int> &invalidate) {
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
    slot.writer_id = membership_.view()->ids[static_cast<std::size_t>(source)];
  } else if (!contains(slot.readers, source)) {
    slot.readers.push_back(source);
  }
  SlotHeader h;
  CtrlMsg r = copy_reply(msg, slot.block, h);
  // A writer learns here whether the key's records exist already (witnesses.hpp); a reader
  // does not need to.
  if (msg.type == MsgType::kAcquireWrite &&
      classify_copy(h, slot.block.base, slot.block.capacity, msg.key, static_cast<Ns>(msg.ns)) == CopyState::kComplete)
    r.flags |= kReplyLive;
  r.grant = ++grant_clock_;
  return r;
}

void SlotTable::on_invalidate_ack(const CtrlMsg &msg) {
  std::lock_guard lk(mu_);
  auto it = table_.find(slot_of(msg));
  if (it == table_.end() || it->second.pending_acks == 0) return;
  HeldSlot &slot = it->second;
  if (--slot.pending_acks > 0) return;
  // Retire the old slot before the writer hears back: from then on a reader that still used
  // the old address sees the mark and looks again, instead of returning an outdated value.
  allocator_->release(slot.retired);
  slot.retired = {};
  send(slot.stashed_reply->source, kTagReply, slot.stashed_reply->msg);
  slot.stashed_reply.reset();
  dispatch_queued_locked(slot);
}

void SlotTable::dispatch_queued_locked(HeldSlot &slot) {
  while (slot.pending_acks == 0 && !slot.queued.empty()) {
    const Deferred d = slot.queued.front();
    slot.queued.erase(slot.queued.begin());
    if (auto r = grant_or_defer_locked(slot, d.msg, d.source)) send(d.source, kTagReply, *r);
  }
}

// ------------------------------------------------------------------------------------------------
// Locks

void SlotTable::quarantine_locked(const SlotId &id, SlotAllocator::Block &block, std::size_t need) {
  SlotAllocator::Block fresh = allocator_->allocate(std::max<std::size_t>(need, block.capacity), id.key, id.ns);
  SlotAllocator::copy_value(block, fresh);
  owner_of(fresh.base).store(owner_of(block.base).load());
  owner_of(block.base).store(kSlotRetired);
  quarantined_.push_back(block);
  block = fresh;
}

bool SlotTable::owner_dead(std::uint64_t owner, const View &view) const {
  if (owner == kOwnerFree || owner == kSlotRetired) return false;
  return view.id_gone(lock_word_id(owner), *rt_.failures);
}

void SlotTable::grow_locked(const SlotId &id, HeldSlot &slot, std::size_t need) {
  RMASTORE_FAULT_POINT("enlarge.serve");
  SlotAllocator::Block bigger = allocator_->allocate(need, id.key, id.ns);
  SlotAllocator::copy_value(slot.block, bigger);
  owner_of(bigger.base).store(owner_of(slot.block.base).load());
  // Readers that cached the old address find it retired (or reused) and look again.
  allocator_->release(slot.block);
  slot.block = bigger;
  ++enlargements_served_;
}

CtrlMsg SlotTable::grant_lock_locked(const SlotId &id, HeldSlot &slot, const CtrlMsg &msg) {
  if (slot.block.capacity < msg.length) grow_locked(id, slot, msg.length);
  HeldSlot *pending = nullptr;
  if (id.ns == Ns::kValue) {
    const SlotId pid{id.key, Ns::kPending};
    auto pit = table_.find(pid);
    if (pit == table_.end() && (msg.flags & kLockPending) != 0) {
      HeldSlot fresh;
      fresh.block =
          allocator_->allocate(std::max<std::size_t>(msg.length, config_.initial_slot_size), id.key, Ns::kPending);
      pit = table_.emplace(pid, std::move(fresh)).first;
    }
    if (pit != table_.end()) {
      pending = &pit->second;
      if ((msg.flags & kLockPending) != 0 && pending->block.capacity < msg.length)
        grow_locked(pid, *pending, msg.length);
    }
  }
  owner_of(slot.block.base).store(msg.owner, std::memory_order_release);
  SlotHeader h;
  CtrlMsg r = copy_reply(msg, slot.block, h);
  // Empty and lost copies are valid: their headers check.
  const CopyState state = classify_copy(h, slot.block.base, slot.block.capacity, id.key, id.ns);
  if (state != CopyState::kTorn) r.flags |= kReplyValid;
  if (state == CopyState::kLost) r.flags |= kReplyLost;
  if (state == CopyState::kComplete) r.flags |= kReplyLive;
  if (state == CopyState::kDeleted) r.flags |= kReplyDeleted;
  if (pending != nullptr) {
    SlotHeader p = load_header(pending->block.base);
    r.flags |= kReplyHasPending;
    const CopyState ps = classify_copy(p, pending->block.base, pending->block.capacity, id.key, Ns::kPending);
    if (ps != CopyState::kTorn) r.flags |= kReplyPendingValid;
    if (ps == CopyState::kDeleted) r.flags |= kReplyPendingDeleted;
    r.pending_address = reinterpret_cast<std::uintptr_t>(pending->block.base);
    r.pending_capacity = pending->block.capacity;
    r.pending_version = p.version;
    r.pending_length = p.length;
    r.pending_tx = flags_tx(p.flags);
    r.pending_writer = p.writer;
    r.pending_half = (flag_bits(p.flags) & kFlagHalfB) != 0 ? 1 : 0;
  }
  return r;
}

// The owner died holding the lock: what it wrote is kept aside, and a repairer gets the lock.
CtrlMsg SlotTable::break_lock_locked(const SlotId &id, HeldSlot &slot, const CtrlMsg &msg) {
  RMASTORE_FAULT_POINT("lock.break");
  quarantine_locked(id, slot.block, msg.length);
  if (id.ns == Ns::kValue) {
    // A committer writes the pending slot under this lock too.
    auto pit = table_.find(SlotId{id.key, Ns::kPending});
    if (pit != table_.end()) quarantine_locked(pit->first, pit->second.block, 0);
  }
  CtrlMsg r = grant_lock_locked(id, slot, msg);
  r.flags |= kReplyBroken;
  return r;
}

std::optional<CtrlMsg> SlotTable::serve_lock(const CtrlMsg &msg, int source) {
  std::lock_guard lk(mu_);
  return serve_lock_locked(msg, source, false);
}

std::optional<CtrlMsg> SlotTable::serve_lock_locked(const CtrlMsg &msg, int source, bool inline_call) {
  // A request from a process that failed since it sent it is dropped: nobody would release it.
  if (!inline_call && rt_.failures->dead(source)) return std::nullopt;
  const SlotId id = slot_of(msg);
  CtrlMsg refused;
  HeldSlot *found = find_or_create_locked(id, msg, &refused);
  if (found == nullptr) return refused;
  HeldSlot &slot = *found;
  const std::uint64_t owner = owner_of(slot.block.base).load(std::memory_order_acquire);
  if (owner == kOwnerFree || owner == msg.owner)
    return or_refusal(msg, [&] { return grant_lock_locked(id, slot, msg); });
  // Only a repairer's request asks whether the owner died: a busy lock costs a put no view.
  if ((msg.flags & kLockRepair) != 0 && owner_dead(owner, *membership_.view()))
    return or_refusal(msg, [&] { return break_lock_locked(id, slot, msg); });
  if ((msg.flags & kLockTry) != 0) return reply_to(msg, ReplyStatus::kBusy);
  if (inline_call) return std::nullopt; // the agent asks its helper, which queues it
  RMASTORE_TRACE("queues rank %d at %llu/%u: owner %#llx, wanted by %#llx", source, (unsigned long long)id.key, msg.ns,
                 (unsigned long long)owner, (unsigned long long)msg.owner);
  slot.queued.push_back(Deferred{msg, source});
  return std::nullopt;
}

void SlotTable::release_locked(const SlotId &id, HeldSlot &slot, std::uint32_t flags) {
  if ((flags & kUnlockDropPending) != 0 && id.ns == Ns::kValue) {
    auto pit = table_.find(SlotId{id.key, Ns::kPending});
    if (pit != table_.end()) {
      allocator_->release(pit->second.block);
      table_.erase(pit);
    }
  }
  owner_of(slot.block.base).store(kOwnerFree, std::memory_order_release);
}

void SlotTable::serve_unlock(const CtrlMsg &msg) {
  std::lock_guard lk(mu_);
  const SlotId id = slot_of(msg);
  auto it = table_.find(id);
  if (it == table_.end()) return;
  HeldSlot &slot = it->second;
  if (owner_of(slot.block.base).load(std::memory_order_acquire) != msg.owner) {
    // Not (or no longer) its lock: withdraw the requests it has queued.
    std::erase_if(slot.queued, [&](const Deferred &d) { return d.msg.owner == msg.owner; });
    return;
  }
  if ((msg.flags & kUnlockReclaim) != 0 && slot.queued.empty()) {
    reclaim_locked(id);
    return;
  }
  release_locked(id, slot, msg.flags);
  grant_next_locked(id, slot);
}

// A deleted key's slots go back to the allocator (a waiting locker would have been handed the
// tombstone instead). Readers that cached their address find them retired or reused.
void SlotTable::reclaim_locked(const SlotId &id) {
  for (const SlotId &s : {SlotId{id.key, Ns::kPending}, id}) {
    auto it = table_.find(s);
    if (it == table_.end()) continue;
    allocator_->release(it->second.block);
    table_.erase(it);
  }
}

void SlotTable::serve_reclaim(const CtrlMsg &msg, int source) {
  std::lock_guard lk(mu_);
  // Only what the deleter still holds alone: a writer that took a grant after the delete (its
  // request came first) keeps the slot, and writes over the tombstone.
  const auto alone = [&](const HeldSlot &slot) {
    return (slot.writer < 0 || slot.writer == source) && slot.pending_acks == 0 && slot.queued.empty();
  };
  const SlotId vid{msg.key, Ns::kValue}, pid{msg.key, Ns::kPending};
  auto it = table_.find(vid);
  if (it != table_.end()) {
    const HeldSlot &slot = it->second;
    const SlotHeader h = load_header(slot.block.base);
    const bool tombstone =
        classify_copy(h, slot.block.base, slot.block.capacity, msg.key, Ns::kValue) == CopyState::kDeleted &&
        h.version == msg.version;
    if (!tombstone || !alone(slot)) return;
    allocator_->release(slot.block);
    table_.erase(it);
  }
  auto pit = table_.find(pid);
  if (pit != table_.end() && alone(pit->second)) {
    allocator_->release(pit->second.block);
    table_.erase(pit);
  }
}

bool SlotTable::unlock_inline(const CtrlMsg &msg) {
  std::lock_guard lk(mu_);
  const SlotId id = slot_of(msg);
  auto it = table_.find(id);
  if (it == table_.end()) return false;
  HeldSlot &slot = it->second;
  // Only a lock held with nobody waiting: a request of the agent to its own helper may still be
  // on its way, and only a message behind it is sure to withdraw it.
  if (owner_of(slot.block.base).load(std::memory_order_acquire) != msg.owner || !slot.queued.empty()) return false;
  if ((msg.flags & kUnlockReclaim) != 0) {
    reclaim_locked(id);
  } else {
    release_locked(id, slot, msg.flags);
  }
  return true;
}

void SlotTable::grant_next_locked(const SlotId &id, HeldSlot &slot) {
  while (!slot.queued.empty()) {
    const std::uint64_t owner = owner_of(slot.block.base).load(std::memory_order_acquire);
    const Deferred &next = slot.queued.front();
    if (owner != kOwnerFree && owner != next.msg.owner) return;
    const Deferred d = next;
    slot.queued.erase(slot.queued.begin());
    if (rt_.failures->dead(d.source)) continue;
    const CtrlMsg r = or_refusal(d.msg, [&] { return grant_lock_locked(id, slot, d.msg); });
    RMASTORE_TRACE("hands %llu/%u on to rank %d", (unsigned long long)id.key, d.msg.ns, d.source);
    send(d.source, d.msg.reply_tag, r);
  }
}

std::vector<SlotId> SlotTable::after_failures() {
  std::vector<SlotId> orphaned;
  const std::shared_ptr<const View> view = membership_.view();
  std::lock_guard lk(mu_);
  for (auto &[id, slot] : table_) {
    std::erase_if(slot.queued, [&](const Deferred &d) { return rt_.failures->dead(d.source); });
    if (!owner_dead(owner_of(slot.block.base).load(std::memory_order_acquire), *view)) continue;
    // A repairer that queued here before this process knew the owner was dead gets the lock
    // now; it would otherwise wait for a release that never comes.
    auto waiting = std::find_if(slot.queued.begin(), slot.queued.end(),
                                [](const Deferred &d) { return (d.msg.flags & kLockRepair) != 0; });
    if (waiting == slot.queued.end()) {
      orphaned.push_back(id);
      continue;
    }
    const Deferred d = *waiting;
    slot.queued.erase(waiting);
    const CtrlMsg r = or_refusal(d.msg, [&] { return break_lock_locked(id, slot, d.msg); });
    RMASTORE_TRACE("breaks %llu/%u for queued repairer rank %d", (unsigned long long)id.key,
                   static_cast<unsigned>(id.ns), d.source);
    send(d.source, d.msg.reply_tag, r);
  }
  return orphaned;
}

// ------------------------------------------------------------------------------------------------
// Reading our own copies

ReadResult SlotTable::read_local(const SlotId &id, void *buf, std::size_t capacity, std::size_t *len) const {
  const std::uint64_t key = id.key;
  SlotAllocator::Block block;
  {
    std::lock_guard lk(mu_);
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
  if (slot_deleted(h)) return ReadResult::kDeleted;
  *len = h.length;
  return h.length > capacity ? ReadResult::kTruncated : ReadResult::kOk;
}

std::size_t SlotTable::local_length(const SlotId &id) const {
  std::lock_guard lk(mu_);
  auto it = table_.find(id);
  if (it == table_.end()) return 0;
  SlotHeader h = load_header(it->second.block.base);
  return h.version != kNoVersion && h.length <= it->second.block.capacity ? h.length : 0;
}

std::vector<SlotId> SlotTable::slots() const {
  std::vector<SlotId> out;
  std::lock_guard lk(mu_);
  for (const auto &kv : table_) {
    if (kv.first.ns != Ns::kPending) out.push_back(kv.first);
  }
  return out;
}

std::vector<std::uint64_t> SlotTable::keys_in(std::uint64_t first, std::uint64_t last, std::size_t limit) const {
  std::vector<std::uint64_t> out;
  std::lock_guard lk(mu_);
  for (const auto &[id, slot] : table_) {
    if (id.ns != Ns::kValue || id.key < first || id.key > last) continue;
    const SlotHeader h = load_header(slot.block.base);
    const CopyState st = classify_copy(h, slot.block.base, slot.block.capacity, id.key, id.ns);
    // A copy being written (torn) belongs to a put under way: its key exists or is about to.
    if (st == CopyState::kComplete || st == CopyState::kLost || st == CopyState::kTorn) out.push_back(id.key);
  }
  std::sort(out.begin(), out.end());
  if (out.size() > limit) out.resize(limit);
  return out;
}

std::uint64_t SlotTable::dead_owned() const {
  std::uint64_t n = 0;
  const std::shared_ptr<const View> view = membership_.view();
  std::lock_guard lk(mu_);
  for (const auto &kv : table_) {
    if (owner_dead(owner_of(kv.second.block.base).load(), *view)) ++n;
  }
  return n;
}

bool SlotTable::read_local_copy(std::uint64_t key, SlotHeader &header, std::vector<std::byte> &value) const {
  std::lock_guard lk(mu_);
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

// ------------------------------------------------------------------------------------------------
// store_recover

// Numbering changed, and the writers and readers may be gone. Slots a failed process could
// write into (global: it held the write grant; localized: it held the lock, or that of the key's
// value slot) are moved to fresh memory and never reused, so data it sent before failing cannot
// land in memory given to someone else.
void SlotTable::reset_grants() {
  std::lock_guard lk(mu_);
  const std::shared_ptr<const View> view = membership_.view(); // leaves the failed processes out
  const auto failed_owner = [&](const SlotId &id) {
    auto it = table_.find(id);
    return it != table_.end() && owner_dead(owner_of(it->second.block.base).load(), *view);
  };
  std::unordered_set<SlotId, SlotIdHash> unsafe;
  for (const auto &[id, slot] : table_) {
    if (failed_owner(id) || (id.ns == Ns::kPending && failed_owner(SlotId{id.key, Ns::kValue}))) unsafe.insert(id);
  }
  for (auto &[id, slot] : table_) {
    if (slot.retired.base != nullptr) quarantined_.push_back(slot.retired);
    slot.retired = {};
    const bool failed_writer = slot.writer_id >= 0 && view->rank_of_id[static_cast<std::size_t>(slot.writer_id)] < 0;
    if (failed_writer || unsafe.count(id) > 0) quarantine_locked(id, slot.block, 0);
    owner_of(slot.block.base).store(kOwnerFree);
    slot.writer = -1;
    slot.writer_id = -1;
    slot.readers.clear();
    slot.pending_acks = 0;
    slot.stashed_reply.reset();
    slot.queued.clear();
  }
}

std::vector<SlotTable::LocalCopy> SlotTable::copies() const {
  std::vector<LocalCopy> out;
  std::lock_guard lk(mu_);
  out.reserve(table_.size());
  for (const auto &[id, slot] : table_) {
    const SlotHeader h = load_header(slot.block.base);
    out.push_back(LocalCopy{id, h, classify_copy(h, slot.block.base, slot.block.capacity, id.key, id.ns)});
  }
  return out;
}

void SlotTable::mark_lost(const SlotId &id) {
  std::lock_guard lk(mu_);
  auto it = table_.find(id);
  if (it == table_.end()) {
    HeldSlot fresh;
    fresh.block = allocator_->allocate(config_.initial_slot_size, id.key, id.ns);
    it = table_.emplace(id, std::move(fresh)).first;
  }
  store_header(it->second.block.base, lost_header(it->second.block.capacity, id.key, id.ns));
}

std::optional<SlotTable::Outgoing> SlotTable::outgoing(std::uint64_t key, Ns from, Ns to) const {
  std::lock_guard lk(mu_);
  auto src = table_.find(SlotId{key, from});
  if (src == table_.end()) return std::nullopt;
  SlotHeader h = load_header(src->second.block.base);
  std::byte *value = src->second.block.base + value_offset(h, src->second.block.capacity);
  h.flags = make_flags(flag_bits(h.flags) & ~kFlagHalfB, to, to == Ns::kPending ? flags_tx(h.flags) : 0);
  h.checksum = in_place(h.length) ? slot_checksum(h, value) : header_checksum(h);
  return Outgoing{h, value};
}

std::byte *SlotTable::make_room(const SlotId &id, std::size_t length) {
  std::lock_guard lk(mu_);
  auto it = table_.find(id);
  if (it != table_.end() && it->second.block.capacity < length) {
    allocator_->release(it->second.block);
    table_.erase(it);
    it = table_.end();
  }
  if (it == table_.end()) {
    HeldSlot fresh;
    fresh.block = allocator_->allocate(std::max<std::size_t>(length, config_.initial_slot_size), id.key, id.ns);
    it = table_.emplace(id, std::move(fresh)).first;
  }
  return it->second.block.base;
}

void SlotTable::drop(const SlotId &id) {
  std::lock_guard lk(mu_);
  auto it = table_.find(id);
  if (it == table_.end()) return;
  allocator_->release(it->second.block);
  table_.erase(it);
}

// ------------------------------------------------------------------------------------------------
// Lifecycle and introspection

void SlotTable::count(store_info_t &out) const {
  // Counted from the allocator's directory of slots, not from the slot table: the table's lock
  // would stop the helper, and with it every request of the other processes to this one, for
  // the whole walk (test_contract_info_nonblocking). Every slot in use holds a copy of its
  // namespace; slots released or quarantined are marked retired, and a moved slot is marked in
  // the directory until it is released.
  out.local_copies = 0;
  out.local_bytes = 0;
  out.attached_bytes = 0;
  out.attached_regions = 0;
  if (!allocator_) return;
  RMASTORE_FAULT_DELAY("info.walk");
  allocator_->for_each_slot([&](const std::byte *base) {
    SlotHeader h = load_header(base);
    if (h.owner == kSlotRetired || flags_ns(h.flags) != Ns::kValue || h.version == kNoVersion) return;
    if ((flag_bits(h.flags) & kFlagDeleted) != 0) return; // a tombstone is no copy
    ++out.local_copies;
    out.local_bytes += h.length;
  });
  out.attached_bytes = allocator_->attached_bytes();
  out.attached_regions = allocator_->region_count();
}

void SlotTable::clear() {
  std::lock_guard lk(mu_);
  table_.clear();
  allocator_.reset();
}

void SlotTable::abandon() {
  std::lock_guard lk(mu_);
  table_.clear();
  (void)allocator_.release();
}

} // namespace rmastore::internal
