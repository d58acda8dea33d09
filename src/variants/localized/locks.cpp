#include "variants/localized/locks.hpp"

#include <algorithm>
#include <map>

#include "common/errors.hpp"
#include "common/fault.hpp"

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

std::vector<Lock> LockClient::acquire(Agent &a, const std::vector<LockRequest> &reqs, QueueGate *gate) {
  struct ViewGuard {
    Agent &a;
    ~ViewGuard() { a.lock_view = -1; }
  } guard{a};
  a.lock_view = c_.rt.failures->failures();
  // One word for the whole acquisition, kept with each lock: a lock is released with the word
  // it was taken with, whatever the epoch is by then.
  const std::uint64_t owner = a.lock_word();
  const auto ask = [&](const LockRequest &r, std::uint32_t extra) {
    return lock_msg(owner, r.length, r.flags | extra);
  };
  std::vector<Lock> held;
  std::vector<const LockRequest *> asked; // granted or queued somewhere: all get an unlock on failure
  const auto take = [&](const LockRequest &r, const CtrlMsg &reply) {
    // A delete locks only the slots that exist (kRequestNoCreate).
    if (reply.status == ReplyStatus::kNotFound && (r.flags & kRequestNoCreate) != 0) return;
    if (reply.status == ReplyStatus::kNoMemory) throw StoreError(STORE_ERR_NO_MEMORY, "a holder is out of memory");
    if (reply.status != ReplyStatus::kOk) throw StoreError(STORE_ERR_INTERNAL, "a holder refused a lock");
    held.push_back(Lock{r, reply, owner});
  };
  try {
    // Uncontended: all at once.
    std::vector<Engine::Ask> asks;
    for (const LockRequest &r : reqs) {
      asks.push_back(Engine::Ask{r.id, r.holder, ask(r, kLockTry)});
      asked.push_back(&r);
    }
    const std::vector<CtrlMsg> replies = c_.engine.ask_all(a, asks);
    bool busy = false;
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      if (replies[i].status == ReplyStatus::kBusy) {
        busy = true;
      } else {
        take(reqs[i], replies[i]);
      }
    }
    if (!busy) {
      RMASTORE_FAULT_POINT("lock.acquired");
      return held;
    }
    release(a, held);
    held.clear();
    asked.clear();
    // Contended: one at a time, in order, queueing, if the gate lets us.
    if (gate != nullptr && !gate->enter()) throw LocksBusy();
    struct QueueGuard {
      QueueGate *g;
      ~QueueGuard() {
        if (g != nullptr) g->leave();
      }
    } queue_guard{gate};
    try {
      for (const LockRequest &r : reqs) {
        asked.push_back(&r);
        take(r, c_.engine.ask_all(a, {Engine::Ask{r.id, r.holder, ask(r, 0)}}).front());
        RMASTORE_FAULT_POINT("lock.acquired");
      }
    } catch (const StoreError &) {
      if (gate != nullptr && gate->interrupted()) throw LocksBusy();
      throw;
    }
    return held;
  } catch (const std::exception &e) {
    RMASTORE_TRACE("agent %d gives up its locks of %llu/%u: %s", a.kind, (unsigned long long)reqs.front().id.key,
                   static_cast<unsigned>(reqs.front().id.ns), e.what());
    for (const LockRequest *r : asked) send_unlock(a, *r, owner);
    throw;
  }
}

} // namespace rmastore::internal
