#include "variants/localized/locks.hpp"

#include <algorithm>
#include <iterator>
#include <map>

#include "common/errors.hpp"
#include "common/fault.hpp"
#include "holder/lock_server.hpp"

namespace rmastore::internal {

Copy Lock::copy() const {
  return Copy{req.holder, grant.address, grant.capacity, 0, grant.half != 0};
}

Copy Lock::pending_copy() const {
  return Copy{req.holder, grant.pending_address, grant.pending_capacity, 0, grant.pending_half != 0};
}

std::uint64_t Lock::newest_version() const {
  std::uint64_t v = kNoVersion;
  if ((grant.flags & kReplyValid) != 0) v = std::max(v, grant.version);
  if ((grant.flags & kReplyPendingValid) != 0) v = std::max(v, grant.pending_version);
  return v;
}

CtrlMsg LockClient::lock_msg(std::uint64_t owner, std::size_t length, std::uint32_t flags) {
  CtrlMsg m;
  m.type = MsgType::kLock;
  m.length = length;
  m.owner = owner;
  m.flags = flags;
  return m;
}

std::vector<LockRequest> LockClient::requests(const SlotId &id, std::size_t length, std::uint32_t flags) const {
  std::vector<LockRequest> reqs;
  for (int h : c_.membership.view()->holders_of(id)) reqs.push_back(LockRequest{id, h, length, flags});
  return reqs;
}

std::optional<CtrlMsg> LockClient::unlock_to_send(const LockRequest &req, std::uint64_t owner, std::uint32_t flags) {
  if (c_.rt.failures->dead(req.holder)) return std::nullopt;
  CtrlMsg m;
  m.type = MsgType::kUnlock;
  m.ns = static_cast<std::uint32_t>(req.id.ns);
  m.key = req.id.key;
  m.owner = owner;
  m.flags = flags;
  if (req.holder == c_.rt.rank && c_.holder.locks.unlock_inline(m)) return std::nullopt;
  return m; // through the holder's helper when others wait: it hands the lock on
}

void LockClient::send_unlock(Agent &a, const LockRequest &req, std::uint64_t owner, std::uint32_t flags) {
  if (const std::optional<CtrlMsg> m = unlock_to_send(req, owner, flags)) a.post(req.holder, *m);
}

void LockClient::release(Agent &a, const std::vector<Lock> &locks, std::uint32_t flags) {
  if (locks.empty()) return;
  if (a.kind == Agent::kApplication) {
    std::lock_guard lk(mu_);
    for (const Lock &l : locks) erase_locked(l.req.id, l.req.holder, l.owner);
  }
  // The unlocks to one holder go out packed, kMaxPack to a message, in the order of the locks.
  std::map<int, std::vector<CtrlMsg>> to;
  for (const Lock &l : locks) {
    if (const std::optional<CtrlMsg> m = unlock_to_send(l.req, l.owner, flags)) to[l.req.holder].push_back(*m);
  }
  for (const auto &[holder, msgs] : to) {
    for (std::size_t first = 0; first < msgs.size(); first += kMaxPack)
      a.post(holder, msgs.data() + first, std::min(kMaxPack, msgs.size() - first));
  }
}

LockClient::Cached *LockClient::find_locked(const SlotId &id, int holder) {
  auto it = cache_.find(id);
  if (it == cache_.end()) return nullptr;
  for (Cached &c : it->second) {
    if (c.lock.req.holder == holder) return &c;
  }
  return nullptr;
}

void LockClient::erase_locked(const SlotId &id, int holder, std::uint64_t owner) {
  auto it = cache_.find(id);
  if (it == cache_.end()) return;
  cached_ -=
      std::erase_if(it->second, [&](const Cached &c) { return c.lock.req.holder == holder && c.lock.owner == owner; });
  if (it->second.empty()) cache_.erase(it);
}

void LockClient::from_cache(const std::vector<LockRequest> &reqs, bool cache, std::uint64_t owner,
                            std::vector<std::optional<Lock>> &got, std::vector<Lock> &stale) {
  std::lock_guard lk(mu_);
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    const LockRequest &r = reqs[i];
    if (r.holder == c_.rt.rank) continue; // own slots are locked inline, without a message
    Cached *e = find_locked(r.id, r.holder);
    if (e != nullptr && e->in_use) continue;
    if (e != nullptr) {
      // A commit's lock of a value slot also needs the key's pending slot (kLockPending).
      const CtrlMsg &g = e->lock.grant;
      const bool fits =
          g.capacity >= r.length && (r.flags == 0 || (r.flags == kLockPending && (g.flags & kReplyHasPending) != 0 &&
                                                      g.pending_capacity >= r.length));
      // A failure changes nothing for a lock whose holder lives: nobody else wrote the slot, and
      // only compaction (which empties the cache) renumbers.
      if (cache && fits && r.length <= kMaxCachedLength && !c_.rt.failures->dead(r.holder)) {
        e->in_use = true;
        Lock l = e->lock;
        l.req = r;
        got[i] = l;
        continue;
      }
      stale.push_back(e->lock);
      erase_locked(r.id, r.holder, e->lock.owner);
    }
    if (cache) enlist_locked(r, owner);
  }
}

