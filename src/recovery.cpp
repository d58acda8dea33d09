// store_recover: rebuild the store on the survivors and bring every key back to its full number
// of copies. See docs/failures.md for the state machine.
#include "ulfm.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <iterator>
#include <map>

#include <time.h>

#include "clock.hpp"
#include "decide.hpp"
#include "errors.hpp"
#include "fault.hpp"
#include "repair.hpp"
#include "store.hpp"

namespace rmastore::internal {
namespace {

double seconds_since(std::int64_t t0) {
  return static_cast<double>(monotonic_ns() - t0) * 1e-9;
}

// A failure or revocation seen by a collective of the recovery: the caller must start over.
void check_recovery(int rc, const char *call) {
  if (is_failure_error(rc)) throw StoreError(STORE_ERR_RECOVER_AGAIN, std::string(call) + ": a process failed");
  check_mpi(rc, call);
}

// Whether MPI knows of a failed process in comm, or that comm was revoked.
bool failure_known(MPI_Comm comm) {
  int revoked = 0;
  if (MPIX_Comm_is_revoked(comm, &revoked) != MPI_SUCCESS || revoked) return true;
  MPI_Group failed = MPI_GROUP_NULL;
  if (MPIX_Comm_get_failed(comm, &failed) != MPI_SUCCESS) return true;
  int n = 0;
  MPI_Group_size(failed, &n);
  MPI_Group_free(&failed);
  return n > 0;
}

// What a survivor holds, reported to the key's coordinator.
struct Report {
  std::uint64_t key;
  std::uint64_t version;
  std::uint64_t length;
  std::uint64_t tx; // pending values: the transaction's sequence number
  std::uint32_t ns;
  std::uint32_t from;   // reporting rank
  std::uint32_t state;  // CopyState
  std::uint32_t writer; // stable id of the writer (pending values: the committer)

