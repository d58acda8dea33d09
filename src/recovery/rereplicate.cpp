#include "recovery/rereplicate.hpp"

#include <algorithm>

#include "common/fault.hpp"
#include "recovery/collectives.hpp"

namespace rmastore::internal {
namespace {

std::uint32_t ns_of(Ns ns) {
  return static_cast<std::uint32_t>(ns);
}

// The namespace of a report of a witness record (witnesses.hpp): a report only, no slot has it.
constexpr std::uint32_t kRecordNs = 0xff;

} // namespace

Rereplication::Rereplication(Core &core)
    : c_(core), view_(core.membership.view()), n_(static_cast<std::size_t>(core.rt.size)) {}

void Rereplication::run(store_recovery_t &report, std::vector<store_key_t> &all_lost, bool nobody_lost,
                        std::uint64_t quarantined_before) {
  if (nobody_lost) {
    // Slot locks still go: a repair thread stopped by the recovery may have held some.
    c_.holder.locks.reset();
  } else {
    c_.holder.reset_after_failures();
    c_.cache.clear();
  }
  // Since the last recovery that succeeded: earlier attempts of this one, and the localized
  // variant's repairs in the background, quarantined too.
  quarantined_ = c_.holder.slots.quarantined_bytes() - quarantined_before;
  const auto reports = gather();
  const std::map<std::uint64_t, std::uint64_t> committed = commits(reports);
  const CommittedFn is_committed = [&](std::uint32_t writer, std::uint64_t tx) {
    auto it = committed.find(writer);
    return it != committed.end() && it->second == tx;
  };
  carry_out(exchange_buffers(c_.rt.comm, decide(reports, is_committed)));
  totals(report, all_lost);
}

std::map<Rereplication::SlotKey, std::vector<Rereplication::Report>> Rereplication::gather() {
  Buffers out(n_);
  for (const SlotStore::LocalCopy &copy : c_.holder.slots.copies()) {
    Report r{};
    r.key = copy.id.key;
    r.ns = ns_of(copy.id.ns);
    r.from = static_cast<std::uint32_t>(c_.rt.rank);
    r.version = copy.header.version;
    r.length = copy.header.length;
    r.tx = flags_tx(copy.header.flags);
    r.writer = copy.header.writer;
    r.state = static_cast<std::uint32_t>(copy.state);
    append(out[static_cast<std::size_t>(view_->holders_of(copy.id).front())], r);
  }
  for (std::uint64_t key : c_.holder.witnesses.all()) {
    Report r{};
    r.key = key;
    r.ns = kRecordNs;
    r.from = static_cast<std::uint32_t>(c_.rt.rank);
    append(out[static_cast<std::size_t>(view_->holders_of(SlotId{key, Ns::kValue}).front())], r);
  }
  const Buffers got = exchange_buffers(c_.rt.comm, out);
  RMASTORE_FAULT_POINT("recover.rereplicate");
  std::map<SlotKey, std::vector<Report>> by_slot;
  for (const auto &buf : got) {
    for (const Report &r : unpack<Report>(buf)) {
      if (r.ns == kRecordNs) {
        recorded_[r.key].push_back(static_cast<int>(r.from));
        // A recorded key that nobody reports a copy of lost every copy: decided too.
        by_slot.try_emplace({ns_of(Ns::kValue), r.key});
      } else {
        by_slot[{r.ns, r.key}].push_back(r);
      }
    }
  }
  // A key with only pending copies (its first value came in a transaction) is decided too.
  for (const auto &[slot_key, rs] : by_slot) {
    if (slot_key.first == ns_of(Ns::kPending)) by_slot.try_emplace({ns_of(Ns::kValue), slot_key.second});
  }
  return by_slot;
}

std::map<std::uint64_t, std::uint64_t> Rereplication::commits(const std::map<SlotKey, std::vector<Report>> &reports) {
  struct Commit {
    std::uint64_t committer;
    std::uint64_t seq;
  };
  std::vector<Commit> mine;
  for (const auto &[slot_key, rs] : reports) {
    if (slot_key.first != ns_of(Ns::kTxRecord)) continue;
    std::uint64_t best = kNoVersion;
    for (const Report &r : rs) {
      if (static_cast<CopyState>(r.state) == CopyState::kComplete && r.version > best) best = r.version;
    }
    if (best != kNoVersion) mine.push_back(Commit{slot_key.second, best});
  }
  std::map<std::uint64_t, std::uint64_t> committed;
  for (const Commit &c : allgatherv(c_.rt.comm, mine)) committed[c.committer] = c.seq;
  return committed;
}

Rereplication::Buffers Rereplication::decide(const std::map<SlotKey, std::vector<Report>> &reports,
                                             const CommittedFn &is_committed) {
  Buffers orders(n_);
  const auto order = [&](int dest, const SlotId &id, Order::Kind kind, int to, Ns from) {
    append(orders[static_cast<std::size_t>(dest)],
           Order{id.key, ns_of(id.ns), static_cast<std::uint32_t>(kind), to, ns_of(from)});
  };
  for (const auto &[slot_key, rs] : reports) {
    const SlotId id{slot_key.second, static_cast<Ns>(slot_key.first)};
    if (id.ns == Ns::kPending) continue; // decided with its value, below
    const bool is_value = id.ns == Ns::kValue;
    const std::vector<int> holders = view_->holders_of(id);
    std::vector<CopyReport> copies, pending;
    for (const Report &r : rs) copies.push_back(r.view());
    if (is_value) {
      auto pit = reports.find({ns_of(Ns::kPending), id.key});
      if (pit != reports.end()) {
        for (const Report &r : pit->second) {
          pending.push_back(r.view());
          // Every pending copy goes, rolled forward or not: older ones are what committed
          // transactions leave behind once applied.
          order(static_cast<int>(r.from), SlotId{id.key, Ns::kPending}, Order::kDrop, 0, Ns::kPending);
        }
      }
    }
    const auto rec = recorded_.find(id.key);
    const bool known = is_value && rec != recorded_.end();
    const SlotDecision d = decide_slot(is_value, holders, copies, pending, known, is_committed);
    forward_ += d.roll_forward ? 1 : 0;
    back_ += d.roll_back ? 1 : 0;
    const bool gone = d.outcome == SlotDecision::Outcome::kNothing || d.deleted;
    keys_ += is_value && !gone ? 1 : 0;
    if (gone) {
      // A tombstone won: the key was deleted (by a delete or a committed transaction that did not
      // finish), and every copy and record of it goes, as store_delete would have done. Or it
      // never existed: the empty slots that puts which died before writing made go too.
      for (const Report &r : rs) order(static_cast<int>(r.from), id, Order::kDrop, 0, id.ns);
    } else if (d.outcome == SlotDecision::Outcome::kLost) {
      lost_.push_back(id.key);
      for (int h : holders) order(h, id, Order::kMarkLost, h, id.ns);
    } else if (d.outcome == SlotDecision::Outcome::kRestore) {
      std::size_t next_source = 0;
      for (int h : d.targets) {
        order(d.sources[next_source++ % d.sources.size()], id, Order::kSend, h, d.roll_forward ? Ns::kPending : id.ns);
        bytes_lost_ += d.length;
      }
      repaired_ += !d.targets.empty() && is_value ? 1 : 0;
    }
    for (const Report &r : rs) {
      if (std::find(holders.begin(), holders.end(), static_cast<int>(r.from)) == holders.end()) {
        order(static_cast<int>(r.from), id, Order::kDrop, 0, id.ns);
      }
    }
    if (!is_value) continue;
    // A key that exists (restored, or lost and so to be reported) is recorded at exactly its
    // witnesses under the new placement; a key that does not, nowhere. This also records a key
    // whose first put wrote copies but died before recording it.
    const std::vector<int> none;
    const std::vector<int> &had = rec != recorded_.end() ? rec->second : none;
    const std::vector<int> want = gone ? none : view_->witnesses_of(id.key);
    for (int w : want) {
      if (std::find(had.begin(), had.end(), w) == had.end()) order(w, id, Order::kRecord, w, id.ns);
    }
    for (int w : had) {
      if (std::find(want.begin(), want.end(), w) == want.end()) order(w, id, Order::kUnrecord, w, id.ns);
    }
  }
  return orders;
}

void Rereplication::carry_out(const Buffers &my_orders) {
  // 3. Mark lost keys, and describe the copies to send, without copying them: each goes
  // straight from its slot here to its new slot at the destination.
  std::vector<std::vector<Piece>> sends(n_);
  Buffers headers(n_);
  for (const auto &buf : my_orders) {
    for (const Order &o : unpack<Order>(buf)) {
      const SlotId id{o.key, static_cast<Ns>(o.ns)};
      if (o.kind == Order::kMarkLost) {
        c_.holder.slots.mark_lost(id);
      } else if (o.kind == Order::kRecord) {
        c_.holder.witnesses.add(o.key);
      } else if (o.kind == Order::kUnrecord) {
        c_.holder.witnesses.remove(o.key);
      } else if (o.kind == Order::kSend) {
        // From our copy in slot (key, from_ns), possibly a pending value that rolls forward,
        // to the destination's slot (key, ns), where it goes into the first half.
        const auto out = c_.holder.slots.outgoing(o.key, static_cast<Ns>(o.from_ns), id.ns);
        if (!out) continue;
        sends[static_cast<std::size_t>(o.to)].push_back(Piece{out->value, out->header.length});
        append(headers[static_cast<std::size_t>(o.to)], out->header);
        bytes_moved_ += out->header.length;
      }
    }
  }
  const Buffers incoming = exchange_buffers(c_.rt.comm, headers);

  // 4. Make room for what comes, move every value in one collective, then write the headers.
  std::vector<std::vector<Piece>> receives(n_);
  std::vector<std::pair<std::byte *, SlotHeader>> installs;
  for (std::size_t src = 0; src < n_; ++src) {
    for (const SlotHeader &h : unpack<SlotHeader>(incoming[src])) {
      std::byte *base = c_.holder.slots.make_room(SlotId{h.key, flags_ns(h.flags)}, h.length);
      receives[src].push_back(Piece{base + kHeaderBytes, h.length});
      installs.emplace_back(base, h);
    }
  }
  RMASTORE_FAULT_POINT("recover.before_move");
  move_pieces(c_.rt.comm, sends, receives);
  for (const auto &[base, h] : installs) {
    copy_to_window(base + kWriterOffset, reinterpret_cast<const std::byte *>(&h) + kWriterOffset, kWriterBytes);
  }
  // Drops last: values were read from some of these slots.
  for (const auto &buf : my_orders) {
    for (const Order &o : unpack<Order>(buf)) {
      if (o.kind == Order::kDrop) c_.holder.slots.drop(SlotId{o.key, static_cast<Ns>(o.ns)});
    }
  }
}

void Rereplication::totals(store_recovery_t &report, std::vector<store_key_t> &all_lost) {
  std::uint64_t mine[7] = {bytes_moved_, bytes_lost_, keys_, repaired_, forward_, back_, quarantined_}, sum[7] = {};
  check_recovery(MPI_Allreduce(mine, sum, 7, MPI_UINT64_T, MPI_SUM, c_.rt.comm), "MPI_Allreduce");
  all_lost = allgatherv(c_.rt.comm, lost_);
  std::sort(all_lost.begin(), all_lost.end());
  report.bytes_moved = sum[0];
  report.bytes_lost = sum[1];
  report.keys = sum[2];
  report.keys_repaired = sum[3];
  report.lost_count = all_lost.size();
  report.tx_rolled_forward = sum[4];
  report.tx_rolled_back = sum[5];
  report.bytes_quarantined = sum[6];
}

} // namespace rmastore::internal