void LockClient::enlist_locked(const LockRequest &r, std::uint64_t owner) {
  if (r.length > kMaxCachedLength) return;
  cache_[r.id].push_back(Cached{Lock{r, CtrlMsg{}, owner}, true, false});
  ++cached_;
}

void LockClient::enlist(const std::vector<LockRequest> &reqs, std::uint64_t owner) {
  std::lock_guard lk(mu_);
  for (const LockRequest &r : reqs) {
    if (r.holder != c_.rt.rank && find_locked(r.id, r.holder) == nullptr) enlist_locked(r, owner);
  }
}

const Copy *LockClient::written_at(const std::vector<Copy> &written, int holder) {
  const auto w = std::find_if(written.begin(), written.end(), [&](const Copy &c) { return c.holder == holder; });
  return w == written.end() ? nullptr : &*w;
}

void LockClient::set_value(CtrlMsg &g, const Copy &written, std::uint64_t version, std::size_t length) {
  g.version = version;
  g.length = length;
  g.half = written.half_b ? 1 : 0;
  g.flags = (g.flags & (kReplyHasPending | kReplyPendingValid | kReplyPendingDeleted)) | kReplyValid | kReplyLive;
}

void LockClient::keep(Agent &a, const std::vector<Lock> &locks, const Update &update) {
  std::vector<Lock> give_back;
  {
    std::lock_guard lk(mu_);
    for (const Lock &l : locks) {
      Cached *e = find_locked(l.req.id, l.req.holder);
      if (e == nullptr || e->lock.owner != l.owner || !e->in_use) {
        give_back.push_back(l);
        continue;
      }
      // What the holder would answer now: nobody else wrote the slot while this lock was held.
      Lock now = l;
      if (e->revoked || !update(l, now.grant)) {
        give_back.push_back(l);
        erase_locked(l.req.id, l.req.holder, l.owner);
        continue;
      }
      e->lock = now;
      e->in_use = false;
    }
    if (cached_ > kMaxCached) take_idle_locked(give_back);
  }
  release(a, give_back);
}

void LockClient::on_revoke(const CtrlMsg &msg, int source) {
  RMASTORE_FAULT_POINT("lock.revoke");
  CtrlMsg m;
  {
    std::lock_guard lk(mu_);
    const SlotId id = slot_of(msg);
    Cached *e = find_locked(id, source);
    if (e == nullptr || e->lock.owner != msg.owner) return; // released already
    if (e->in_use) {
      e->revoked = true; // keep() gives it back
      return;
    }
    m.type = MsgType::kUnlock;
    m.ns = msg.ns;
    m.key = msg.key;
    m.owner = msg.owner;
    erase_locked(id, source, msg.owner);
  }
  RMASTORE_TRACE("gives back the cached lock of %llu/%u to rank %d", (unsigned long long)msg.key, msg.ns, source);
  c_.rt.helper->send(source, kTagHelper, m);
}

void LockClient::drop_cached(Agent &a) {
  std::vector<Lock> locks;
  {
    std::lock_guard lk(mu_);
    take_idle_locked(locks);
  }
  release(a, locks);
}

void LockClient::take_idle_locked(std::vector<Lock> &out) {
  // Out of the cache before the unlocks go: a kRevoke meanwhile finds nothing to send.
  for (auto it = cache_.begin(); it != cache_.end();) {
    std::erase_if(it->second, [&](const Cached &c) {
      if (c.in_use) return false;
      out.push_back(c.lock);
      --cached_;
      return true;
    });
    it = it->second.empty() ? cache_.erase(it) : std::next(it);
  }
}

std::size_t LockClient::cached() const {
  std::lock_guard lk(mu_);
  return cached_;
}

