// Recovery and repair decisions, as pure functions with no MPI and no shared state: what a copy
// in a slot is worth, and, from what the holders of a slot report, which copy wins, whether an
// interrupted transaction rolls forward or back, where the winner must be copied and whether the
// key is lost.
//
// store_recover (rereplicate.cpp, both variants) and the background repairs of the localized
// variant (repair.cpp) decide with these functions, so that one failure is judged the same way
// whichever path meets it. tests/test_decide.cpp checks them exhaustively over small states.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/slot.hpp"

namespace rmastore::internal {

enum class CopyState : std::uint8_t {
  kEmpty,    // never written: a valid copy of nothing
  kLost,     // a "lost" marker: every copy of the key was lost, and it was not put again
  kComplete, // a complete, untorn value
  kTorn,     // a header or value that does not check, or that names another slot
  kDeleted,  // a tombstone: the key was deleted at its version (complete and untorn, like a value)
};

// The copy in the slot at `base` (header first, `capacity` value bytes per half) of slot
// (key, ns), with its header already read into `h`. Reads the value of in-place copies.
CopyState classify_copy(const SlotHeader &h, const std::byte *base, std::uint64_t capacity, std::uint64_t key, Ns ns);

// What one holder reports about its copy of a slot.
struct CopyReport {
  int holder = -1;
  CopyState state = CopyState::kEmpty;
  std::uint64_t version = kNoVersion;
  std::uint64_t length = 0;
  std::uint32_t writer = 0; // stable id; pending copies: the committer's
  std::uint64_t tx = 0;     // pending copies: the transaction's sequence number
};

struct SlotDecision {
  enum class Outcome : std::uint8_t {
    kNothing, // no value, and none was ever lost: the key does not exist (or is not a value)
    kLost,    // every copy is gone: mark the holders' copies lost
    kRestore, // `version` must be on every holder
  };
  Outcome outcome = Outcome::kNothing;
  std::uint64_t version = kNoVersion;
  std::uint64_t length = 0;
  std::uint32_t writer = 0;
  // The winner is a committed transaction's pending value, newer than every complete value.
  bool roll_forward = false;
  // The winner is a tombstone (kRestore): the key was deleted, and everything of it goes.
  bool deleted = false;
  // A pending value newer than the winner belongs to a transaction that did not commit: it is
  // discarded. Counted only when nothing rolled forward.
  bool roll_back = false;
  // The pending copies must go: some is newer than the value (rolled forward or not).
  bool drop_pending = false;
  std::vector<int> sources; // holders of the winning copy (in the pending slot if roll_forward)
  std::vector<int> targets; // members of `holders` that lack it
};

// Whether transaction `tx` of committer `writer` committed.
using CommittedFn = std::function<bool(std::uint32_t writer, std::uint64_t tx)>;

// Decides a slot from its holders' reports.
//   is_value - the slot holds an application value (only values are lost or rolled forward);
//   holders  - the slot's holders under the current placement;
//   copies   - reports of the slot's copies, from holders or not (in no particular order);
//   pending  - reports of the key's pending copies (values only);
//   known    - the key is known to have been put (a put wrote all its copies and registered it);
//   committed - asked only of complete pending copies newer than every complete value, newest
//              first, until one says yes.
// Tombstones count as complete copies: the newest version wins, value or tombstone, and a
// tombstone that wins sets `deleted`.
// The key is lost when it is a value with no complete copy and no committed pending one, and
// either it is known or some copy is more than an empty slot (a torn or lost one). A known key
// is lost even when survivors report empty slots: those were made for puts that did not reach
// them, while the copies were elsewhere. A first put that died before registering its key and
// left a torn copy is reported lost too: the safe side, never a silent "not found".
SlotDecision decide_slot(bool is_value, const std::vector<int> &holders, const std::vector<CopyReport> &copies,
                         const std::vector<CopyReport> &pending, bool known, const CommittedFn &committed);

} // namespace rmastore::internal
