#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "common/slot.hpp"

using namespace rmastore::internal;

TEST(SlotLayout, HeaderIsOneCacheLineWithWriterPartAtTheEnd) {
  EXPECT_EQ(sizeof(SlotHeader), 64u);
  EXPECT_EQ(offsetof(SlotHeader, capacity), 0u);
  EXPECT_EQ(kWriterOffset, 16u);
  EXPECT_EQ(kWriterOffset + kWriterBytes, kHeaderBytes);
  // Namespace and transaction share the flags word with the flag bits.
  const std::uint64_t f = make_flags(kFlagHalfB, Ns::kPending, 12345);
  EXPECT_EQ(flag_bits(f), kFlagHalfB);
  EXPECT_EQ(flags_ns(f), Ns::kPending);
  EXPECT_EQ(flags_tx(f), 12345u);
}

TEST(SlotLayout, CapacityClassesArePowersOfTwoAboveTheMinimum) {
  EXPECT_EQ(capacity_class(0, 64), 64u);
  EXPECT_EQ(capacity_class(64, 64), 64u);
  EXPECT_EQ(capacity_class(65, 64), 128u);
  EXPECT_EQ(capacity_class(1000, 8), 1024u);
  EXPECT_EQ(capacity_class(std::size_t{1} << 28, 64), std::size_t{1} << 28);
  for (std::size_t c : {8u, 64u, 100u, 4096u}) EXPECT_EQ(slot_bytes(c) % 64, 0u);
  EXPECT_GE(slot_bytes(100), kHeaderBytes + 100);
}

namespace {
SlotHeader header_for(const std::vector<unsigned char> &v, std::uint64_t version) {
  SlotHeader h{};
  h.capacity = 1 << 20;
  h.key = 42;
  h.version = version;
  h.length = v.size();
  h.checksum = slot_checksum(h, v.data());
  return h;
}
} // namespace

TEST(SlotChecksum, AcceptsTheValueItWasComputedFor) {
  for (std::size_t len : {0u, 1u, 7u, 8u, 31u, 32u, 33u, 1000u, 16384u}) {
    std::vector<unsigned char> v(len, 0xab);
    const SlotHeader h = header_for(v, 3);
    EXPECT_TRUE(slot_valid(h, v.data())) << len;
  }
}

TEST(SlotChecksum, DetectsEveryChangedByteAndHeaderField) {
  std::mt19937 rng(5);
  std::vector<unsigned char> v(300);
  for (auto &b : v) b = static_cast<unsigned char>(rng());
  const SlotHeader h = header_for(v, 9);
  for (std::size_t i = 0; i < v.size(); ++i) {
    auto w = v;
    w[i] ^= 1;
    EXPECT_FALSE(slot_valid(h, w.data())) << "byte " << i;
  }
  SlotHeader g = h;
  g.version = 10;
  EXPECT_FALSE(slot_valid(g, v.data()));
  g = h;
  g.key = 43;
  EXPECT_FALSE(slot_valid(g, v.data()));
  g = h;
  g.length = 299;
  EXPECT_FALSE(slot_valid(g, v.data()));
  g = h;
  g.version = kNoVersion;
  EXPECT_FALSE(slot_valid(g, v.data()));
}

TEST(SlotChecksum, DetectsTornMixesOfTwoValues) {
  // A torn read is a prefix/suffix or interleaving of an old and a new value.
  std::vector<unsigned char> oldv(4096, 1), newv(4096, 2);
  const SlotHeader hnew = header_for(newv, 2), hold = header_for(oldv, 1);
  for (std::size_t cut = 1; cut < 4096; cut += 61) {
    auto mix = newv;
    std::memcpy(mix.data(), oldv.data(), cut);
    EXPECT_FALSE(slot_valid(hnew, mix.data()));
    EXPECT_FALSE(slot_valid(hold, mix.data()));
  }
}

