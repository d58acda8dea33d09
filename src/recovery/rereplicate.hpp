// store_recover's re-replication, on the survivors once the runtime is rebuilt: every key back
// to its full number of copies under the new placement, every interrupted transaction decided
// (decide.hpp), and the keys without a complete copy left marked lost.
//
// Steps, each collective over the store's communicator:
//   1. every survivor reports each local copy, and each key it records as a witness, to its
//      coordinator, the first holder under the new placement; every survivor learns each
//      committer's newest decision record;
//   2. each coordinator decides its slots and sends orders: send a copy to a holder that lacks
//      it, mark a key lost, drop a copy that is no longer placed here; record a key at a witness
//      that lacks its record, drop a record that is no longer placed there;
//   3. senders describe what they send, and receivers make room for it;
//   4. every value moves in one collective, straight from slot to slot; then headers go in and
//      dropped slots are freed;
//   5. everybody learns the totals and the lost keys.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "client/core.hpp"
#include "common/decide.hpp"

namespace rmastore::internal {

class Rereplication {
public:
  explicit Rereplication(Core &core);
  // Fills the report's re-replication fields and the sorted keys lost, on every survivor alike.
  // `nobody_lost`: every process of the old communicator survived, with the same ranks; the
  // write grants and the key cache stay valid then, and are kept.
  // quarantined_before: this process's SlotStore::quarantined_bytes() after the last
  // store_recover that succeeded (0 before any).
  void run(store_recovery_t &report, std::vector<store_key_t> &all_lost, bool nobody_lost,
           std::uint64_t quarantined_before);

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
    enum Kind : std::uint32_t { kSend = 0, kDrop = 1, kMarkLost = 2, kRecord = 3, kUnrecord = 4 };
    std::uint64_t key;
    std::uint32_t ns; // the slot the order is about
    std::uint32_t kind;
    std::int32_t to;       // kSend: destination rank
    std::uint32_t from_ns; // kSend: the slot the value comes from (kPending: roll forward)
  };

private:
  using SlotKey = std::pair<std::uint32_t, std::uint64_t>; // (namespace, key)
  using Buffers = std::vector<std::vector<std::byte>>;     // one per rank

  // Step 1: the reports of every slot this process coordinates, keys with records but no copy
  // included; the records go to recorded_.
  std::map<SlotKey, std::vector<Report>> gather();
  // Each committer's newest decision record (its stable id -> transaction), on every survivor.
  std::map<std::uint64_t, std::uint64_t> commits(const std::map<SlotKey, std::vector<Report>> &reports);
  // Step 2: this process's orders to every rank.
  Buffers decide(const std::map<SlotKey, std::vector<Report>> &reports, const CommittedFn &is_committed);
  // Steps 3 and 4, carrying out the orders this process received.
  void carry_out(const Buffers &orders);
  void totals(store_recovery_t &report, std::vector<store_key_t> &all_lost);

  Core &c_;
  std::shared_ptr<const View> view_;
  std::size_t n_;
  std::vector<store_key_t> lost_;
  std::map<std::uint64_t, std::vector<int>> recorded_; // key -> ranks that reported a record of it
  std::uint64_t bytes_lost_ = 0, bytes_moved_ = 0, keys_ = 0, repaired_ = 0, forward_ = 0, back_ = 0;
  std::uint64_t quarantined_ = 0; // bytes this process copied out of slots a failed writer held
};

} // namespace rmastore::internal