std::vector<Lock> LockClient::acquire(Agent &a, const std::vector<LockRequest> &reqs, QueueGate *gate, bool cache) {
  struct ViewGuard {
    Agent &a;
    ~ViewGuard() { a.lock_view = -1; }
  } guard{a};
  a.lock_view = c_.rt.failures->failures();
  // One word for each stage of the acquisition, kept with each lock: a lock is released with the
  // word it was taken with, whatever the epoch is by then.
  std::uint64_t owner = a.lock_word();
  const auto ask = [&](const LockRequest &r, std::uint32_t extra) {
    return lock_msg(owner, r.length, r.flags | extra);
  };
  // got[i]: the lock of reqs[i], once held (a delete's request for a slot that does not exist
  // stays empty).
  std::vector<std::optional<Lock>> got(reqs.size());
  std::vector<Lock> reused; // from the cache, held with the words they were taken with
  if (a.kind == Agent::kApplication) {
    std::vector<Lock> stale;
    from_cache(reqs, cache, owner, got, stale);
    release(a, stale);
    for (const std::optional<Lock> &l : got) {
      if (l) reused.push_back(*l);
    }
  }
  const auto held = [&] {
    std::vector<Lock> v;
    for (const std::optional<Lock> &l : got) {
      if (l) v.push_back(*l);
    }
    return v;
  };
  // Registered requests that did not end in the cache.
  const auto unregister = [&] {
    if (!cache) return;
    std::lock_guard lk(mu_);
    for (const LockRequest &r : reqs) erase_locked(r.id, r.holder, owner);
  };
  std::vector<const LockRequest *> asked; // granted or queued somewhere: all get an unlock on failure
  const auto take = [&](const LockRequest &r, const CtrlMsg &reply) -> std::optional<Lock> {
    // A delete locks only the slots that exist (kRequestNoCreate).
    if (reply.status == ReplyStatus::kNotFound && (r.flags & kRequestNoCreate) != 0) return std::nullopt;
    if (reply.status == ReplyStatus::kNoMemory) throw StoreError(STORE_ERR_NO_MEMORY, "a holder is out of memory");
    if (reply.status != ReplyStatus::kOk) throw StoreError(STORE_ERR_INTERNAL, "a holder refused a lock");
    return Lock{r, reply, owner};
  };
  try {
    // Uncontended: all at once.
    std::vector<Engine::Ask> asks;
    std::vector<std::size_t> at;
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      if (got[i]) continue;
      asks.push_back(Engine::Ask{reqs[i].id, reqs[i].holder, ask(reqs[i], kLockTry)});
      asked.push_back(&reqs[i]);
      at.push_back(i);
    }
    const std::vector<CtrlMsg> replies = asks.empty() ? std::vector<CtrlMsg>{} : c_.engine.ask_all(a, asks);
    bool busy = false;
    for (std::size_t j = 0; j < asks.size(); ++j) {
      if (replies[j].status == ReplyStatus::kBusy) {
        busy = true;
        // A remote holder asked the owner for the lock itself; this process's own slots are
        // answered inline, without the helper, so the locker asks.
        if (reqs[at[j]].holder == c_.rt.rank) {
          const int rank = cacher_of(replies[j].owner, *c_.membership.view(), c_.rt);
          if (rank >= 0) a.post(rank, revoke_msg(reqs[at[j]].id, replies[j].owner));
        }
      } else {
        got[at[j]] = take(reqs[at[j]], replies[j]);
      }
    }
    if (!busy) {
      RMASTORE_FAULT_POINT("lock.acquired");
      return held();
    }
    release(a, held());
    reused.clear();
    unregister();
    got.assign(reqs.size(), std::nullopt);
    asked.clear();
    // A new word: the unlock of one of this process's own slots may still wait in its helper's
    // queue (others wait for it, so it was not released inline). Under the same word the queued
    // request would be granted inline as ours, and then released by that unlock under us.
    owner = a.lock_word();
    // Registered again: a lock taken after waiting is cached as well (the key changed writers).
    if (cache) enlist(reqs, owner);
    // Contended: one at a time, in order, queueing, if the gate lets us.
    if (gate != nullptr && !gate->enter()) throw LocksBusy();
    struct QueueGuard {
      QueueGate *g;
      ~QueueGuard() {
        if (g != nullptr) g->leave();
      }
    } queue_guard{gate};
    try {
      for (std::size_t i = 0; i < reqs.size(); ++i) {
        asked.push_back(&reqs[i]);
        got[i] =
            take(reqs[i], c_.engine.ask_all(a, {Engine::Ask{reqs[i].id, reqs[i].holder, ask(reqs[i], 0)}}).front());
        RMASTORE_FAULT_POINT("lock.acquired");
      }
    } catch (const StoreError &) {
      if (gate != nullptr && gate->interrupted()) throw LocksBusy();
      throw;
    }
    return held();
  } catch (const std::exception &e) {
    RMASTORE_TRACE("agent %d gives up its locks of %llu/%u: %s", a.kind, (unsigned long long)reqs.front().id.key,
                   static_cast<unsigned>(reqs.front().id.ns), e.what());
    for (const LockRequest *r : asked) send_unlock(a, *r, owner);
    release(a, reused);
    unregister();
    throw;
  }
}

} // namespace rmastore::internal