TEST(SlotChecksum, CoversEveryBitOfTheWritersHeader) {
  // Every field from key to flags, with the checksum field itself excluded (slot_checksum puts
  // the value's hash in its place before hashing the header). slot_checksum reads `length`
  // bytes: its length flips stay within the buffer (the low byte of 100 flips to at most 228).
  std::vector<unsigned char> v(256, 7);
  SlotHeader h{};
  h.capacity = 1 << 20;
  h.key = 42;
  h.version = 5;
  h.length = 100;
  h.checksum = slot_checksum(h, v.data());
  SlotHeader b = h;
  b.length = kInPlaceLimit + 1;
  b.checksum = header_checksum(b);
  const std::size_t sum_at = offsetof(SlotHeader, checksum), length_at = offsetof(SlotHeader, length);
  for (std::size_t byte = kWriterOffset; byte < kHeaderBytes; ++byte) {
    if (byte >= sum_at && byte < sum_at + sizeof(std::uint64_t)) continue;
    for (int bit = 0; bit < 8; ++bit) {
      const auto flip = static_cast<unsigned char>(1 << bit);
      SlotHeader t = h, u = b;
      reinterpret_cast<unsigned char *>(&t)[byte] ^= flip;
      reinterpret_cast<unsigned char *>(&u)[byte] ^= flip;
      if (byte <= length_at || byte >= length_at + sizeof(std::uint64_t)) {
        EXPECT_NE(slot_checksum(t, v.data()), h.checksum) << "byte " << byte << " bit " << bit;
      }
      EXPECT_NE(header_checksum(u), b.checksum) << "byte " << byte << " bit " << bit;
    }
  }
}

TEST(SlotBuffered, AcceptsOnlyTwoIdenticalValidHeaders) {
  SlotHeader h{};
  h.capacity = 1 << 20;
  h.key = 1;
  h.version = 4;
  h.length = kInPlaceLimit + 1;
  h.flags = make_flags(kFlagHalfB, Ns::kValue);
  h.checksum = header_checksum(h);
  EXPECT_FALSE(in_place(h.length));
  EXPECT_TRUE(in_place(kInPlaceLimit));
  EXPECT_TRUE(buffered_valid(h, h));
  for (std::size_t byte = kWriterOffset; byte < kHeaderBytes; ++byte) {
    SlotHeader torn = h;
    reinterpret_cast<unsigned char *>(&torn)[byte] ^= 0x40;
    EXPECT_FALSE(buffered_valid(torn, torn)) << "a torn header byte " << byte << " passed";
  }
  SlotHeader g = h;
  g.version = 5; // a put switched the header in between
  g.checksum = header_checksum(g);
  EXPECT_FALSE(buffered_valid(h, g));
  g = h;
  g.flags = make_flags(0, Ns::kValue); // switched to the other half in between
  g.checksum = header_checksum(g);
  EXPECT_FALSE(buffered_valid(h, g));
  EXPECT_TRUE(buffered_valid(g, g));
  g = h;
  g.owner = kSlotRetired;
  EXPECT_FALSE(buffered_valid(g, g));
  EXPECT_FALSE(buffered_valid(h, g)) << "retired between the two reads";
  g = h;
  g.owner = lock_word(3, 0, 0);
  EXPECT_TRUE(buffered_valid(h, g)) << "a lock taken between the two reads changes nothing";
  g = h;
  g.version = kNoVersion;
  g.checksum = header_checksum(g);
  EXPECT_FALSE(buffered_valid(g, g));
  // An in-place reader never accepts a double-buffered copy, whatever its checksum field holds.
  std::vector<unsigned char> v(h.length, 3);
  h.checksum = slot_checksum(h, v.data());
  EXPECT_FALSE(slot_valid(h, v.data()));
}

