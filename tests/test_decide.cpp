// The recovery and repair decisions (src/common/decide.hpp), without MPI: named cases, then every state
// of two holders and one other reporter checked against the rules written out plainly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/decide.hpp"

using namespace rmastore::internal;

namespace {

using Outcome = SlotDecision::Outcome;

CopyReport complete(int holder, std::uint64_t version, std::uint32_t writer = 1, std::uint64_t tx = 0) {
  return CopyReport{holder, CopyState::kComplete, version, version * 10, writer, tx};
}
CopyReport with_state(int holder, CopyState state) {
  return CopyReport{holder, state, kNoVersion, 0, 0, 0};
}
CopyReport tombstone(int holder, std::uint64_t version, std::uint32_t writer = 1, std::uint64_t tx = 0) {
  return CopyReport{holder, CopyState::kDeleted, version, 0, writer, tx};
}
const CommittedFn kNone = [](std::uint32_t, std::uint64_t) { return false; };

} // namespace

TEST(Decide, NewestCompleteCopyWinsAndGoesWhereItIsMissing) {
  const SlotDecision d =
      decide_slot(true, {0, 1, 2}, {complete(0, 3), complete(1, 5), with_state(2, CopyState::kTorn)}, {}, true, kNone);
  EXPECT_EQ(d.outcome, Outcome::kRestore);
  EXPECT_EQ(d.version, 5u);
  EXPECT_EQ(d.length, 50u);
  EXPECT_EQ(d.sources, std::vector<int>{1});
  EXPECT_EQ(d.targets, (std::vector<int>{0, 2}));
  EXPECT_FALSE(d.roll_forward || d.roll_back || d.drop_pending);
}

TEST(Decide, OlderCommittedTransactionRollsForwardWhenTheNewestDidNot) {
  // The newest pending value (version 4) belongs to a transaction that never committed; an older
  // one (version 3) committed but its values were not all written. The committed one wins.
  std::vector<std::pair<std::uint32_t, std::uint64_t>> asked;
  const CommittedFn committed = [&](std::uint32_t w, std::uint64_t tx) {
    asked.emplace_back(w, tx);
    return w == 7 && tx == 1;
  };
  const SlotDecision d = decide_slot(true, {0, 1}, {complete(0, 2), complete(1, 2)},
                                     {complete(0, 3, 7, 1), complete(1, 4, 8, 9)}, true, committed);
  EXPECT_EQ(d.outcome, Outcome::kRestore);
  EXPECT_TRUE(d.roll_forward);
  EXPECT_EQ(d.version, 3u);
  EXPECT_EQ(d.writer, 7u);
  EXPECT_EQ(d.sources, std::vector<int>{0});
  EXPECT_EQ(d.targets, (std::vector<int>{0, 1}));
  EXPECT_TRUE(d.drop_pending);
  const std::vector<std::pair<std::uint32_t, std::uint64_t>> expect{{8, 9}, {7, 1}};
  EXPECT_EQ(asked, expect); // newest first
}

TEST(Decide, KnownKeyWithOnlyEmptySlotsIsLost) {
  // A holder made an empty slot for a put that never wrote it; the copies were elsewhere.
  const SlotDecision d = decide_slot(true, {0, 1}, {with_state(1, CopyState::kEmpty)}, {}, true, kNone);
  EXPECT_EQ(d.outcome, Outcome::kLost);
}

TEST(Decide, LostMarkerStaysLost) {
  const SlotDecision d = decide_slot(true, {0, 1}, {with_state(0, CopyState::kLost)}, {}, false, kNone);
  EXPECT_EQ(d.outcome, Outcome::kLost);
}

TEST(Decide, UnknownKeyWithEmptySlotsDoesNotExist) {
  const SlotDecision d = decide_slot(true, {0, 1}, {with_state(0, CopyState::kEmpty)}, {}, false, kNone);
  EXPECT_EQ(d.outcome, Outcome::kNothing);
}

TEST(Decide, RecordsAreNeverLostNorRolledForward) {
  const SlotDecision d = decide_slot(false, {0, 1}, {with_state(0, CopyState::kTorn)}, {complete(0, 9)}, true,
                                     [](std::uint32_t, std::uint64_t) { return true; });
  EXPECT_EQ(d.outcome, Outcome::kNothing);
  EXPECT_FALSE(d.roll_forward || d.drop_pending);
}

