// Localized variant without failures: puts to the same keys from many processes at once are
// serialised by the slot locks. Every rank writes overlapping keys with values that carry their
// own check (make_value), at sizes on both sides of the in-place limit so that slots also grow
// under the lock, and reads the same keys meanwhile: every read must be one whole value. When
// all have stopped, every key's copies must be identical, and every rank must read that value.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "capi/test_access.hpp"
#include "test_util.hpp"

using namespace rmastore::test;
using rmastore::internal::SlotHeader;

namespace {

std::size_t length_for(std::mt19937_64 &rng) {
  switch (rng() % 4) {
  case 0:
    return 16 + rng() % 100; // check_value needs 16 bytes to find the version
  case 1:
    return 1000 + rng() % 15000;
  case 2:
    return 16385 + rng() % 50000; // double-buffered
  default:
    return rng() % 3 == 0 ? 200000 + rng() % 100000 : 40 + rng() % 400;
  }
}

// Each rank's (key, version, checksum of its copy) for every copy it holds.
struct CopyRecord {
  std::uint64_t key, version, length, sum;
};

std::uint64_t sum_of(const std::vector<std::byte> &v) {
  std::uint64_t h = 1469598103934665603ULL;
  for (std::byte b : v) h = (h ^ static_cast<std::uint64_t>(b)) * 1099511628211ULL;
  return h;
}

// Every copy of every key agrees: same version, same bytes. Collective.
void expect_copies_agree(store_t s, const std::vector<store_key_t> &keys) {
  auto *impl = rmastore::internal::impl(s);
  std::vector<CopyRecord> mine;
  for (store_key_t key : keys) {
    const std::vector<int> holders = impl->holders(key);
    if (std::find(holders.begin(), holders.end(), impl->rank()) == holders.end()) continue;
    SlotHeader h;
    std::vector<std::byte> v;
    // EXPECT, not ASSERT: returning here would leave the other ranks in the collectives below.
    EXPECT_TRUE(impl->read_local_copy(key, h, v)) << "no valid local copy of key " << key;
    mine.push_back(CopyRecord{key, h.version, v.size(), sum_of(v)});
  }
  const int p = world_size();
  int n = static_cast<int>(mine.size() * sizeof(CopyRecord));
  std::vector<int> counts(static_cast<std::size_t>(p)), displs(static_cast<std::size_t>(p));
  MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int total = 0;
  for (int i = 0; i < p; ++i) {
    displs[static_cast<std::size_t>(i)] = total;
    total += counts[static_cast<std::size_t>(i)];
  }
  std::vector<CopyRecord> all(static_cast<std::size_t>(total) / sizeof(CopyRecord));
  MPI_Allgatherv(mine.data(), n, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE, MPI_COMM_WORLD);
  std::map<std::uint64_t, std::vector<CopyRecord>> by_key;
  for (const CopyRecord &c : all) by_key[c.key].push_back(c);
  const auto r = static_cast<std::size_t>(impl->placement()->replicas());
  for (store_key_t key : keys) {
    const auto &copies = by_key[key];
    ASSERT_EQ(copies.size(), r) << "key " << key;
    for (const CopyRecord &c : copies) {
      EXPECT_EQ(c.version, copies.front().version) << "key " << key << ": copies at different versions";
      EXPECT_EQ(c.length, copies.front().length) << "key " << key;
      EXPECT_EQ(c.sum, copies.front().sum) << "key " << key << ": copies differ";
    }
  }
}

} // namespace