// A summed double-buffered copy is validated by its header and value alone: no second header.
TEST(SlotSummed, HeaderAndValueValidateEachOther) {
  SlotHeader h{};
  h.capacity = 1 << 17;
  h.key = 2;
  h.version = 7;
  h.length = kInPlaceLimit + 100;
  h.flags = make_flags(kFlagSummed | kFlagHalfB, Ns::kValue);
  ASSERT_TRUE(summed_length(h.length));
  std::vector<unsigned char> v(h.length);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<unsigned char>(i * 31);
  h.checksum = copy_checksum(h, v.data());
  EXPECT_EQ(h.checksum, slot_checksum(h, v.data()));
  EXPECT_EQ(h.checksum, slot_checksum_of_sum(h, value_sum(v.data(), v.size())));
  EXPECT_TRUE(summed_valid(h, v.data()));
  EXPECT_FALSE(buffered_valid(h, h)) << "its checksum is not the header's";
  EXPECT_FALSE(slot_valid(h, v.data())) << "an in-place reader never accepts it";
  for (std::size_t i : {std::size_t{0}, std::size_t{4096}, v.size() - 1}) {
    std::vector<unsigned char> w = v;
    w[i] ^= 1; // a byte of a later put into the same half
    EXPECT_FALSE(summed_valid(h, w.data())) << "value byte " << i;
  }
  for (std::size_t byte = kWriterOffset; byte < kHeaderBytes; ++byte) {
    SlotHeader torn = h;
    reinterpret_cast<unsigned char *>(&torn)[byte] ^= 0x40;
    EXPECT_FALSE(summed_valid(torn, v.data())) << "a torn header byte " << byte << " passed";
  }
  SlotHeader g = h;
  g.owner = kSlotRetired;
  EXPECT_FALSE(summed_valid(g, v.data()));
  g = h;
  g.owner = lock_word(3, 0, 0);
  EXPECT_TRUE(summed_valid(g, v.data())) << "the lock word is not the writer's";
  // Unsummed copies, and lengths outside the summed range, are never accepted as summed.
  g = h;
  g.flags = make_flags(kFlagHalfB, Ns::kValue);
  g.checksum = header_checksum(g);
  EXPECT_EQ(copy_checksum(g, nullptr), g.checksum);
  EXPECT_FALSE(summed_valid(g, v.data()));
  std::vector<unsigned char> big(kSummedLimit + 1, 1);
  g = h;
  g.length = big.size();
  g.checksum = slot_checksum(g, big.data());
  EXPECT_FALSE(summed_length(g.length));
  EXPECT_FALSE(summed_valid(g, big.data()));
}

TEST(SlotSummed, CopyValueKeepsValidCopiesValidAndTornOnesTorn) {
  SlotAllocator a(64, 1 << 20, [](void *, std::size_t) {});
  for (const bool torn : {false, true}) {
    auto from = a.allocate(1 << 16, 5, Ns::kValue);
    SlotHeader h{};
    h.capacity = from.capacity;
    h.key = 5;
    h.version = 3;
    h.length = kSummedLimit - 100;
    h.flags = make_flags(kFlagHalfB | kFlagSummed, Ns::kValue);
    std::vector<std::byte> v(h.length, std::byte{0x5a});
    h.checksum = slot_checksum(h, v.data());
    std::memcpy(from.base, &h, sizeof h);
    std::memcpy(from.base + value_offset(h, from.capacity), v.data(), v.size());
    if (torn) from.base[value_offset(h, from.capacity) + 7] = std::byte{0};
    auto to = a.allocate(1 << 17, 5, Ns::kValue);
    SlotAllocator::copy_value(from, to);
    SlotHeader g;
    std::memcpy(&g, to.base, sizeof g);
    EXPECT_EQ(value_offset(g, to.capacity), kHeaderBytes);
    EXPECT_TRUE(slot_summed(g));
    EXPECT_EQ(summed_valid(g, to.base + kHeaderBytes), !torn) << (torn ? "a torn copy was blessed" : "");
  }
}