TEST(Decide, ClassifyCopy) {
  alignas(64) std::byte slot[kHeaderBytes + 2 * 64] = {};
  const auto header = [&] {
    SlotHeader h;
    std::memcpy(&h, slot, sizeof h);
    return h;
  };
  const auto put = [&](const SlotHeader &h) { std::memcpy(slot, &h, sizeof h); };
  put(empty_header(64, 5, Ns::kValue));
  EXPECT_EQ(classify_copy(header(), slot, 64, 5, Ns::kValue), CopyState::kEmpty);
  EXPECT_EQ(classify_copy(header(), slot, 64, 6, Ns::kValue), CopyState::kTorn);   // another key's
  EXPECT_EQ(classify_copy(header(), slot, 64, 5, Ns::kPending), CopyState::kTorn); // another slot's
  put(lost_header(64, 5, Ns::kValue));
  EXPECT_EQ(classify_copy(header(), slot, 64, 5, Ns::kValue), CopyState::kLost);
  SlotHeader h = empty_header(64, 5, Ns::kValue);
  h.version = 3;
  h.length = 8;
  std::memset(slot + kHeaderBytes, 0x5a, 8);
  h.checksum = slot_checksum(h, slot + kHeaderBytes);
  put(h);
  EXPECT_EQ(classify_copy(header(), slot, 64, 5, Ns::kValue), CopyState::kComplete);
  slot[kHeaderBytes + 3] = std::byte{0}; // torn value
  EXPECT_EQ(classify_copy(header(), slot, 64, 5, Ns::kValue), CopyState::kTorn);
  slot[kHeaderBytes + 3] = std::byte{0x5a};
  h.length = 65; // longer than the slot
  h.checksum = slot_checksum(h, slot + kHeaderBytes);
  put(h);
  EXPECT_EQ(classify_copy(header(), slot, 64, 5, Ns::kValue), CopyState::kTorn);
}

TEST(Decide, ClassifySummedCopy) {
  constexpr std::uint64_t kCap = 32 * 1024;
  std::vector<std::byte> mem(kHeaderBytes + 2 * kCap + 64);
  std::byte *slot = mem.data() + (64 - reinterpret_cast<std::uintptr_t>(mem.data()) % 64) % 64;
  SlotHeader h = empty_header(kCap, 5, Ns::kValue);
  h.version = 3;
  h.length = kInPlaceLimit + 1;
  h.flags = make_flags(kFlagSummed | kFlagHalfB, Ns::kValue);
  std::byte *value = slot + value_offset(h, kCap);
  std::memset(value, 0x33, h.length);
  h.checksum = copy_checksum(h, value);
  std::memcpy(slot, &h, sizeof h);
  EXPECT_EQ(classify_copy(h, slot, kCap, 5, Ns::kValue), CopyState::kComplete);
  value[h.length - 1] = std::byte{0}; // the last byte of a value still arriving
  EXPECT_EQ(classify_copy(h, slot, kCap, 5, Ns::kValue), CopyState::kTorn);
}

TEST(Decide, NewerTombstoneDeletesOlderValueSurvivesOlderTombstone) {
  // A delete that stopped half-way: one holder has its tombstone, the other the old value.
  SlotDecision d = decide_slot(true, {0, 1}, {complete(0, 3), tombstone(1, 4)}, {}, true, kNone);
  EXPECT_EQ(d.outcome, Outcome::kRestore);
  EXPECT_TRUE(d.deleted);
  EXPECT_EQ(d.version, 4u);
  EXPECT_EQ(d.sources, std::vector<int>{1});
  EXPECT_EQ(d.targets, std::vector<int>{0});
  // A put after a delete: the value is newer than the tombstone.
  d = decide_slot(true, {0, 1}, {complete(0, 5), tombstone(1, 4)}, {}, true, kNone);
  EXPECT_EQ(d.outcome, Outcome::kRestore);
  EXPECT_FALSE(d.deleted);
  EXPECT_EQ(d.version, 5u);
}

