// Localized variant, part 2: background repair.
//
// Each process has a repair thread. It sleeps until its helper reports a failure, then brings
// back to their full number of copies the slots it coordinates: those whose holders changed
// with the failure and of which it is now the first holder. The first holder of a key under
// the new placement held a copy before whenever any holder survived (rendezvous placement ranks
// the survivors of the old holders first), so it usually sends its own copy. Holders also ask
// the coordinator to repair slots whose lock a failed process held (locks.cpp).
//
// Repairing a slot is a locked operation like a put (locks.cpp): the coordinator takes the locks
// of every current holder's copy (taking over those of failed owners), finds the newest
// complete value among them, writes it to the holders that lack it and releases the locks.
// Interrupted transactions are decided here: a pending value newer than the key's value, whose
// committer's decision record (repaired first, so that every later repair reads the same
// record) names its transaction, is rolled forward; otherwise it is dropped. A key of which no
// complete copy is left is marked lost at its holders and every process is told.
//
// The repair thread is a second client thread (agent) next to the application thread: the
// helper thread must never wait on other processes, because it serves their lock requests,
// including those of repairs.
//
// The thread repairs one slot at a time, so it must not block on one slot's busy lock while
// other slots wait: the busy lock's owner may itself be queued for a lock that a failed process
// holds and that only one of those other repairs would take over and release. Seen with two
// deaths and transactions: a survivor's commit held its keys up to k and queued for key k+1,
// whose lock the dead repairer of k+1 held; the survivor's own repair thread, asked to repair
// k+1, first queued for a key below it that the commit held, and nothing moved again. So the
// thread queues for a lock only when that slot is all it has to do, and new work ends such a
// wait; otherwise a busy slot is put off (LocksBusy) and tried again after the others. Its first,
// non-queueing attempt (kLockTry) still takes over failed owners' locks, and giving them back
// hands them to whoever queued for them.
#include "variants/localized/repair.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "common/decide.hpp"
#include "common/errors.hpp"
#include "common/fault.hpp"