  CopyReport view() const {
    return CopyReport{static_cast<int>(from), static_cast<CopyState>(state), version, length, writer, tx};
  }
};

// A coordinator's instruction.
struct Order {
  enum Kind : std::uint32_t { kSend = 0, kDrop = 1, kMarkLost = 2 };
  std::uint64_t key;
  std::uint32_t ns; // the slot the order is about
  std::uint32_t kind;
  std::int32_t to;       // kSend: destination rank
  std::uint32_t from_ns; // kSend: the slot the value comes from (kPending: roll forward)
};

// A committed transaction: the newest decision record of a committer.
struct Commit {
  std::uint64_t committer;
  std::uint64_t seq;
};

// Sends per-destination byte buffers to their destinations; returns what each source sent us.
// Collective. Rounds keep every count below INT_MAX.
std::vector<std::vector<std::byte>> exchange(MPI_Comm comm, const std::vector<std::vector<std::byte>> &out) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  const auto n = static_cast<std::size_t>(size);
  constexpr std::size_t kRound = std::size_t{1} << 30;
  std::vector<std::vector<std::byte>> in(n);
  std::vector<std::size_t> sent(n, 0);
  for (;;) {
    std::vector<int> scount(n), rcount(n), sdispl(n), rdispl(n);
    long long more = 0, total = 0;
    for (std::size_t d = 0; d < n; ++d) {
      const std::size_t left = out[d].size() - sent[d];
      scount[d] = static_cast<int>(std::min(left, kRound));
      more += left > kRound ? 1 : 0;
    }
    check_recovery(MPI_Alltoall(scount.data(), 1, MPI_INT, rcount.data(), 1, MPI_INT, comm), "MPI_Alltoall");
    // Send and receive buffers are laid out contiguously; each fits in an int offset because
    // per-destination counts are capped and there are few processes per round in practice.
    std::vector<std::byte> sbuf, rbuf;
    long long soff = 0, roff = 0;
    for (std::size_t d = 0; d < n; ++d) {
      sdispl[d] = static_cast<int>(soff);
      soff += scount[d];
      rdispl[d] = static_cast<int>(roff);
      roff += rcount[d];
    }
    if (soff > INT_MAX || roff > INT_MAX) throw StoreError(STORE_ERR_NO_MEMORY, "re-replication round too large");
    sbuf.resize(static_cast<std::size_t>(soff));
    rbuf.resize(static_cast<std::size_t>(roff));
    for (std::size_t d = 0; d < n; ++d) {
      if (scount[d] > 0)
        std::memcpy(sbuf.data() + sdispl[d], out[d].data() + sent[d], static_cast<std::size_t>(scount[d]));
      sent[d] += static_cast<std::size_t>(scount[d]);
    }
    check_recovery(MPI_Alltoallv(sbuf.data(), scount.data(), sdispl.data(), MPI_BYTE, rbuf.data(), rcount.data(),
                                 rdispl.data(), MPI_BYTE, comm),
                   "MPI_Alltoallv");
    for (std::size_t s = 0; s < n; ++s) {
      in[s].insert(in[s].end(), rbuf.begin() + rdispl[s], rbuf.begin() + rdispl[s] + rcount[s]);
    }
    check_recovery(MPI_Allreduce(&more, &total, 1, MPI_LONG_LONG, MPI_SUM, comm), "MPI_Allreduce");
    if (total == 0) break;
  }
  return in;
}

// A piece of memory to send from or receive into.
struct Piece {
  std::byte *at;
  std::size_t bytes;
};

// Moves every send piece to the matching receive piece (the i-th piece sent to a process lands
// in the i-th piece it receives from us), straight from slot to slot: one message per piece,
// which Open MPI moves with a single copy between processes of a node (measured: 2x faster
// than one MPI_Alltoallw over datatypes, which packs and unpacks in 32 KiB fragments).
// Collective in effect: every process calls it with matching pieces. Point-to-point requests
// report a failed peer as an error (ULFM), so waiting on them cannot hang.
void move_pieces(MPI_Comm comm, const std::vector<std::vector<Piece>> &sends,
                 const std::vector<std::vector<Piece>> &receives) {
  constexpr std::size_t kChunk = std::size_t{1} << 30; // MPI counts are ints
  constexpr int kTag = 77;
  std::vector<MPI_Request> reqs;
  const auto post = [&](const std::vector<std::vector<Piece>> &pieces, bool send) {
    for (std::size_t peer = 0; peer < pieces.size(); ++peer) {
      for (const Piece &p : pieces[peer]) {
        for (std::size_t off = 0; off < p.bytes; off += kChunk) {
          const int n = static_cast<int>(std::min(kChunk, p.bytes - off));
          MPI_Request r;
          const int rc = send ? MPI_Isend(p.at + off, n, MPI_BYTE, static_cast<int>(peer), kTag, comm, &r)
                              : MPI_Irecv(p.at + off, n, MPI_BYTE, static_cast<int>(peer), kTag, comm, &r);
          check_recovery(rc, send ? "MPI_Isend" : "MPI_Irecv");
          reqs.push_back(r);
        }
      }
    }
  };
  post(receives, false);
  post(sends, true);
  // Polled, and napping while others copy: in an oversubscribed run every spinning waiter takes
  // CPU from a process that is copying (measured: 40-200 ms for this step at np=8 on 2 cores
  // with MPI_Waitall, 35-130 ms napping).
  int rc = MPI_SUCCESS;
  for (unsigned spins = 0;; ++spins) {
    int done = 0;
    rc = MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS || done) break;
    if (spins > 64) {
      timespec nap{0, 20'000};
      nanosleep(&nap, nullptr);
    }
  }
  if (rc != MPI_SUCCESS) {
    // Some requests may still be pending toward a failed peer: cancel what can be cancelled;
    // the recovery starts over anyway.
    for (MPI_Request &r : reqs) {
      if (r != MPI_REQUEST_NULL) MPI_Cancel(&r);
    }
    throw StoreError(STORE_ERR_RECOVER_AGAIN, "MPI_Waitall: a process failed during re-replication");
  }
}

// Every process's `mine`, concatenated in rank order. Collective.
template <class T> std::vector<T> allgatherv(MPI_Comm comm, const std::vector<T> &mine) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  const auto n = static_cast<std::size_t>(size);
  if (mine.size() * sizeof(T) > static_cast<std::size_t>(INT_MAX)) {
    throw StoreError(STORE_ERR_NO_MEMORY, "recovery: too much to gather in one call");
  }
  const int bytes = static_cast<int>(mine.size() * sizeof(T));
  std::vector<int> counts(n), displs(n);
  check_recovery(MPI_Allgather(&bytes, 1, MPI_INT, counts.data(), 1, MPI_INT, comm), "MPI_Allgather");
  long long total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    displs[i] = static_cast<int>(total);
    total += counts[i];
    if (total > INT_MAX) throw StoreError(STORE_ERR_NO_MEMORY, "recovery: too much to gather in one call");
  }
  std::vector<T> all(static_cast<std::size_t>(total) / sizeof(T));
  check_recovery(MPI_Allgatherv(mine.data(), bytes, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE, comm),
                 "MPI_Allgatherv");
  return all;
}