TEST(SlotBuffered, ValueOffsetFollowsTheHeader) {
  SlotHeader h{};
  EXPECT_EQ(value_offset(h, 1 << 16), kHeaderBytes);
  h.flags = make_flags(kFlagHalfB, Ns::kValue);
  EXPECT_EQ(value_offset(h, 1 << 16), kHeaderBytes + (1u << 16));
  EXPECT_EQ(slot_bytes(kInPlaceLimit), kHeaderBytes + kInPlaceLimit) << "small slots have one half";
  EXPECT_EQ(slot_bytes(2 * kInPlaceLimit), kHeaderBytes + 4 * kInPlaceLimit) << "large slots have two";
}

TEST(SlotBuffered, CopyValueMovesTheCurrentHalfToTheFirst) {
  int attaches = 0;
  SlotAllocator a(64, 1 << 20, [&](void *, std::size_t) { ++attaches; });
  auto from = a.allocate(1 << 16, 5, Ns::kValue);
  SlotHeader h{};
  h.capacity = from.capacity;
  h.key = 5;
  h.version = 3;
  h.length = 40000;
  h.flags = make_flags(kFlagHalfB, Ns::kValue);
  h.checksum = header_checksum(h);
  std::memcpy(from.base, &h, sizeof h);
  std::memset(from.base + value_offset(h, from.capacity), 0x5a, h.length);
  auto to = a.allocate(1 << 17, 5, Ns::kValue);
  SlotAllocator::copy_value(from, to);
  SlotHeader g;
  std::memcpy(&g, to.base, sizeof g);
  EXPECT_EQ(g.capacity, to.capacity) << "the holder's fields stay the destination's";
  EXPECT_EQ(flag_bits(g.flags) & kFlagHalfB, 0u);
  EXPECT_EQ(value_offset(g, to.capacity), kHeaderBytes);
  EXPECT_TRUE(buffered_valid(g, g));
  for (std::size_t i = 0; i < h.length; ++i) ASSERT_EQ(to.base[kHeaderBytes + i], std::byte{0x5a}) << i;
}

TEST(SlotEmpty, NotFoundIsDecidedOnlyOnAValidEmptyHeader) {
  const SlotHeader e = empty_header(128, 77, Ns::kValue);
  EXPECT_TRUE(slot_empty(e));
  EXPECT_EQ(e.key, 77u) << "the key is part of an empty header";
  EXPECT_EQ(e.capacity, 128u);
  EXPECT_EQ(e.owner, kOwnerFree);
  // A version read half old, half new can be 0 (0xff -> 0x100): that is not an empty slot.
  std::vector<unsigned char> v(40, 9);
  SlotHeader h{};
  h.capacity = 128;
  h.key = 5;
  h.version = 0x100;
  h.length = v.size();
  h.checksum = slot_checksum(h, v.data());
  SlotHeader torn = h;
  torn.version = 0;
  EXPECT_FALSE(slot_empty(torn));
  EXPECT_FALSE(slot_empty(h));
  for (std::size_t byte = kWriterOffset; byte < kHeaderBytes; ++byte) {
    SlotHeader t = e;
    reinterpret_cast<unsigned char *>(&t)[byte] ^= 1;
    EXPECT_FALSE(slot_empty(t)) << "byte " << byte;
  }
}

TEST(SlotEmpty, LostIsAValidatedStateOfItsOwn) {
  const SlotHeader l = lost_header(64, 9, Ns::kValue);
  EXPECT_TRUE(slot_lost(l));
  EXPECT_FALSE(slot_empty(l));
  EXPECT_FALSE(slot_lost(empty_header(64, 9, Ns::kValue)));
  SlotHeader t = l;
  t.key = 10;
  EXPECT_FALSE(slot_lost(t));
}