namespace rmastore::internal {

Repairer::Repairer(Core &core, LockClient &locks) : c_(core), locks_(locks), agent_(core.rt, core.id, Agent::kRepair) {
  agent_.stop = &interrupt_;
  const std::shared_ptr<const View> view = c_.membership.view();
  repaired_ = view->placement;
  repaired_failures_ = view->failures;
}

Repairer::~Repairer() {
  stop();
}

void Repairer::start() {
  thread_ = std::thread([this] { loop(); });
}

void Repairer::stop() {
  {
    std::lock_guard lk(mu_);
    stop_.store(true, std::memory_order_release);
    interrupt_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  agent_.drain(); // its unlocks and loss notices are still in MPI's hands
}

void Repairer::request(const SlotId &id) {
  {
    std::lock_guard lk(mu_);
    requested_.insert(id);
    if (queueing_) interrupt_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

void Repairer::view_changed() {
  {
    std::lock_guard lk(mu_);
    view_dirty_ = true;
    if (queueing_) interrupt_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

bool Repairer::enter() {
  std::lock_guard lk(mu_);
  if (stop_.load() || others_ > 0 || !requested_.empty() || view_dirty_) return false;
  queueing_ = true;
  return true;
}

void Repairer::leave() {
  std::lock_guard lk(mu_);
  queueing_ = false;
  interrupt_.store(stop_.load(), std::memory_order_release);
}

void Repairer::stats(store_info_t &out) const {
  std::uint64_t backlog = backlog_.load();
  {
    std::lock_guard lk(mu_);
    backlog += requested_.size();
    // A failure that no complete pass has covered yet.
    if (view_dirty_ || c_.rt.failures->failures() != repaired_failures_) ++backlog;
  }
  // Slots here whose lock a failed process holds wait for their coordinator's repair.
  backlog += c_.holder.locks.dead_owned();
  out.repair_backlog = backlog;
  out.repaired_slots = repaired_slots_.load();
  out.repaired_bytes = repaired_bytes_.load();
}

void Repairer::loop() {
  for (;;) {
    std::set<SlotId> work;
    bool dirty = false;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stop_.load() || view_dirty_ || !requested_.empty(); });
      if (stop_.load()) return;
      work.swap(requested_);
      dirty = view_dirty_;
      view_dirty_ = false;
    }
    std::shared_ptr<const Placement> now;
    int now_failures = 0;
    if (dirty) {
      now_failures = c_.membership.follow(*c_.rt.failures);
      const std::shared_ptr<const View> view = c_.membership.view();
      now = view->placement;
      for (const SlotId &id : candidates(*view, *now)) work.insert(id);
    }
    backlog_.store(work.size());
    bool complete = true;
    std::vector<SlotId> failed; // by other errors than a failure: tried again in a while
    std::vector<SlotId> busy;   // a lock was busy and the thread could not queue: tried again next
    std::size_t left = work.size();
    for (auto it = work.begin(); it != work.end(); ++it) {
      if (stop_.load()) return;
      {
        // What enter_queue weighs: while other slots wait, this one may not block the thread.
        std::lock_guard lk(mu_);
        others_ = --left + busy.size() + failed.size();
      }
      try {
        repair_slot(*it);
        RMASTORE_TRACE("repaired %llu/%u", (unsigned long long)it->key, static_cast<unsigned>(it->ns));
        repaired_slots_.fetch_add(1);
      } catch (const LocksBusy &) {
        if (stop_.load()) return;
        RMASTORE_TRACE("repair of %llu/%u put off: a lock is busy", (unsigned long long)it->key,
                       static_cast<unsigned>(it->ns));
        busy.push_back(*it); // still in the backlog
        continue;
      } catch (const StoreError &e) {
        if (stop_.load()) return;
        RMASTORE_TRACE("repair of %llu/%u: %s", (unsigned long long)it->key, static_cast<unsigned>(it->ns), e.what());
        if (e.status() == STORE_ERR_PROC_FAILED) {
          // Placement changed or a holder failed: what is left is done again under the new
          // placement, whose difference from the last complete pass covers it. Until the
          // failure set knows more than before, wait a little rather than spin.
          const int before = c_.rt.failures->failures();
          record_failures(c_.rt.ctrl, *c_.rt.failures);
          if (c_.rt.failures->failures() == before) std::this_thread::sleep_for(std::chrono::microseconds(500));
          std::lock_guard lk(mu_);
          requested_.insert(it, work.end());
          view_dirty_ = true;
          complete = false;
          break;
        }
        std::fprintf(stderr, "rmastore: repair of key %llu failed: %s\n", static_cast<unsigned long long>(it->key),
                     e.what());
        failed.push_back(*it);
      } catch (const std::exception &e) {
        std::fprintf(stderr, "rmastore: repair of key %llu failed: %s\n", static_cast<unsigned long long>(it->key),
                     e.what());
        failed.push_back(*it);
      }
      backlog_.fetch_sub(1);
    }
    std::unique_lock lk(mu_);
    others_ = 0;
    // Back into the request set before the backlog drops, so that stats() always counts them.
    requested_.insert(busy.begin(), busy.end());
    requested_.insert(failed.begin(), failed.end());
    backlog_.store(0);
    if (complete && dirty) {
      repaired_ = now;
      repaired_failures_ = now_failures;
    }
    if (!failed.empty()) {
      // Still counted in the backlog; a pause, or the same error would repeat at once.
      cv_.wait_for(lk, std::chrono::milliseconds(100), [&] { return stop_.load(); });
    } else if (!busy.empty() && busy.size() == work.size()) {
      // Every slot was busy: their lockers need time, not another round of lock requests at once.
      cv_.wait_for(lk, std::chrono::milliseconds(1), [&] { return stop_.load(); });
    }
  }
}

std::vector<SlotId> Repairer::candidates(const View &view, const Placement &now) {
  std::shared_ptr<const Placement> before;
  {
    std::lock_guard lk(mu_);
    before = repaired_;
  }
  // Whatever the table holds (values and transaction records), and the keys recorded here.
  std::vector<SlotId> ids = c_.holder.slots.slots();
  std::vector<std::uint64_t> recorded = c_.holder.witnesses.all();
  std::sort(recorded.begin(), recorded.end());
  for (std::uint64_t key : recorded) ids.push_back(SlotId{key, Ns::kValue});
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  const int keepers = 2 * now.replicas();
  std::vector<SlotId> out;
  for (const SlotId &id : ids) {
    const std::vector<int> hs = view.holders_of(id, now);
    if (hs.empty()) continue;
    if (id.ns != Ns::kValue) {
      if (hs.front() == c_.rt.rank && hs != view.holders_of(id, *before)) out.push_back(id);
      continue;
    }
    // A value's repair also restores its records: it is due when its holders or its witnesses
    // changed.
    if (hs.front() == c_.rt.rank) {
      if (view.ranking_of(id.key, keepers, now) != view.ranking_of(id.key, keepers, *before)) out.push_back(id);
      continue;
    }
    // Its holders all failed: the new first holder has no copy and may not know the key. The
    // processes that recorded it tell it to repair it, which finds the key lost.
    const std::vector<int> old = view.holders_of(id, *before);
    if (std::find(old.begin(), old.end(), hs.front()) == old.end() &&
        std::binary_search(recorded.begin(), recorded.end(), id.key)) {
      CtrlMsg m;
      m.type = MsgType::kRepairNeeded;
      m.ns = static_cast<std::uint32_t>(Ns::kValue);
      m.key = id.key;
      agent_.post(hs.front(), m);
    }
  }
  return out;
}

bool Repairer::tx_committed(int committer, std::uint64_t tx) {
  return repair_slot(SlotId{static_cast<std::uint64_t>(committer), Ns::kTxRecord}) == tx;
}

std::uint64_t Repairer::repair_slot(const SlotId &id) {
  RMASTORE_FAULT_DELAY("repair.slot");
  // Our own copy's length sizes the slots of holders that get it.
  const std::size_t mine = c_.holder.slots.local_length(id);
  Agent &a = agent_;
  std::vector<Lock> locks = locks_.acquire(a, locks_.requests(id, mine, kLockRepair), this);
  RMASTORE_TRACE("repair of %llu/%u holds its %zu locks", (unsigned long long)id.key, static_cast<unsigned>(id.ns),
                 locks.size());
  std::uint32_t unlock_flags = 0;
  try {
    std::vector<CopyReport> copies, pending;
    std::vector<int> holders;
    for (const Lock &l : locks) {
      const CtrlMsg &g = l.grant;
      holders.push_back(l.req.holder);
      CopyState state = CopyState::kTorn;
      if ((g.flags & kReplyLost) != 0) {
        state = CopyState::kLost;
      } else if ((g.flags & kReplyDeleted) != 0) {
        state = CopyState::kDeleted;
      } else if ((g.flags & kReplyValid) != 0) {
        state = g.version == kNoVersion ? CopyState::kEmpty : CopyState::kComplete;
      }
      copies.push_back(CopyReport{l.req.holder, state, g.version, g.length, g.writer, 0});
      if (id.ns == Ns::kValue && (g.flags & kReplyHasPending) != 0 && g.pending_version != kNoVersion) {
        pending.push_back(CopyReport{l.req.holder,
                                     (g.flags & kReplyPendingDeleted) != 0 ? CopyState::kDeleted
                                     : (g.flags & kReplyPendingValid) != 0 ? CopyState::kComplete
                                                                           : CopyState::kTorn,
                                     g.pending_version, g.pending_length, g.pending_writer, g.pending_tx});
      }
    }
    // With no complete copy, tombstone or lost marker left, whether the key existed is asked of
    // the processes that record it (holders included: a witness may have become a holder).
    const bool is_value = id.ns == Ns::kValue;
    const auto says = [](const CopyReport &c) { return c.state != CopyState::kEmpty && c.state != CopyState::kTorn; };
    const bool decided_by_copies =
        std::any_of(copies.begin(), copies.end(), says) || std::any_of(pending.begin(), pending.end(), says);
    const bool known =
        is_value && !decided_by_copies &&
        c_.engine.tell_witnesses(a, MsgType::kWitnessQuery, {{id.key, c_.membership.view()->keepers_of(id.key)}});
    // A transaction's pending value newer than the value: its committer failed mid-commit. Its
    // decision record is repaired first, so that every later repair reads the same record.
    const SlotDecision d = decide_slot(
        id.ns == Ns::kValue, holders, copies, pending, known,
        [&](std::uint32_t committer, std::uint64_t tx) { return tx_committed(static_cast<int>(committer), tx); });
    if (d.drop_pending) unlock_flags = kUnlockDropPending;
    const std::uint64_t version = d.version;
    const std::uint64_t length = d.length;
    const bool from_pending = d.roll_forward;
    // The key's records go to its witnesses under the current placement, before its locks are
    // released: the next locker finds complete copies (or a lost marker) and relies on them.
    const auto record = [&] {
      if (is_value) {
        c_.engine.tell_witnesses(a, MsgType::kWitness, {{id.key, c_.membership.view()->witnesses_of(id.key)}});
      }
    };
    if (d.outcome != SlotDecision::Outcome::kRestore) {
      if (d.outcome == SlotDecision::Outcome::kLost) {
        mark_lost(id, locks);
        record();
      } else if (is_value) {
        // The key does not exist (a deleted key's repair, or a put that died before writing):
        // the slots the locks made go again.
        unlock_flags |= kUnlockReclaim | kUnlockDropPending;
      }
      locks_.release(a, locks, unlock_flags);
      return kNoVersion;
    }
    std::vector<Copy> targets;
    std::vector<Lock *> target_locks;
    for (Lock &l : locks) {
      if (std::find(d.targets.begin(), d.targets.end(), l.req.holder) != d.targets.end()) target_locks.push_back(&l);
    }
    if (!target_locks.empty()) {
      // The source: our own copy when we have the winner, else the first holder that does.
      const int source_holder =
          std::find(d.sources.begin(), d.sources.end(), c_.rt.rank) != d.sources.end() ? c_.rt.rank : d.sources.front();
      const Lock *source = nullptr;
      for (const Lock &l : locks) {
        if (l.req.holder == source_holder) source = &l;
      }
      // The value: straight from our own slot when we hold the source copy (our lock keeps it
      // still), else read from the holder that does. A tombstone has none.
      std::vector<std::byte> fetched;
      const std::byte *data = nullptr;
      const Ns source_ns = from_pending ? Ns::kPending : id.ns;
      const Copy src = from_pending ? source->pending_copy() : source->copy();
      if (d.deleted) {
        // nothing to read
      } else if (source->req.holder == c_.rt.rank) {
        SlotHeader h = load_header(reinterpret_cast<const std::byte *>(src.address));
        data = reinterpret_cast<const std::byte *>(src.address) + value_offset(h, src.capacity);
      } else {
        fetched.resize(length);
        Copy hc = src;
        hc.length_hint = length;
        std::size_t got = 0;
        const ReadResult r =
            c_.engine.read_remote(a, SlotId{id.key, source_ns}, hc, fetched.data(), fetched.size(), &got);
        if (r != ReadResult::kOk || got != length) {
          throw StoreError(STORE_ERR_INTERNAL, "repair: the source copy changed under its lock");
        }
        data = fetched.data();
      }
      // Holders whose slot is too small: asking again for a lock one holds enlarges the slot.
      std::vector<Engine::Ask> grow;
      std::vector<Lock *> grown;
      for (Lock *l : target_locks) {
        if (l->grant.capacity >= length) continue;
        grow.push_back(Engine::Ask{id, l->req.holder, LockClient::lock_msg(l->owner, length, kLockRepair)});
        grown.push_back(l);
      }
      if (!grow.empty()) {
        const std::vector<CtrlMsg> replies = c_.engine.ask_all(a, grow);
        for (std::size_t i = 0; i < grown.size(); ++i) {
          if (replies[i].status != ReplyStatus::kOk) throw StoreError(STORE_ERR_NO_MEMORY, "a holder is out of memory");
          grown[i]->grant = replies[i];
        }
      }
      for (Lock *l : target_locks) targets.push_back(l->copy());
      RMASTORE_FAULT_POINT("repair.transfer");
      // The copy keeps the header of the value it repeats, writer included.
      SlotHeader h = c_.engine.header(id.key, version, length, make_flags(d.deleted ? kFlagDeleted : 0, id.ns));
      h.writer = d.writer;
      const std::vector<Copy> written = c_.engine.write_copies(a, targets, h, data, Engine::OnFailure::kSkip);
      repaired_bytes_.fetch_add(length * written.size());
    }
    if (d.deleted) {
      // A delete that its deleter did not finish: finished here, as store_delete does.
      if (is_value) {
        c_.engine.tell_witnesses(a, MsgType::kUnwitness, {{id.key, c_.membership.view()->keepers_of(id.key)}});
      }
      unlock_flags |= kUnlockReclaim | kUnlockDropPending;
    } else {
      record();
    }
    locks_.release(a, locks, unlock_flags);
    return version;
  } catch (...) {
    locks_.release(a, locks);
    throw;
  }
}

void Repairer::mark_lost(const SlotId &id, const std::vector<Lock> &locks) {
  // Gets return STORE_ERR_DATA_LOST at the holders, and every process is told, until the key is
  // put again.
  RequestSet rs(&agent_);
  std::vector<SlotHeader> marks;
  marks.reserve(locks.size());
  for (const Lock &l : locks) {
    marks.push_back(lost_header(l.grant.capacity, id.key, id.ns));
    const std::byte *from = reinterpret_cast<const std::byte *>(&marks.back()) + kWriterOffset;
    if (l.req.holder == c_.rt.rank) {
      copy_to_window(reinterpret_cast<std::byte *>(l.grant.address) + kWriterOffset, from, kWriterBytes);
    } else {
      rs.put(*c_.rt.window, l.req.holder, static_cast<MPI_Aint>(l.grant.address + kWriterOffset), from, kWriterBytes);
    }
  }
  try {
    rs.wait_all();
  } catch (const StoreError &e) {
    if (e.status() != STORE_ERR_PROC_FAILED || c_.rt.failures->revoked()) throw;
  }
  c_.holder.witnesses.mark_lost(id.key);
  CtrlMsg m;
  m.type = MsgType::kLost;
  m.key = id.key;
  for (int r = 0; r < c_.rt.size; ++r) {
    if (r != c_.rt.rank && !c_.rt.failures->dead(r)) agent_.post(r, m);
  }
}

} // namespace rmastore::internal