TEST(Localized, ConcurrentWritersOfOverlappingKeys) {
  ASSERT_GE(world_size(), 2) << "a race between processes needs two of them (registered from np2)";
  store_t s = make_store(3, 64, STORE_RECOVERY_LOCALIZED);
  ASSERT_NE(s, nullptr);
  const int me = world_rank();
  constexpr int kKeys = 12;
  std::vector<store_key_t> keys;
  for (int k = 0; k < kKeys; ++k) keys.push_back(static_cast<store_key_t>(900 + k));
  std::mt19937_64 rng(1234567u + static_cast<unsigned>(me));
  std::vector<std::byte> buf(400000);
  MPI_Barrier(MPI_COMM_WORLD);
  std::uint64_t reads = 0, writes = 0;
  for (int op = 0; op < 300; ++op) {
    const store_key_t key = keys[rng() % keys.size()];
    if (rng() % 2 == 0) {
      // A version that names the writer, so that every value is distinct.
      const std::uint64_t version = static_cast<std::uint64_t>(me) << 32 | static_cast<std::uint64_t>(op + 1);
      const auto v = make_value(key, version, length_for(rng));
      ASSERT_EQ(store_put(s, key, v.data(), v.size()), STORE_OK);
      ++writes;
    } else {
      size_t len = 0;
      const store_status_t st = store_get(s, key, buf.data(), buf.size(), &len);
      ASSERT_TRUE(st == STORE_OK || st == STORE_ERR_NOT_FOUND) << store_strerror(st);
      if (st == STORE_OK) {
        std::uint64_t version = 0;
        ASSERT_TRUE(check_value(key, buf.data(), len, &version)) << "key " << key << ": torn value of length " << len;
        ++reads;
      }
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  expect_copies_agree(s, keys);
  // Everyone reads the same final value of each key.
  for (store_key_t key : keys) {
    size_t len = 0;
    ASSERT_EQ(store_get(s, key, buf.data(), buf.size(), &len), STORE_OK);
    std::uint64_t version = 0, lo = 0, hi = 0;
    ASSERT_TRUE(check_value(key, buf.data(), len, &version));
    MPI_Allreduce(&version, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&version, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    EXPECT_EQ(lo, hi) << "ranks read different final values of key " << key;
  }
  std::uint64_t total_writes = 0, total_reads = 0;
  MPI_Allreduce(&writes, &total_writes, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&reads, &total_reads, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_GT(total_writes, 100u);
  EXPECT_GT(total_reads, 0u) << "no read found a value: the race with the writers was not tested";
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}

// Transactions over overlapping keys, next to single puts of the same keys: the commits hold
// their keys' locks throughout, so once everybody stopped, every key's copies agree, and keys
// written only by transactions hold values of one and the same transaction.
TEST(Localized, TransactionsAndPutsOnOverlappingKeys) {
  ASSERT_GE(world_size(), 2) << "a race between processes needs two of them (registered from np2)";
  store_t s = make_store(2, 64, STORE_RECOVERY_LOCALIZED);
  ASSERT_NE(s, nullptr);
  const int me = world_rank();
  // Pairs (a, b) that only transactions write, always together; and keys that single puts share.
  constexpr int kPairs = 4;
  std::vector<store_key_t> keys;
  for (int i = 0; i < 2 * kPairs + 4; ++i) keys.push_back(static_cast<store_key_t>(2000 + i));
  std::mt19937_64 rng(99u + static_cast<unsigned>(me));
  MPI_Barrier(MPI_COMM_WORLD);
  for (int op = 0; op < 60; ++op) {
    const std::uint64_t version = static_cast<std::uint64_t>(me) << 32 | static_cast<std::uint64_t>(op + 1);
    const int pair = static_cast<int>(rng() % kPairs);
    const store_key_t shared = keys[static_cast<std::size_t>(2 * kPairs) + rng() % 4];
    if (rng() % 3 != 0) {
      ASSERT_EQ(store_tx_begin(s), STORE_OK);
      for (store_key_t key :
           {keys[static_cast<std::size_t>(2 * pair)], keys[static_cast<std::size_t>(2 * pair + 1)], shared}) {
        const auto v = make_value(key, version, 100 + rng() % 30000);
        ASSERT_EQ(store_put(s, key, v.data(), v.size()), STORE_OK);
      }
      ASSERT_EQ(store_tx_commit(s), STORE_OK);
    } else {
      const auto v = make_value(shared, version, 100 + rng() % 30000);
      ASSERT_EQ(store_put(s, shared, v.data(), v.size()), STORE_OK);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  std::vector<store_key_t> written;
  std::vector<std::byte> buf(100000);
  for (int pair = 0; pair < kPairs; ++pair) {
    std::uint64_t va = 0, vb = 0;
    size_t la = 0, lb = 0;
    const store_status_t sa = store_get(s, keys[static_cast<std::size_t>(2 * pair)], buf.data(), buf.size(), &la);
    if (sa == STORE_ERR_NOT_FOUND) continue; // no transaction chose this pair
    ASSERT_EQ(sa, STORE_OK);
    ASSERT_TRUE(check_value(keys[static_cast<std::size_t>(2 * pair)], buf.data(), la, &va));
    ASSERT_EQ(store_get(s, keys[static_cast<std::size_t>(2 * pair + 1)], buf.data(), buf.size(), &lb), STORE_OK);
    ASSERT_TRUE(check_value(keys[static_cast<std::size_t>(2 * pair + 1)], buf.data(), lb, &vb));
    EXPECT_EQ(va, vb) << "pair " << pair << " holds values of two different transactions";
    written.push_back(keys[static_cast<std::size_t>(2 * pair)]);
    written.push_back(keys[static_cast<std::size_t>(2 * pair + 1)]);
  }
  for (std::size_t i = 2 * kPairs; i < keys.size(); ++i) written.push_back(keys[i]);
  // The same keys are found on every rank (transactions chose pairs at random).
  int n = static_cast<int>(written.size()), lo = 0;
  MPI_Allreduce(&n, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  ASSERT_EQ(lo, n);
  expect_copies_agree(s, written);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}
