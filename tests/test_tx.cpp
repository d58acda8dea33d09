// Transactions and modes without failures (failures: test_failure --tx).
#include <gtest/gtest.h>

#include <vector>

#include "test_util.hpp"

using namespace rmastore::test;

namespace {

store_key_t key_of(int rank, int k) {
  return static_cast<store_key_t>(200000 + rank * 100 + k);
}

} // namespace

TEST(Tx, CommitMakesEveryValueVisible) {
  store_t s = make_store(2);
  ASSERT_NE(s, nullptr);
  const int me = world_rank(), p = world_size();
  // Values of both protocols: in place and double-buffered.
  const std::size_t lens[] = {40, 5000, 70000};
  ASSERT_EQ(store_tx_begin(s), STORE_OK);
  for (int k = 0; k < 6; ++k) {
    const auto v = make_value(key_of(me, k), 1, lens[k % 3]);
    ASSERT_EQ(store_put(s, key_of(me, k), v.data(), v.size()), STORE_OK);
  }
  // Read back inside the transaction on this process.
  EXPECT_EQ(version_of(s, key_of(me, 0), lens[0]), 1u);
  ASSERT_EQ(store_tx_commit(s), STORE_OK);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int r = 0; r < p; ++r) {
    for (int k = 0; k < 6; ++k) EXPECT_EQ(version_of(s, key_of(r, k), lens[k % 3]), 1u) << "rank " << r << " key " << k;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}

TEST(Tx, AbortLeavesTheOldValues) {
  store_t s = make_store(2);
  ASSERT_NE(s, nullptr);
  const int me = world_rank();
  const auto v1 = make_value(key_of(me, 0), 1, 100);
  ASSERT_EQ(store_put(s, key_of(me, 0), v1.data(), v1.size()), STORE_OK);
  ASSERT_EQ(store_tx_begin(s), STORE_OK);
  const auto v2 = make_value(key_of(me, 0), 2, 100);
  ASSERT_EQ(store_put(s, key_of(me, 0), v2.data(), v2.size()), STORE_OK);
  const auto n1 = make_value(key_of(me, 1), 2, 100);
  ASSERT_EQ(store_put(s, key_of(me, 1), n1.data(), n1.size()), STORE_OK);
  EXPECT_EQ(version_of(s, key_of(me, 0), 100), 2u) << "the transaction reads its own writes";
  ASSERT_EQ(store_tx_abort(s), STORE_OK);
  EXPECT_EQ(version_of(s, key_of(me, 0), 100), 1u);
  std::byte b;
  size_t len = 0;
  EXPECT_EQ(store_get(s, key_of(me, 1), &b, 1, &len), STORE_ERR_NOT_FOUND);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}

TEST(Tx, StateErrorsAndModes) {
  store_t s = make_store(2);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(store_tx_commit(s), STORE_ERR_TX_STATE);
  EXPECT_EQ(store_tx_abort(s), STORE_ERR_TX_STATE);
  ASSERT_EQ(store_tx_begin(s), STORE_OK);
  EXPECT_EQ(store_tx_begin(s), STORE_ERR_TX_STATE);
  EXPECT_EQ(store_tx_commit(s), STORE_OK) << "an empty transaction commits";
  store_mode_t mode = STORE_MODE_TRANSACTION;
  EXPECT_EQ(store_get_mode(s, &mode), STORE_OK);
  EXPECT_EQ(mode, STORE_MODE_NORMAL);
  EXPECT_EQ(store_get_mode(s, nullptr), STORE_ERR_ARG);
  // Leaving a mode one is not in is allowed; with an open transaction it is refused everywhere
  // (localized variant: it is local, refused where the transaction is open).
  EXPECT_EQ(store_back_to_normal(s), STORE_OK);
  if (world_rank() == 0) {
    ASSERT_EQ(store_tx_begin(s), STORE_OK);
  }
  const bool refused_here = test_recovery() == STORE_RECOVERY_GLOBAL || world_rank() == 0;
  EXPECT_EQ(store_back_to_normal(s), refused_here ? STORE_ERR_TX_STATE : STORE_OK);
  if (world_rank() == 0) {
    EXPECT_EQ(store_tx_abort(s), STORE_OK);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}

TEST(Tx, RepeatedTransactionsOnTheSameKeys) {
  store_t s = make_store(3);
  ASSERT_NE(s, nullptr);
  const int me = world_rank(), p = world_size();
  for (std::uint64_t round = 1; round <= 5; ++round) {
    ASSERT_EQ(store_tx_begin(s), STORE_OK);
    for (int k = 0; k < 4; ++k) {
      const auto v = make_value(key_of(me, k), round, 100 + round * 10000 * static_cast<std::uint64_t>(k));
      ASSERT_EQ(store_put(s, key_of(me, k), v.data(), v.size()), STORE_OK);
    }
    ASSERT_EQ(store_tx_commit(s), STORE_OK);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int r = 0; r < p; ++r) {
      for (int k = 0; k < 4; ++k) {
        EXPECT_EQ(version_of(s, key_of(r, k), 100 + round * 10000 * static_cast<std::uint64_t>(k)), round);
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}