TEST(SlotAllocator, AttachesRegionsThatGrowGeometrically) {
  std::vector<std::size_t> attached;
  SlotAllocator a(64, 1 << 16, [&](void *, std::size_t n) { attached.push_back(n); });
  std::set<std::byte *> seen;
  for (int i = 0; i < 5000; ++i) {
    auto b = a.allocate(100, 1, Ns::kValue);
    EXPECT_EQ(b.capacity, 128u);
    EXPECT_TRUE(seen.insert(b.base).second) << "slot handed out twice";
    SlotHeader h;
    std::memcpy(&h, b.base, sizeof h);
    EXPECT_EQ(h.capacity, 128u);
    EXPECT_TRUE(slot_empty(h)) << "a new slot must read as never written";
    std::memset(b.base + kHeaderBytes, 0xff, b.capacity); // must be writable
  }
  ASSERT_GE(attached.size(), 2u);
  for (std::size_t i = 1; i < attached.size(); ++i) EXPECT_EQ(attached[i], 2 * attached[i - 1]);
  EXPECT_EQ(a.regions().size(), attached.size());
}

TEST(SlotAllocator, ReusesReleasedSlotsAndPoisonsThem) {
  int attaches = 0;
  SlotAllocator a(8, 1 << 16, [&](void *, std::size_t) { ++attaches; });
  auto b = a.allocate(1000, 1, Ns::kValue);
  SlotHeader h{};
  h.capacity = b.capacity;
  h.key = 7;
  h.version = 5;
  std::memcpy(b.base, &h, sizeof h);
  a.release(b);
  std::memcpy(&h, b.base, sizeof h);
  EXPECT_EQ(h.version, kNoVersion) << "a freed slot must not look like a valid copy";
  auto c = a.allocate(600, 2, Ns::kValue);
  EXPECT_EQ(c.base, b.base);
  std::memcpy(&h, c.base, sizeof h);
  EXPECT_TRUE(slot_empty(h));
  EXPECT_EQ(h.key, 2u) << "a reused slot must not read as an empty slot of its old key";
  EXPECT_EQ(attaches, 1);
}

TEST(SlotAllocator, GivesLargeValuesTheirOwnRegion) {
  std::vector<std::size_t> attached;
  SlotAllocator a(64, 1 << 16, [&](void *, std::size_t n) { attached.push_back(n); });
  auto big = a.allocate(std::size_t{256} << 20, 3, Ns::kValue);
  EXPECT_EQ(big.capacity, std::size_t{256} << 20);
  ASSERT_FALSE(attached.empty());
  EXPECT_GE(attached.back(), slot_bytes(big.capacity));
  big.base[kHeaderBytes + big.capacity - 1] = std::byte{1}; // last byte is inside the region
}

TEST(SlotAllocator, PropagatesAttachFailure) {
  SlotAllocator a(64, 1 << 16, [](void *, std::size_t) { throw std::bad_alloc(); });
  EXPECT_THROW(a.allocate(10, 4, Ns::kValue), std::bad_alloc);
}

// A lock word names its holder (process id, the agent's acquisition, agent); it can never read
// as free or retired, and two different holds never share one.
TEST(LockWord, NamesItsHolder) {
  std::set<std::uint64_t> seen;
  for (int id : {0, 1, 7, 4095, 1 << 20}) {
    for (std::uint32_t epoch : {0u, 1u, 2u, 0x7ffffffeu}) {
      for (int agent : {0, 1}) {
        const std::uint64_t w = lock_word(id, epoch, agent);
        EXPECT_EQ(lock_word_id(w), id);
        EXPECT_NE(w, kOwnerFree);
        EXPECT_NE(w, kSlotRetired);
        EXPECT_TRUE(seen.insert(w).second) << "id " << id << " epoch " << epoch << " agent " << agent;
      }
    }
  }
  EXPECT_EQ(lock_word_id(kSlotRetired), 0x52455449 - 1) << "a retired slot decodes to an id no store reaches";
}
