#include "client/key_cache.hpp"

#include <algorithm>

namespace rmastore::internal {

KeyCache::KeyState &KeyCache::state_locked(const SlotId &id) {
  if (cache_.size() >= kMaxEntries && cache_.find(id) == cache_.end()) {
    // An eighth at a time, so that the cost spreads over many new keys.
    for (auto it = cache_.begin(); it != cache_.end() && cache_.size() > kMaxEntries - kMaxEntries / 8;)
      it = cache_.erase(it);
  }
  auto [it, created] = cache_.try_emplace(id);
  // The common case takes no view: the membership's lock stays off the data path.
  if (!created && it->second.view == membership_.failures()) return it->second;
  {
    const std::shared_ptr<const View> view = membership_.view();
    KeyState &ks = it->second;
    ks.holders.clear();
    ks.view = view->failures;
    std::vector<std::pair<int, int>> order; // (cost, holder); cost ties keep placement order
    const int my_node = view->placement->node_of(id_);
    for (int rank : view->holders_of(id)) {
      HolderCache hc;
      hc.holder = rank;
      ks.holders.push_back(hc);
      const int cost = rank == rt_.rank ? 0 : view->node_of_rank(rank) == my_node ? 1 : 2;
      order.emplace_back(cost * 1024 + static_cast<int>(order.size()), rank);
    }
    std::sort(order.begin(), order.end());
    ks.read_order.clear();
    for (const auto &o : order) ks.read_order.push_back(o.second);
  }
  return it->second;
}

std::vector<HolderCache> KeyCache::holders(const SlotId &id, std::uint64_t *version) {
  std::lock_guard lk(mu_);
  KeyState &ks = state_locked(id);
  *version = ks.version;
  return ks.holders;
}

std::vector<int> KeyCache::read_order(const SlotId &id) {
  std::lock_guard lk(mu_);
  return state_locked(id).read_order;
}

HolderCache KeyCache::at(const SlotId &id, int holder) {
  std::lock_guard lk(mu_);
  HolderCache hc;
  for (const HolderCache &c : state_locked(id).holders) {
    if (c.holder == holder) hc = c;
  }
  return hc;
}

void KeyCache::invalidate(const SlotId &id, int holder, std::uint64_t grant) {
  std::lock_guard lk(mu_);
  KeyState &ks = state_locked(id);
  ks.witnessed = false;
  for (HolderCache &hc : ks.holders) {
    if (hc.holder != holder) continue;
    hc.floor = std::max(hc.floor, grant);
    if (hc.grant <= grant) {
      hc.can_write = false;
      hc.can_read = false;
    }
  }
}

void KeyCache::install(const SlotId &id, int holder, const CtrlMsg &reply, bool write) {
  std::lock_guard lk(mu_);
  KeyState &ks = state_locked(id);
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

void KeyCache::after_read(const SlotId &id, int holder, std::uint64_t address, bool stale, std::size_t length) {
  std::lock_guard lk(mu_);
  for (HolderCache &c : state_locked(id).holders) {
    if (c.holder != holder || c.address != address) continue;
    if (stale) {
      c.can_read = c.can_write = false;
    } else {
      c.length_hint = length;
    }
  }
}

void KeyCache::raise_version(const SlotId &id, std::uint64_t version) {
  std::lock_guard lk(mu_);
  KeyState &ks = state_locked(id);
  ks.version = std::max(ks.version, version);
}

void KeyCache::after_write(const SlotId &id, std::size_t length, const std::vector<Copy> &written) {
  std::lock_guard lk(mu_);
  for (HolderCache &c : state_locked(id).holders) {
    c.length_hint = length;
    for (const Copy &w : written) {
      if (w.holder == c.holder) c.half_b = w.half_b;
    }
  }
}

bool KeyCache::witnessed(const SlotId &id) {
  std::lock_guard lk(mu_);
  return state_locked(id).witnessed;
}

void KeyCache::set_witnessed(const SlotId &id) {
  std::lock_guard lk(mu_);
  state_locked(id).witnessed = true;
}

void KeyCache::forget(std::uint64_t key) {
  std::lock_guard lk(mu_);
  cache_.erase(SlotId{key, Ns::kValue});
  cache_.erase(SlotId{key, Ns::kPending});
}

void KeyCache::clear() {
  std::lock_guard lk(mu_);
  cache_.clear();
}

} // namespace rmastore::internal
