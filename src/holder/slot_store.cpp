#include "holder/slot_store.hpp"

#include <algorithm>

#include "common/errors.hpp"
#include "common/fault.hpp"

namespace rmastore::internal {

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

SlotStore::SlotStore(const Config &config, Runtime &rt)
    : config_(config),
      allocator_(std::make_unique<SlotAllocator>(config.initial_slot_size, config.capacity_hint,
                                                 [&rt](void *p, std::size_t n) { rt.window->attach(p, n); })) {}

// ------------------------------------------------------------------------------------------------
// For the servers

SlotStore::Block *SlotStore::find_locked(const SlotId &id) {
  auto it = table_.find(id);
  return it == table_.end() ? nullptr : &it->second;
}

SlotStore::Block *SlotStore::find_or_create_locked(const SlotId &id, const CtrlMsg &msg, CtrlMsg *refused) {
  auto it = table_.find(id);
  if (it != table_.end()) return &it->second;
  if (msg.type == MsgType::kLookup || (msg.flags & kRequestNoCreate) != 0) { // a reader or deleter makes none
    *refused = reply_to(msg, ReplyStatus::kNotFound);
    return nullptr;
  }
  Block *made = nullptr;
  *refused = or_refusal(msg, [&] {
    made = create_locked(id, msg.length);
    ++enlargements_served_;
    return reply_to(msg);
  });
  return refused->status == ReplyStatus::kOk ? made : nullptr;
}

SlotStore::Block *SlotStore::create_locked(const SlotId &id, std::size_t length) {
  const std::size_t size = std::max<std::size_t>(length, config_.initial_slot_size);
  return &table_.emplace(id, allocator_->allocate(size, id.key, id.ns)).first->second;
}

SlotStore::Block SlotStore::move_locked(const SlotId &id, Block &block, std::size_t need) {
  RMASTORE_FAULT_POINT("enlarge.serve");
  Block bigger = allocator_->allocate(need, id.key, id.ns);
  SlotAllocator::copy_value(block, bigger);
  allocator_->mark_moved(block); // the copy is counted in `bigger` from now on
  const Block old = block;
  block = bigger;
  ++enlargements_served_;
  return old;
}

void SlotStore::grow_locked(const SlotId &id, Block &block, std::size_t need) {
  RMASTORE_FAULT_POINT("enlarge.serve");
  Block bigger = allocator_->allocate(need, id.key, id.ns);
  SlotAllocator::copy_value(block, bigger);
  owner_of(bigger.base).store(owner_of(block.base).load());
  allocator_->release(block);
  block = bigger;
  ++enlargements_served_;
}

void SlotStore::quarantine_locked(const SlotId &id, Block &block, std::size_t need) {
  Block fresh = allocator_->allocate(std::max<std::size_t>(need, block.capacity), id.key, id.ns);
  quarantined_bytes_ += SlotAllocator::copy_value(block, fresh);
  owner_of(fresh.base).store(owner_of(block.base).load());
  owner_of(block.base).store(kSlotRetired);
  quarantined_.push_back(block);
  block = fresh;
}

void SlotStore::release_locked(const Block &block) {
  allocator_->release(block);
}

void SlotStore::erase_locked(const SlotId &id) {
  auto it = table_.find(id);
  if (it == table_.end()) return;
  allocator_->release(it->second);
  table_.erase(it);
}

// ------------------------------------------------------------------------------------------------
// Reading our own copies

ReadResult SlotStore::read_local(const SlotId &id, void *buf, std::size_t capacity, std::size_t *len) const {
  const std::uint64_t key = id.key;
  SlotAllocator::Block block;
  {
    std::lock_guard lk(mu_);
    auto it = table_.find(id);
    if (it == table_.end()) return ReadResult::kNotFound;
    block = it->second;
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
  if (slot_summed(h)) {
    if (!summed_length(h.length)) return ReadResult::kRetry;
    std::vector<std::byte> whole;
    std::byte *dst = static_cast<std::byte *>(buf);
    if (h.length > capacity) {
      whole.resize(h.length); // the checksum needs all of it
      dst = whole.data();
    }
    copy_from_window(dst, block.base + value_offset(h, block.capacity), h.length);
    if (!summed_valid(h, dst)) return ReadResult::kRetry;
    *len = h.length;
    return h.length > capacity ? ReadResult::kTruncated : ReadResult::kOk;
  }
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

std::size_t SlotStore::local_length(const SlotId &id) const {
  std::lock_guard lk(mu_);
  auto it = table_.find(id);
  if (it == table_.end()) return 0;
  SlotHeader h = load_header(it->second.base);
  return h.version != kNoVersion && h.length <= it->second.capacity ? h.length : 0;
}

std::vector<SlotId> SlotStore::slots() const {
  std::vector<SlotId> out;
  std::lock_guard lk(mu_);
  for (const auto &kv : table_) {
    if (kv.first.ns != Ns::kPending) out.push_back(kv.first);
  }
  return out;
}

std::vector<std::uint64_t> SlotStore::keys_in(std::uint64_t first, std::uint64_t last, std::size_t limit) const {
  std::vector<std::uint64_t> out;
  std::lock_guard lk(mu_);
  for (const auto &[id, block] : table_) {
    if (id.ns != Ns::kValue || id.key < first || id.key > last) continue;
    const SlotHeader h = load_header(block.base);
    const CopyState st = classify_copy(h, block.base, block.capacity, id.key, id.ns);
    // A copy being written (torn) belongs to a put under way: its key exists or is about to.
    if (st == CopyState::kComplete || st == CopyState::kLost || st == CopyState::kTorn) out.push_back(id.key);
  }
  std::sort(out.begin(), out.end());
  if (out.size() > limit) out.resize(limit);
  return out;
}

bool SlotStore::read_local_copy(std::uint64_t key, SlotHeader &header, std::vector<std::byte> &value) const {
  std::lock_guard lk(mu_);
  auto it = table_.find(SlotId{key, Ns::kValue});
  if (it == table_.end()) return false;
  header = load_header(it->second.base);
  if (header.version == kNoVersion || header.length > it->second.capacity) return false;
  const std::byte *v = it->second.base + value_offset(header, it->second.capacity);
  value.assign(v, v + header.length);
  if (in_place(header.length)) return slot_valid(header, value.data());
  if (slot_summed(header)) return summed_valid(header, value.data());
  SlotHeader again = load_header(it->second.base);
  return buffered_valid(header, again);
}

std::vector<SlotStore::LocalCopy> SlotStore::copies() const {
  std::vector<LocalCopy> out;
  std::lock_guard lk(mu_);
  out.reserve(table_.size());
  for (const auto &[id, block] : table_) {
    const SlotHeader h = load_header(block.base);
    out.push_back(LocalCopy{id, h, classify_copy(h, block.base, block.capacity, id.key, id.ns)});
  }
  return out;
}

void SlotStore::mark_lost(const SlotId &id) {
  std::lock_guard lk(mu_);
  auto it = table_.find(id);
  if (it == table_.end()) {
    it = table_.emplace(id, allocator_->allocate(config_.initial_slot_size, id.key, id.ns)).first;
  }
  store_header(it->second.base, lost_header(it->second.capacity, id.key, id.ns));
}

std::optional<SlotStore::Outgoing> SlotStore::outgoing(std::uint64_t key, Ns from, Ns to) const {
  std::lock_guard lk(mu_);
  auto src = table_.find(SlotId{key, from});
  if (src == table_.end()) return std::nullopt;
  SlotHeader h = load_header(src->second.base);
  std::byte *value = src->second.base + value_offset(h, src->second.capacity);
  h.flags = make_flags(flag_bits(h.flags) & ~kFlagHalfB, to, to == Ns::kPending ? flags_tx(h.flags) : 0);
  h.checksum = copy_checksum(h, value);
  return Outgoing{h, value};
}

std::byte *SlotStore::make_room(const SlotId &id, std::size_t length) {
  std::lock_guard lk(mu_);
  auto it = table_.find(id);
  if (it != table_.end() && it->second.capacity < length) {
    allocator_->release(it->second);
    table_.erase(it);
    it = table_.end();
  }
  if (it == table_.end()) {
    it = table_
             .emplace(id, allocator_->allocate(std::max<std::size_t>(length, config_.initial_slot_size), id.key, id.ns))
             .first;
  }
  return it->second.base;
}

void SlotStore::drop(const SlotId &id) {
  std::lock_guard lk(mu_);
  erase_locked(id);
}

// ------------------------------------------------------------------------------------------------
// Lifecycle and introspection

void SlotStore::count(store_info_t &out) const {
  // Counted from the allocator's directory of slots, not from the slot map: the store's mutex
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

void SlotStore::clear() {
  std::lock_guard lk(mu_);
  table_.clear();
  allocator_.reset();
}

void SlotStore::abandon() {
  std::lock_guard lk(mu_);
  table_.clear();
  (void)allocator_.release();
}

} // namespace rmastore::internal
