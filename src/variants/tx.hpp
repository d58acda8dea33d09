// Transactions: all or nothing across process failures (see include/rmastore/store.h).
//
// Commit, for a transaction T of this process:
//   1. write grants (global) or locks (localized) for every key's value and its pending slot
//      (namespace kPending), and for the decision record;
//   2. every value goes to the pending slots of its holders, tagged with T (a deleted key's
//      tombstone too);
//   3. the decision record (namespace kTxRecord, named by this process, version T) is written
//      to its holders. This is the commit point: a record on any survivor means committed;
//   4. every value goes to its value slots (a deleted key's tombstone; the variant then drops
//      its records and frees its slots, as store_delete does).
// What a failure interrupted is decided from what survives (decide.hpp): by store_recover in
// the global variant, by the repairs in the localized one. Pending values of a committed T that
// are newer than the key's value are rolled forward, all others discarded.
//
// Step 1 is the variant's; steps 2 to 4 are the same in both and live here. Within step 2 and
// within step 4 the writes overlap (Engine::write_many): three rounds of writes in all, where
// single puts of the same keys take one round each. A transaction of one key is committed as a
// put (or a delete) of it: a put is all or nothing for one key already.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "client/engine.hpp"
#include "common/config.hpp"
#include "variants/variant.hpp"

namespace rmastore::internal {

struct TxItem {
  std::uint64_t key;
  const TxOp *op;        // a value, or a delete (a tombstone in both slots)
  std::uint64_t version; // the value's version once committed
  std::vector<Copy> value_copies, pending_copies;
};

// The decision record's contents: the sequence number, then the keys (for diagnosis; recovery
// needs only the record's version).
std::vector<std::uint64_t> decision_record(std::uint64_t seq, const TxValues &values);

// The record of process `id` names its slot.
inline SlotId record_slot(int id) {
  return SlotId{static_cast<std::uint64_t>(id), Ns::kTxRecord};
}

// Writes many slots' copies, overlapped (Engine::write_many, with `between` run between two
// slots' writes).
using SlotsWriter = std::function<void(std::vector<Engine::WriteJob> &jobs, void (*between)())>;

// What a commit wrote, each job with the copies written (items' order for pending and values).
struct CommitWrites {
  std::vector<Engine::WriteJob> pending, record, values;
};

// Steps 2 to 4 of a commit with sequence number `seq`, with their fault points; `engine` makes
// the headers.
CommitWrites write_commit(std::uint64_t seq, const std::vector<TxItem> &items, const SlotId &record,
                          const std::vector<Copy> &record_copies, const std::vector<std::uint64_t> &contents,
                          const Engine &engine, const SlotsWriter &write);

} // namespace rmastore::internal
