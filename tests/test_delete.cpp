// store_delete without failures (failures: test_failure --delete 1): every copy goes, everywhere;
// the key can be stored again; a delete inside a transaction is all or nothing with its puts; the
// memory of deleted keys is used again.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "test_util.hpp"

using namespace rmastore::test;

namespace {

store_key_t key_of(int rank, int k) {
  return static_cast<store_key_t>(300000) + static_cast<store_key_t>(rank) * 1000000 + static_cast<store_key_t>(k);
}

store_status_t get_status(store_t s, store_key_t key) {
  std::vector<std::byte> buf(1 << 17);
  size_t len = 0;
  return store_get(s, key, buf.data(), buf.size(), &len);
}

store_info_t info_of(store_t s) {
  store_info_t info;
  store_info_init(&info);
  EXPECT_EQ(store_get_info(s, &info), STORE_OK);
  return info;
}

} // namespace

TEST(Delete, EveryCopyGoesAndThePutComesBack) {
  store_t s = make_store(2);
  ASSERT_NE(s, nullptr);
  const int me = world_rank(), p = world_size();
  // In place and double-buffered values.
  const std::size_t lens[] = {16, 40, 5000, 70000};
  for (int k = 0; k < 4; ++k) {
    const auto v = make_value(key_of(me, k), 1, lens[k]);
    ASSERT_EQ(store_put(s, key_of(me, k), v.data(), v.size()), STORE_OK);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // Every rank reads every key first: readers then cache where the copies are, and must find
  // out that they went.
  for (int r = 0; r < p; ++r) {
    for (int k = 0; k < 4; ++k) EXPECT_EQ(version_of(s, key_of(r, k), lens[k]), 1u) << "rank " << r << " key " << k;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_GT(info_of(s).local_copies, 0u);
  for (int k = 0; k < 4; ++k) ASSERT_EQ(store_delete(s, key_of(me, k)), STORE_OK);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int r = 0; r < p; ++r) {
    for (int k = 0; k < 4; ++k) {
      EXPECT_EQ(get_status(s, key_of(r, k)), STORE_ERR_NOT_FOUND) << "rank " << r << " key " << k;
    }
  }
  // Every copy went: the holders free the slots when the messages that follow a delete reach
  // their helper threads, soon after it returned (a tombstone never counts as a copy).
  const auto until = std::chrono::steady_clock::now() + scaled(5000);
  while (info_of(s).local_copies != 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(info_of(s).local_copies, 0u);
  MPI_Barrier(MPI_COMM_WORLD);
  // Stored again, with other values: everybody reads them.
  for (int k = 0; k < 4; ++k) {
    const auto v = make_value(key_of(me, k), 7, lens[k]);
    ASSERT_EQ(store_put(s, key_of(me, k), v.data(), v.size()), STORE_OK);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (int r = 0; r < p; ++r) {
    for (int k = 0; k < 4; ++k) EXPECT_EQ(version_of(s, key_of(r, k), lens[k]), 7u) << "rank " << r << " key " << k;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}

TEST(Delete, AbsentKeysAndTwice) {
  store_t s = make_store(2);
  ASSERT_NE(s, nullptr);
  const int me = world_rank();
  EXPECT_EQ(store_delete(s, key_of(me, 500)), STORE_OK) << "a key never put";
  const auto v = make_value(key_of(me, 1), 1, 10);
  ASSERT_EQ(store_put(s, key_of(me, 1), v.data(), v.size()), STORE_OK);
  EXPECT_EQ(store_delete(s, key_of(me, 1)), STORE_OK);
  EXPECT_EQ(store_delete(s, key_of(me, 1)), STORE_OK) << "twice";
  EXPECT_EQ(get_status(s, key_of(me, 1)), STORE_ERR_NOT_FOUND);
  EXPECT_EQ(store_delete(nullptr, 1), STORE_ERR_HANDLE);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}

// Another process wrote the key last (global variant: it holds write grants for it, also for its
// pending slot after a transaction): its next put after the delete must not write into the freed
// slots, which may belong to another key by then.
TEST(Delete, TheLastWriterPutsAgainAfterAnotherDeletes) {
  store_t s = make_store(2);
  ASSERT_NE(s, nullptr);
  const int me = world_rank(), p = world_size();
  const int writer = 0, deleter = p - 1;
  const store_key_t key = key_of(0, 900), other = key_of(0, 901);
  if (me == writer) {
    ASSERT_EQ(store_tx_begin(s), STORE_OK);
    const auto v = make_value(key, 1, 100);
    ASSERT_EQ(store_put(s, key, v.data(), v.size()), STORE_OK);
    ASSERT_EQ(store_tx_commit(s), STORE_OK);
    const auto w = make_value(key, 2, 100);
    ASSERT_EQ(store_put(s, key, w.data(), w.size()), STORE_OK);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (me == deleter) {
    ASSERT_EQ(store_delete(s, key), STORE_OK);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // Slots freed by the delete go to the next key that needs one of their size.
  if (me == deleter) {
    const auto o = make_value(other, 5, 100);
    ASSERT_EQ(store_put(s, other, o.data(), o.size()), STORE_OK);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (me == writer) {
    const auto w = make_value(key, 3, 100);
    ASSERT_EQ(store_put(s, key, w.data(), w.size()), STORE_OK);
    ASSERT_EQ(store_tx_begin(s), STORE_OK);
    const auto x = make_value(key, 4, 100);
    ASSERT_EQ(store_put(s, key, x.data(), x.size()), STORE_OK);
    ASSERT_EQ(store_tx_commit(s), STORE_OK);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(version_of(s, key, 100), 4u);
  EXPECT_EQ(version_of(s, other, 100), 5u) << "the other key's copies were overwritten";
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}

TEST(Delete, InsideATransaction) {
  store_t s = make_store(2);
  ASSERT_NE(s, nullptr);
  const int me = world_rank(), p = world_size();
  const auto a1 = make_value(key_of(me, 10), 1, 60), b1 = make_value(key_of(me, 11), 1, 60);
  ASSERT_EQ(store_put(s, key_of(me, 10), a1.data(), a1.size()), STORE_OK);
  ASSERT_EQ(store_put(s, key_of(me, 11), b1.data(), b1.size()), STORE_OK);
  // Aborted: nothing changes.
  ASSERT_EQ(store_tx_begin(s), STORE_OK);
  ASSERT_EQ(store_delete(s, key_of(me, 11)), STORE_OK);
  EXPECT_EQ(get_status(s, key_of(me, 11)), STORE_ERR_NOT_FOUND) << "the transaction reads its own delete";
  ASSERT_EQ(store_tx_abort(s), STORE_OK);
  EXPECT_EQ(version_of(s, key_of(me, 11), 60), 1u);
  // Committed: one put and one delete, and a key put then deleted in the same transaction.
  ASSERT_EQ(store_tx_begin(s), STORE_OK);
  const auto a2 = make_value(key_of(me, 10), 2, 60), c1 = make_value(key_of(me, 12), 1, 60);
  ASSERT_EQ(store_put(s, key_of(me, 10), a2.data(), a2.size()), STORE_OK);
  ASSERT_EQ(store_delete(s, key_of(me, 11)), STORE_OK);
  ASSERT_EQ(store_put(s, key_of(me, 12), c1.data(), c1.size()), STORE_OK);
  ASSERT_EQ(store_delete(s, key_of(me, 12)), STORE_OK);
  ASSERT_EQ(store_tx_commit(s), STORE_OK);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int r = 0; r < p; ++r) {
    EXPECT_EQ(version_of(s, key_of(r, 10), 60), 2u) << "rank " << r;
    EXPECT_EQ(get_status(s, key_of(r, 11)), STORE_ERR_NOT_FOUND) << "rank " << r;
    EXPECT_EQ(get_status(s, key_of(r, 12)), STORE_ERR_NOT_FOUND) << "rank " << r;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // A deleted key is put again in a transaction.
  ASSERT_EQ(store_tx_begin(s), STORE_OK);
  const auto b3 = make_value(key_of(me, 11), 3, 60);
  ASSERT_EQ(store_put(s, key_of(me, 11), b3.data(), b3.size()), STORE_OK);
  ASSERT_EQ(store_tx_commit(s), STORE_OK);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int r = 0; r < p; ++r) EXPECT_EQ(version_of(s, key_of(r, 11), 60), 3u) << "rank " << r;
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}

// Keys created and deleted in a loop, through many times the memory the store attaches: the
// attached memory stops growing once the first rounds have made the slots that later rounds use
// again, and so does the heap.
TEST(Delete, MemoryIsUsedAgain) {
  const int keys = 40, rounds = 60;
  const std::size_t len = 1000;
  // A small first region, so that the loop puts many times what is attached.
  store_config_t cfg;
  store_config_init(&cfg);
  cfg.replicas = std::min(2, world_size());
  cfg.capacity_hint = 64 * 1024;
  cfg.recovery = test_recovery();
  store_t s = nullptr;
  ASSERT_EQ(store_init(MPI_COMM_WORLD, &cfg, &s), STORE_OK);
  const int me = world_rank();
  std::uint64_t settled_bytes = 0;
  std::size_t settled_heap = 0;
  std::uint64_t put_bytes = 0;
  for (int round = 1; round <= rounds; ++round) {
    for (int k = 0; k < keys; ++k) {
      // New keys every round: nothing but the freed slots is there to reuse.
      const store_key_t key = key_of(me, round * keys + k);
      const auto v = make_value(key, 1, len);
      ASSERT_EQ(store_put(s, key, v.data(), v.size()), STORE_OK);
      put_bytes += len;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int k = 0; k < keys; ++k) ASSERT_EQ(store_delete(s, key_of(me, round * keys + k)), STORE_OK);
    MPI_Barrier(MPI_COMM_WORLD);
    if (round == 3) {
      settled_bytes = info_of(s).attached_bytes;
      settled_heap = heap_in_use();
    }
  }
  const std::uint64_t attached = info_of(s).attached_bytes;
  // The premise: the loop put many times the memory attached.
  EXPECT_GT(put_bytes, 10 * attached) << "the loop did not cycle the attached memory";
  // Deletes are answered by messages that the next round's puts may overtake: a round's worth
  // of slots more is allowed, not growth with the rounds.
  EXPECT_LE(attached, 2 * settled_bytes) << "attached memory grew from " << settled_bytes << " to " << attached;
  const std::size_t heap = heap_in_use();
  EXPECT_LT(heap, settled_heap + 256 * 1024) << "heap grew from " << settled_heap << " to " << heap;
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}