TEST(Decide, CommittedDeleteRollsForward) {
  const CommittedFn yes = [](std::uint32_t, std::uint64_t) { return true; };
  const SlotDecision d =
      decide_slot(true, {0, 1}, {complete(0, 2), complete(1, 2)}, {tombstone(0, 3, 7, 1)}, true, yes);
  EXPECT_EQ(d.outcome, Outcome::kRestore);
  EXPECT_TRUE(d.roll_forward);
  EXPECT_TRUE(d.deleted);
  EXPECT_EQ(d.sources, std::vector<int>{0});
}

// Every combination of: value copies of holders 0 and 1 and of a non-holder 2 (absent, empty,
// lost, torn, version 1, version 2, a tombstone of version 4); pending copies of each (absent,
// torn, version 2 of transaction A, version 3 of transaction B, a tombstone of version 3 of
// transaction B); which transactions committed; known or not; value or record. Each decision is
// checked against the rules stated directly.
TEST(Decide, Exhaustive) {
  enum V { kAbsent, kEmpty, kLostV, kTornV, kV1, kV2, kD4, kVCount };
  enum P { kNoP, kTornP, kPA, kPB, kPD, kPCount };
  const std::vector<int> holders{0, 1};
  std::size_t states = 0, forwards = 0, backs = 0, losts = 0;
  for (int code = 0; code < kVCount * kVCount * kVCount; ++code) {
    const int v[3] = {code % kVCount, code / kVCount % kVCount, code / kVCount / kVCount};
    for (int pcode = 0; pcode < kPCount * kPCount * kPCount; ++pcode) {
      const int p[3] = {pcode % kPCount, pcode / kPCount % kPCount, pcode / kPCount / kPCount};
      for (int commits = 0; commits < 4; ++commits) {
        for (int known = 0; known < 2; ++known) {
          for (int is_value = 0; is_value < 2; ++is_value) {
            ++states;
            std::vector<CopyReport> copies, pending;
            for (int r = 0; r < 3; ++r) {
              switch (v[r]) {
              case kEmpty:
                copies.push_back(with_state(r, CopyState::kEmpty));
                break;
              case kLostV:
                copies.push_back(with_state(r, CopyState::kLost));
                break;
              case kTornV:
                copies.push_back(with_state(r, CopyState::kTorn));
                break;
              case kV1:
                copies.push_back(complete(r, 1));
                break;
              case kV2:
                copies.push_back(complete(r, 2));
                break;
              case kD4:
                copies.push_back(tombstone(r, 4));
                break;
              default:
                break;
              }
              switch (p[r]) {
              case kTornP:
                pending.push_back(CopyReport{r, CopyState::kTorn, 3, 30, 8, 2});
                break;
              case kPA:
                pending.push_back(complete(r, 2, 7, 1));
                break;
              case kPB:
                pending.push_back(complete(r, 3, 8, 2));
                break;
              case kPD:
                pending.push_back(tombstone(r, 3, 8, 2));
                break;
              default:
                break;
              }
            }
            const bool a_committed = (commits & 1) != 0, b_committed = (commits & 2) != 0;
            std::vector<std::uint64_t> asked_versions;
            const CommittedFn committed = [&](std::uint32_t w, std::uint64_t tx) {
              asked_versions.push_back(w == 7 ? 2 : 3);
              return (w == 7 && tx == 1 && a_committed) || (w == 8 && tx == 2 && b_committed);
            };
            const SlotDecision d = decide_slot(is_value != 0, holders, copies, pending, known != 0, committed);

            // The rules.
            const auto version_of = [](int state) -> std::uint64_t {
              return state == kV1 ? 1 : state == kV2 ? 2 : state == kD4 ? 4 : kNoVersion;
            };
            std::uint64_t best = kNoVersion;
            bool written = false;
            for (int r = 0; r < 3; ++r) {
              best = std::max<std::uint64_t>(best, version_of(v[r]));
              written = written || (v[r] != kAbsent && v[r] != kEmpty);
            }
            const bool best_deleted = best == 4;
            bool newer = false;
            std::uint64_t forward = kNoVersion;
            for (int r = 0; r < 3 && is_value; ++r) {
              const std::uint64_t pv = p[r] == kPA ? 2 : (p[r] == kPB || p[r] == kPD) ? 3 : kNoVersion;
              if (pv == kNoVersion || pv <= best) continue;
              newer = true;
              if ((p[r] == kPA && a_committed) || ((p[r] == kPB || p[r] == kPD) && b_committed))
                forward = std::max(forward, pv);
            }
            // Transaction B's copies are a value or a tombstone: the first holder's decides.
            int forward_state = kNoP;
            for (int r = 0; r < 3 && forward != kNoVersion && forward_state == kNoP; ++r) {
              const bool at = forward == 2 ? p[r] == kPA : (p[r] == kPB || p[r] == kPD);
              if (at) forward_state = p[r];
            }
            SCOPED_TRACE(testing::Message() << "copies " << v[0] << v[1] << v[2] << " pending " << p[0] << p[1] << p[2]
                                            << " commits " << commits << " known " << known << " value " << is_value);
            ASSERT_EQ(d.drop_pending, newer);
            ASSERT_EQ(d.roll_forward, forward != kNoVersion);
            ASSERT_EQ(d.roll_back, newer && forward == kNoVersion);
            // Asked about newer complete pending values only, newest first, until a yes.
            for (std::size_t i = 0; i < asked_versions.size(); ++i) {
              ASSERT_GT(asked_versions[i], best);
              if (i > 0) {
                ASSERT_LT(asked_versions[i], asked_versions[i - 1]);
              }
            }
            if (!is_value) {
              ASSERT_TRUE(asked_versions.empty());
            }
            std::vector<int> sources;
            if (forward != kNoVersion) {
              ASSERT_EQ(d.outcome, Outcome::kRestore);
              ASSERT_EQ(d.version, forward);
              ASSERT_EQ(d.deleted, forward_state == kPD);
              ASSERT_EQ(asked_versions.back(), forward);
              for (int r = 0; r < 3; ++r) {
                if (p[r] == forward_state) sources.push_back(r);
              }
              ASSERT_EQ(d.sources, sources);
              ASSERT_EQ(d.targets, holders);
              ++forwards;
              continue;
            }
            backs += d.roll_back ? 1 : 0;
            if (best == kNoVersion) {
              const bool lost = is_value && (known || written);
              ASSERT_EQ(d.outcome, lost ? Outcome::kLost : Outcome::kNothing);
              ASSERT_TRUE(d.sources.empty() && d.targets.empty());
              losts += lost ? 1 : 0;
              continue;
            }
            ASSERT_EQ(d.outcome, Outcome::kRestore);
            ASSERT_EQ(d.version, best);
            ASSERT_EQ(d.deleted, best_deleted);
            ASSERT_EQ(d.length, best_deleted ? 0 : best * 10);
            std::vector<int> targets;
            for (int r = 0; r < 3; ++r) {
              const bool has = version_of(v[r]) == best;
              if (has) sources.push_back(r);
              if (!has && r < 2) targets.push_back(r);
            }
            ASSERT_EQ(d.sources, sources);
            ASSERT_EQ(d.targets, targets);
          }
        }
      }
    }
  }
  // The space covers every outcome.
  EXPECT_EQ(states, std::size_t{343 * 125 * 4 * 2 * 2});
  EXPECT_GT(forwards, 0u);
  EXPECT_GT(backs, 0u);
  EXPECT_GT(losts, 0u);
}

TEST(Decide, ClassifiesTombstones) {
  alignas(64) std::byte slot[kHeaderBytes + 64]{};
  SlotHeader h{};
  h.capacity = 64;
  h.key = 5;
  h.version = 3;
  h.flags = make_flags(kFlagDeleted, Ns::kValue);
  h.checksum = slot_checksum(h, slot + kHeaderBytes);
  store_header(slot, h);
  EXPECT_EQ(classify_copy(load_header(slot), slot, 64, 5, Ns::kValue), CopyState::kDeleted);
  EXPECT_TRUE(slot_deleted(load_header(slot)));
  // A tombstone carries no value: one with a length does not check.
  h.length = 8;
  h.checksum = slot_checksum(h, slot + kHeaderBytes);
  store_header(slot, h);
  EXPECT_EQ(classify_copy(load_header(slot), slot, 64, 5, Ns::kValue), CopyState::kTorn);
}