template <class T> void append(std::vector<std::byte> &buf, const T &v) {
  const auto *p = reinterpret_cast<const std::byte *>(&v);
  buf.insert(buf.end(), p, p + sizeof v);
}

template <class T> std::vector<T> unpack(const std::vector<std::byte> &buf) {
  std::vector<T> v(buf.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), buf.data(), v.size() * sizeof(T));
  return v;
}

} // namespace

store_status_t Store::recover(MPI_Comm *new_comm) {
  const std::int64_t t0 = monotonic_ns();
  if (recover_attempts_++ == 0) first_attempt_ns_ = t0;
  recover_pending_ = true;
  RMASTORE_FAULT_POINT("recover.start");
  if (localized() && helper_ != nullptr) {
    // Compaction. Every survivor is here before any helper stops: none is left inside a put,
    // waiting for a helper that will not answer.
    app_->drain();
    tolerant_barrier(comm_, *failures_);
    RMASTORE_FAULT_POINT("recover.after_barrier");
  }
  double shrink_s = 0, window_s = 0, rerep_s = 0;
  const int before =
      static_cast<int>(std::count_if(rank_of_id_.begin(), rank_of_id_.end(), [](int r) { return r >= 0; }));
  bool keep_window = false;
  try {
    keep_window = shrink_and_agree(&shrink_s, before);
  } catch (const StoreError &e) {
    if (e.status() == STORE_ERR_PROC_FAILED || e.status() == STORE_ERR_RECOVER_AGAIN) return STORE_ERR_RECOVER_AGAIN;
    throw;
  }
  // From here on every survivor has the same comm_. A process that dies now can make any step
  // fail on some survivors and succeed on others (ULFM collectives are not uniform), so no
  // survivor returns on its own: a survivor that fails revokes comm_, which makes the others'
  // collectives fail too, and all meet in one agreement on comm_ (it works on a revoked
  // communicator) that decides the outcome for everyone alike.
  MPI_Comm dup = MPI_COMM_NULL;
  // The report and lost keys replace the last ones only when this attempt succeeds: until then
  // store_last_recovery describes the last recovery that did.
  store_recovery_t report = last_recovery_;
  std::vector<store_key_t> all_lost;
  store_status_t local = STORE_OK;
  std::string why;
  try {
    RMASTORE_FAULT_POINT("recover.after_shrink");
    rebuild_window(&window_s, keep_window);
    RMASTORE_FAULT_POINT("recover.after_window");
    rereplicate(&rerep_s, report, all_lost);
    RMASTORE_FAULT_POINT("recover.after_rereplicate");
    if (new_comm != nullptr) {
      check_recovery(MPI_Comm_dup(comm_, &dup), "MPI_Comm_dup");
      check_mpi(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    }
    RMASTORE_FAULT_POINT("recover.before_agree");
  } catch (const StoreError &e) {
    local = e.status();
    why = e.what();
  } catch (const std::bad_alloc &) {
    local = STORE_ERR_NO_MEMORY;
    why = "out of memory during re-replication";
  }
  // An MPI error of a step is a failure when MPI knows of one on comm_ (or of a revocation):
  // window creation, for one, reports a dead peer as MPI_ERR_WIN.
  const bool failed_here = local == STORE_ERR_PROC_FAILED || local == STORE_ERR_RECOVER_AGAIN ||
                           (local == STORE_ERR_MPI && failure_known(comm_));
  if (local != STORE_OK) MPIX_Comm_revoke(comm_);
  // Bit 0: this process succeeded. Bit 1: it failed for no reason but a process failure.
  int flag = (local == STORE_OK ? 1 : 0) | (local == STORE_OK || failed_here ? 2 : 0);
  const int rc = MPIX_Comm_agree(comm_, &flag);
  if (rc != MPI_SUCCESS || flag != 3) {
    if (dup != MPI_COMM_NULL) MPI_Comm_free(&dup);
    if (rc != MPI_SUCCESS || (flag & 2) != 0) return STORE_ERR_RECOVER_AGAIN;
    // Some survivor could not complete for another reason (memory, MPI): the store cannot be
    // used any more. That survivor reports its own error, every other one (also one that saw
    // only the failures this caused) that another failed.
    if (local != STORE_OK && !failed_here) throw StoreError(local, why);
    throw StoreError(STORE_ERR_PEER, "store_recover failed on another process");
  }
  // The epoch moves before any thread that takes slot locks starts: a lock word is taken and
  // released under one epoch.
  ++epoch_;
  start_helper();
  recover_pending_ = false;
  if (new_comm != nullptr) *new_comm = dup;
  if (!localized()) mode_ = STORE_MODE_TRANSACTION;
  tx_open_ = false;
  tx_values_.clear();
  report.survivors = size_;
  report.failed = members_ - size_;
  report.shrink_seconds = shrink_s;
  report.window_seconds = window_s;
  report.rereplicate_seconds = rerep_s;
  report.total_seconds = seconds_since(first_attempt_ns_);
  report.attempts = recover_attempts_;
  lost_keys_ = std::move(all_lost);
  report.lost_keys = lost_keys_.data();
  last_recovery_ = report;
  members_ = size_;
  recover_attempts_ = 0;
  return STORE_OK;
}

// Revokes the store's communicators (waking every survivor that waits on them), shrinks to the
// survivors and agrees on them, repeating while more processes fail.
bool Store::shrink_and_agree(double *seconds, int members) {
  const std::int64_t t0 = monotonic_ns();
  stop_runtime();
  app_->abandoned_rma.clear(); // aimed at failed processes: they never complete, and the window goes
  if (ctrl_ != MPI_COMM_NULL) MPIX_Comm_revoke(ctrl_);
  MPIX_Comm_revoke(comm_);
  RMASTORE_FAULT_POINT("recover.after_revoke");
  bool keep = false;
  for (;;) {
    MPI_Comm shrunk = MPI_COMM_NULL;
    check_recovery(MPIX_Comm_shrink(comm_, &shrunk), "MPIX_Comm_shrink");
    check_mpi(MPI_Comm_set_errhandler(shrunk, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    int size = 0;
    check_mpi(MPI_Comm_size(shrunk, &size), "MPI_Comm_size");
    // The shrunk communicator may still hold a process that failed during the shrink; the
    // agreement finds out, uniformly on every survivor. Bit 1: this process's window spans
    // exactly the survivors (an earlier attempt may have made it on some processes only).
    int flag = 1 | (window_ != nullptr && size == members ? 2 : 0);
    const int rc = MPIX_Comm_agree(shrunk, &flag);
    const bool ok = rc == MPI_SUCCESS && (flag & 1) != 0;
    keep = ok && (flag & 2) != 0;
    MPI_Comm old = comm_;
    comm_ = shrunk;
    MPI_Comm_free(&old);
    if (ok) break;
    MPIX_Comm_revoke(comm_);
  }
  *seconds = seconds_since(t0);
  return keep;
}

// Retires the old window without flushing or unlocking it (that would wait on the failed), and
// creates a new one on the survivors with the same memory attached; keeps it when
// shrink_and_agree found that no process was lost.
//
// The old window is not freed: with Open MPI 5.0.7, once a dynamic window that spanned a failed
// process has been freed, creating any later window on a two-process communicator ends the
// whole job (tests/ompi_window_after_failure.c reproduces it). Unused, such a window costs
// Open MPI's bookkeeping only; MPI_Finalize frees it.
void Store::rebuild_window(double *seconds, bool keep_window) {
  const std::int64_t t0 = monotonic_ns();
  // With no process lost the window still spans exactly the survivors, in the same order, and
  // is kept: nothing of it is left behind (store_recover as compaction in the localized variant).
  if (!keep_window) {
    if (window_) window_->abandon();
    window_.reset();
  }
  if (ctrl_ != MPI_COMM_NULL) MPI_Comm_free(&ctrl_);
  ctrl_ = MPI_COMM_NULL;
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  std::vector<int> ids(static_cast<std::size_t>(size_));
  check_recovery(MPI_Allgather(&id_, 1, MPI_INT, ids.data(), 1, MPI_INT, comm_), "MPI_Allgather");
  std::vector<int> rank_of(rank_of_id_.size(), -1);
  for (int r = 0; r < size_; ++r) rank_of[static_cast<std::size_t>(ids[static_cast<std::size_t>(r)])] = r;
  RMASTORE_FAULT_POINT("recover.after_ids");
  // A new placement object, as update_view makes: whoever holds the old one keeps it unchanged.
  auto next = std::make_shared<Placement>(*placement_);
  for (std::size_t i = 0; i < rank_of.size(); ++i) {
    if (rank_of[i] < 0) next->remove(static_cast<int>(i));
  }
  {
    std::lock_guard lk(view_mutex_);
    placement_ = std::move(next);
    view_failures_ = 0;
  }
  ids_ = std::move(ids);
  rank_of_id_ = std::move(rank_of);
  // An unpatched Open MPI 5.0.7 segfaults when window creation meets a dead process
  // (scripts/openmpi-patches/0001-*): with a failure already known, do not even try.
  if (failure_known(comm_)) throw StoreError(STORE_ERR_RECOVER_AGAIN, "a process failed before window creation");
  build_runtime();
  *seconds = seconds_since(t0);
}

// Forgets every grant and lock: numbering changed, and the writers and readers may be gone.
// Slots a failed process could write into (global: it held the write grant; localized: it held
// the lock, or that of the key's value slot) are moved to fresh memory and never reused, so
// data it sent before failing cannot land in memory given to someone else.
void Store::reset_grants() {
  std::lock_guard lk(table_mutex_);
  // rank_of_id_ already leaves the failed processes out, and the failure set is new.
  const auto failed_owner = [&](const SlotId &id) {
    auto it = table_.find(id);
    return it != table_.end() && owner_dead(owner_of(it->second.block.base).load());
  };
  std::unordered_set<SlotId, SlotIdHash> unsafe;
  for (const auto &[id, slot] : table_) {
    if (failed_owner(id) || (id.ns == Ns::kPending && failed_owner(SlotId{id.key, Ns::kValue}))) unsafe.insert(id);
  }
  for (auto &[id, slot] : table_) {
    if (slot.retired.base != nullptr) quarantined_.push_back(slot.retired);
    slot.retired = {};
    const bool failed_writer = slot.writer_id >= 0 && rank_of_id_[static_cast<std::size_t>(slot.writer_id)] < 0;
    if (failed_writer || unsafe.count(id) > 0) quarantine_locked(id, slot.block, 0);
    owner_of(slot.block.base).store(kOwnerFree);
    slot.writer = -1;
    slot.writer_id = -1;
    slot.readers.clear();
    slot.pending_acks = 0;
    slot.stashed_reply.reset();
    slot.queued.clear();
  }
  std::lock_guard lc(cache_mutex_);
  cache_.clear();
}

void Store::rereplicate(double *seconds, store_recovery_t &report, std::vector<store_key_t> &all_lost) {
  const std::int64_t t0 = monotonic_ns();
  reset_grants();
  const auto n = static_cast<std::size_t>(size_);

  // 1. Report every local copy to its coordinator: the first holder in the new placement.
  std::vector<std::vector<std::byte>> reports(n);
  {
    std::lock_guard lk(table_mutex_);
    for (const auto &[id, slot] : table_) {
      SlotHeader h = load_header(slot.block.base);
      Report r{};
      r.key = id.key;
      r.ns = static_cast<std::uint32_t>(id.ns);
      r.from = static_cast<std::uint32_t>(rank_);
      r.version = h.version;
      r.length = h.length;
      r.tx = flags_tx(h.flags);
      r.writer = h.writer;
      r.state = static_cast<std::uint32_t>(classify_copy(h, slot.block.base, slot.block.capacity, id.key, id.ns));
      append(reports[static_cast<std::size_t>(holders_of(id).front())], r);
    }
  }
  const auto got = exchange(comm_, reports);
  RMASTORE_FAULT_POINT("recover.rereplicate");

  // 2. Decide, for every slot this process coordinates.
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::vector<Report>> by_slot;
  for (const auto &buf : got) {
    for (const Report &r : unpack<Report>(buf)) by_slot[{r.ns, r.key}].push_back(r);
  }
  const auto ns_of = [](Ns ns) { return static_cast<std::uint32_t>(ns); };
  {
    // Keys known to exist but reported by nobody lost every copy.
    for (std::uint64_t key : known_.all()) {
      const SlotId id{key, Ns::kValue};
      if (holders_of(id).front() == rank_) by_slot.try_emplace({ns_of(Ns::kValue), key});
    }
  }
  // A key with only pending copies (its first value came in a transaction) is decided too.
  for (const auto &[slot_key, rs] : by_slot) {
    if (slot_key.first == ns_of(Ns::kPending)) by_slot.try_emplace({ns_of(Ns::kValue), slot_key.second});
  }
  // Committed transactions: every survivor learns the newest decision record of each committer.
  std::map<std::uint64_t, std::uint64_t> committed;
  {
    std::vector<Commit> mine_commits;
    for (const auto &[slot_key, rs] : by_slot) {
      if (slot_key.first != ns_of(Ns::kTxRecord)) continue;
      std::uint64_t best = kNoVersion;
      for (const Report &r : rs) {
        if (static_cast<CopyState>(r.state) == CopyState::kComplete && r.version > best) best = r.version;
      }
      if (best != kNoVersion) mine_commits.push_back(Commit{slot_key.second, best});
    }
    for (const Commit &c : allgatherv(comm_, mine_commits)) committed[c.committer] = c.seq;
  }
  const CommittedFn is_committed = [&](std::uint32_t writer, std::uint64_t tx) {
    auto it = committed.find(writer);
    return it != committed.end() && it->second == tx;
  };

  std::vector<std::vector<std::byte>> orders(n);
  std::vector<store_key_t> lost, existing;
  std::uint64_t bytes_lost = 0, keys = 0, repaired = 0, forward = 0, back = 0;
  const auto order = [&](int dest, const SlotId &id, Order::Kind kind, int to, Ns from) {
    Order o{id.key, ns_of(id.ns), static_cast<std::uint32_t>(kind), to, ns_of(from)};
    append(orders[static_cast<std::size_t>(dest)], o);
  };
  for (auto &[slot_key, rs] : by_slot) {
    const SlotId id{slot_key.second, static_cast<Ns>(slot_key.first)};
    if (id.ns == Ns::kPending) continue; // decided with its value, below
    const bool is_value = id.ns == Ns::kValue;
    const std::vector<int> holders = holders_of(id);
    std::vector<CopyReport> copies, pending;
    for (const Report &r : rs) copies.push_back(r.view());
    if (is_value) {
      auto pit = by_slot.find({ns_of(Ns::kPending), id.key});
      if (pit != by_slot.end()) {
        for (const Report &r : pit->second) {
          pending.push_back(r.view());
          // Every pending copy goes, rolled forward or not: older ones are what committed
          // transactions leave behind once applied.
          order(static_cast<int>(r.from), SlotId{id.key, Ns::kPending}, Order::kDrop, 0, Ns::kPending);
        }
      }
    }
    const SlotDecision d =
        decide_slot(is_value, holders, copies, pending, is_value && known_.known(id.key), is_committed);
    forward += d.roll_forward ? 1 : 0;
    back += d.roll_back ? 1 : 0;
    keys += is_value ? 1 : 0;
    if (d.outcome == SlotDecision::Outcome::kLost) {
      lost.push_back(id.key);
      for (int h : holders) order(h, id, Order::kMarkLost, h, id.ns);
    } else if (d.outcome == SlotDecision::Outcome::kRestore) {
      if (is_value) existing.push_back(id.key);
      std::size_t next_source = 0;
      for (int h : d.targets) {
        order(d.sources[next_source++ % d.sources.size()], id, Order::kSend, h, d.roll_forward ? Ns::kPending : id.ns);
        bytes_lost += d.length;
      }
      repaired += !d.targets.empty() && is_value ? 1 : 0;
    }
    for (const Report &r : rs) {
      if (std::find(holders.begin(), holders.end(), static_cast<int>(r.from)) == holders.end()) {
        order(static_cast<int>(r.from), id, Order::kDrop, 0, id.ns);
      }
    }
  }
  const auto my_orders = exchange(comm_, orders);

  // 3. Mark lost keys, and describe the copies to send, without copying them: each goes
  // straight from its slot here to its new slot at the destination (step 4).
  std::vector<std::vector<Piece>> sends(n);
  std::vector<std::vector<std::byte>> headers(n);
  std::uint64_t bytes_moved = 0;
  {
    std::lock_guard lk(table_mutex_);
    for (const auto &buf : my_orders) {
      for (const Order &o : unpack<Order>(buf)) {
        const SlotId id{o.key, static_cast<Ns>(o.ns)};
        if (o.kind == Order::kMarkLost) {
          auto it = table_.find(id);
          if (it == table_.end()) {
            HeldSlot fresh;
            fresh.block = allocator_->allocate(config_.initial_slot_size, id.key, id.ns);
            it = table_.emplace(id, std::move(fresh)).first;
          }
          const SlotHeader l = lost_header(it->second.block.capacity, id.key, id.ns);
          store_header(it->second.block.base, l);
        } else if (o.kind == Order::kSend) {
          // From our copy in slot (key, from_ns), possibly a pending value that rolls forward,
          // to the destination's slot (key, ns), where it goes into the first half.
          auto src = table_.find(SlotId{o.key, static_cast<Ns>(o.from_ns)});
          if (src == table_.end()) continue;
          SlotHeader h = load_header(src->second.block.base);
          const std::byte *value = src->second.block.base + value_offset(h, src->second.block.capacity);
          h.flags = make_flags(flag_bits(h.flags) & ~kFlagHalfB, id.ns, id.ns == Ns::kPending ? flags_tx(h.flags) : 0);
          h.checksum = in_place(h.length) ? slot_checksum(h, value) : header_checksum(h);
          sends[static_cast<std::size_t>(o.to)].push_back(Piece{const_cast<std::byte *>(value), h.length});
          append(headers[static_cast<std::size_t>(o.to)], h);
          bytes_moved += h.length;
        }
      }
    }
  }
  const auto incoming = exchange(comm_, headers);

  // 4. Make room for what comes, move every value in one collective, then write the headers.
  std::vector<std::vector<Piece>> receives(n);
  std::vector<std::pair<std::byte *, SlotHeader>> installs;
  {
    std::lock_guard lk(table_mutex_);
    for (std::size_t src = 0; src < n; ++src) {
      for (const SlotHeader &h : unpack<SlotHeader>(incoming[src])) {
        const SlotId id{h.key, flags_ns(h.flags)};
        auto it = table_.find(id);
        if (it != table_.end() && it->second.block.capacity < h.length) {
          allocator_->release(it->second.block);
          table_.erase(it);
          it = table_.end();
        }
        if (it == table_.end()) {
          HeldSlot fresh;
          fresh.block = allocator_->allocate(std::max<std::size_t>(h.length, config_.initial_slot_size), id.key, id.ns);
          it = table_.emplace(id, std::move(fresh)).first;
        }
        std::byte *base = it->second.block.base;
        receives[src].push_back(Piece{base + kHeaderBytes, h.length});
        installs.emplace_back(base, h);
      }
    }
  }
  RMASTORE_FAULT_POINT("recover.before_move");
  move_pieces(comm_, sends, receives);
  {
    std::lock_guard lk(table_mutex_);
    for (const auto &[base, h] : installs) {
      copy_to_window(base + kWriterOffset, reinterpret_cast<const std::byte *>(&h) + kWriterOffset, kWriterBytes);
    }
    // Drops last: values were read from some of these slots.
    for (const auto &buf : my_orders) {
      for (const Order &o : unpack<Order>(buf)) {
        if (o.kind != Order::kDrop) continue;
        auto it = table_.find(SlotId{o.key, static_cast<Ns>(o.ns)});
        if (it == table_.end()) continue;
        allocator_->release(it->second.block);
        table_.erase(it);
      }
    }
  }

  // 5. Everybody learns the totals and the lost keys.
  std::uint64_t mine[4] = {bytes_moved, bytes_lost, keys, repaired}, sum[4] = {};
  check_recovery(MPI_Allreduce(mine, sum, 4, MPI_UINT64_T, MPI_SUM, comm_), "MPI_Allreduce");
  all_lost = allgatherv(comm_, lost);
  std::sort(all_lost.begin(), all_lost.end());
  // Every key that has a value now is known everywhere, also one whose first put failed but
  // left a copy: if all its copies go in a later failure, that recovery reports it.
  known_.add(allgatherv(comm_, existing));
  report.bytes_moved = sum[0];
  report.bytes_lost = sum[1];
  report.keys = sum[2];
  report.keys_repaired = sum[3];
  report.lost_count = all_lost.size();
  std::uint64_t tx_mine[2] = {forward, back}, tx_sum[2] = {};
  check_recovery(MPI_Allreduce(tx_mine, tx_sum, 2, MPI_UINT64_T, MPI_SUM, comm_), "MPI_Allreduce");
  report.tx_rolled_forward = tx_sum[0];
  report.tx_rolled_back = tx_sum[1];
  *seconds = seconds_since(t0);
}

void Store::last_recovery(store_recovery_t &out) const {
  out = last_recovery_;
  if (!localized()) {
    out.lost_keys = lost_keys_.data();
    return;
  }
  // Also the keys the background repairs found lost, until they are put again.
  lost_report_ = known_.lost(); // sorted, without duplicates
  std::vector<store_key_t> mine(lost_keys_.begin(), lost_keys_.end());
  std::sort(mine.begin(), mine.end());
  std::vector<store_key_t> both;
  std::set_union(lost_report_.begin(), lost_report_.end(), mine.begin(), mine.end(), std::back_inserter(both));
  lost_report_ = std::move(both);
  out.lost_count = lost_report_.size();
  out.lost_keys = lost_report_.data();
}

} // namespace rmastore::internal
