// What the store keeps about a key lives with O(replicas) processes (src/holder/witnesses.hpp): a first
// put messages its holders and witnesses only, whatever the number of processes; its records
// are at exactly its witnesses; and a process that is neither holder nor witness of a key keeps
// nothing of it.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "capi/test_access.hpp"
#include "test_util.hpp"

using namespace rmastore::test;

namespace {

store_key_t key_of(int rank, int k) {
  return static_cast<store_key_t>(700000) + static_cast<store_key_t>(rank) * 1000000 + static_cast<store_key_t>(k);
}

std::uint64_t requests_sent(store_t s) {
  store_info_t info;
  store_info_init(&info);
  EXPECT_EQ(store_get_info(s, &info), STORE_OK);
  return info.requests_sent;
}

std::uint64_t sum(std::uint64_t v) {
  std::uint64_t all = 0;
  MPI_Allreduce(&v, &all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return all;
}

} // namespace

TEST(Metadata, FirstPutMessagesOnlyHoldersAndWitnesses) {
  const int r = 2, keys = 200;
  store_t s = make_store(r);
  ASSERT_NE(s, nullptr);
  const int me = world_rank(), p = world_size();
  const int copies = std::min(r, p), witnesses = std::min(r, p - copies);
  const std::uint64_t before = requests_sent(s);
  for (int k = 0; k < keys; ++k) {
    const auto v = make_value(key_of(me, k), 1, 8);
    ASSERT_EQ(store_put(s, key_of(me, k), v.data(), v.size()), STORE_OK);
  }
  const std::uint64_t first = requests_sent(s) - before;
  // One message to each holder and each witness at most (none to this process itself).
  EXPECT_LE(first, static_cast<std::uint64_t>(keys) * static_cast<std::uint64_t>(copies + witnesses));
  // With the old registration every first put messaged every other process: the premise that
  // this job is large enough to tell the two apart.
  if (p - 1 > copies + witnesses) {
    EXPECT_LT(first, static_cast<std::uint64_t>(keys) * static_cast<std::uint64_t>(p - 1));
  }
  // Repeat puts: no message (global: the grants are cached; localized: the locks), and no record
  // again.
  const std::uint64_t mid = requests_sent(s);
  for (int k = 0; k < keys; ++k) {
    const auto v = make_value(key_of(me, k), 2, 8);
    ASSERT_EQ(store_put(s, key_of(me, k), v.data(), v.size()), STORE_OK);
  }
  EXPECT_EQ(requests_sent(s) - mid, 0u);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}

TEST(Metadata, RecordsAreAtTheWitnessesAndGoWithDeletes) {
  const int r = 2, keys = 100;
  store_t s = make_store(r);
  ASSERT_NE(s, nullptr);
  auto *impl = rmastore::internal::impl(s);
  const int me = world_rank(), p = world_size();
  const int witnesses = std::min(r, p - std::min(r, p));
  for (int k = 0; k < keys; ++k) {
    const auto v = make_value(key_of(me, k), 1, 8);
    ASSERT_EQ(store_put(s, key_of(me, k), v.data(), v.size()), STORE_OK);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::vector<std::uint64_t> mine = impl->recorded_keys();
  for (std::uint64_t key : mine) {
    const std::vector<int> w = impl->witnesses_of(key);
    EXPECT_NE(std::find(w.begin(), w.end(), me), w.end()) << "key " << key << " recorded at a non-witness";
  }
  EXPECT_EQ(sum(mine.size()), static_cast<std::uint64_t>(keys) * static_cast<std::uint64_t>(p * witnesses));
  for (int k = 0; k < keys; ++k) ASSERT_EQ(store_delete(s, key_of(me, k)), STORE_OK);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(sum(impl->recorded_keys().size()), 0u) << "records left after every key was deleted";
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}

// A bystander: the last rank, for keys whose holders and witnesses are all other processes. They
// put many such keys; its memory must not grow with them (it did by a record per key, on every
// process, before witnesses).
TEST(Metadata, ABystanderKeepsNothing) {
  const int r = 2;
  const int p = world_size(), me = world_rank();
  // Below 2r + 1 processes every process keeps something of every key: tests/CMakeLists.txt
  // runs this test at 5 and 8 only.
  ASSERT_GE(p, 2 * r + 1) << "the premise needs a process outside every key's holders and witnesses";
  store_t s = make_store(r);
  ASSERT_NE(s, nullptr);
  auto *impl = rmastore::internal::impl(s);
  const int bystander = p - 1;
  // Keys whose keepers leave out the bystander, picked by every rank alike from placement.
  const int per_rank = 3000;
  std::vector<store_key_t> picked;
  for (store_key_t k = key_of(me, 0); static_cast<int>(picked.size()) < per_rank; ++k) {
    const std::vector<int> keepers = impl->keepers_of(k);
    if (std::find(keepers.begin(), keepers.end(), bystander) == keepers.end()) picked.push_back(k);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::size_t heap_before = heap_in_use();
  if (me != bystander) {
    for (store_key_t k : picked) {
      const auto v = make_value(k, 1, 8);
      ASSERT_EQ(store_put(s, k, v.data(), v.size()), STORE_OK);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::size_t heap_after = heap_in_use();
  if (me == bystander) {
    const std::size_t grew = heap_after > heap_before ? heap_after - heap_before : 0;
    const std::size_t keys = static_cast<std::size_t>(per_rank) * static_cast<std::size_t>(p - 1);
    // A few pages of MPI's own buffers may come and go; a record per key would be ~40 bytes.
    EXPECT_LT(grew, keys * 4) << "the bystander's heap grew by " << grew << " bytes over " << keys << " keys";
    EXPECT_TRUE(impl->recorded_keys().empty());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}

// A store_recover with no failure keeps what puts cached (global: the write grants and where the
// copies are), so the next put is a repeat put. The localized variant gives its cached locks
// back for the compaction: its next put takes them again, and the one after sends nothing.
TEST(Metadata, RecoverWithoutFailureKeepsTheCaches) {
  const int r = 2, keys = 50;
  store_t s = make_store(r);
  ASSERT_NE(s, nullptr);
  const int me = world_rank(), p = world_size();
  const auto put_all = [&](std::uint64_t version) {
    for (int k = 0; k < keys; ++k) {
      const auto v = make_value(key_of(me, 500 + k), version, 8);
      ASSERT_EQ(store_put(s, key_of(me, 500 + k), v.data(), v.size()), STORE_OK);
    }
  };
  put_all(1);
  MPI_Barrier(MPI_COMM_WORLD); // a process that enters store_recover fails the others' puts
  MPI_Comm comm = MPI_COMM_NULL;
  ASSERT_EQ(store_recover(s, &comm), STORE_OK);
  if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  const bool global = test_recovery() == STORE_RECOVERY_GLOBAL;
  if (global) {
    ASSERT_EQ(store_back_to_normal(s), STORE_OK);
  }
  std::uint64_t before = requests_sent(s);
  put_all(2);
  if (global) {
    EXPECT_EQ(requests_sent(s) - before, 0u) << "a put after a store_recover with no failure asked its holders";
  } else {
    EXPECT_LE(requests_sent(s) - before, static_cast<std::uint64_t>(keys * std::min(r, p)));
    before = requests_sent(s);
    put_all(3);
    EXPECT_EQ(requests_sent(s) - before, 0u);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (int rank = 0; rank < p; ++rank) {
    for (int k = 0; k < keys; ++k) {
      const store_key_t key = key_of(rank, 500 + k);
      std::vector<std::byte> buf(64);
      size_t len = 0;
      ASSERT_EQ(store_get(s, key, buf.data(), buf.size(), &len), STORE_OK);
      buf.resize(len);
      EXPECT_EQ(buf, make_value(key, global ? 2 : 3, 8)) << "key " << key;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}
