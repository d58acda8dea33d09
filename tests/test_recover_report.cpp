// store_recover with no failure, in both variants: what store_last_recovery reports, and that
// repeated calls keep the store whole.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "test_util.hpp"

using namespace rmastore::test;

namespace {

store_key_t key_of(int rank, int k) {
  return static_cast<store_key_t>(300000 + rank * 100 + k);
}

class RecoverReport : public ::testing::TestWithParam<int> {};

// Committed transactions leave their pending copies behind (the commit does not clear them).
// A later store_recover must not count those as interrupted transactions: nothing was rolled
// back or forward when every commit returned STORE_OK.
TEST_P(RecoverReport, CommittedTransactionsAreNotCountedAsRolledBack) {
  store_t s = make_store(2, 64, GetParam());
  ASSERT_NE(s, nullptr);
  const int me = world_rank(), p = world_size();
  constexpr int kKeys = 4;
  constexpr std::size_t kLen = 48;
  // Each transaction writes fewer keys, so that pending copies of older transactions remain.
  for (std::uint64_t version = 1; version <= 3; ++version) {
    ASSERT_EQ(store_tx_begin(s), STORE_OK);
    for (int k = 0; k <= kKeys - static_cast<int>(version); ++k) {
      const auto v = make_value(key_of(me, k), version, kLen);
      ASSERT_EQ(store_put(s, key_of(me, k), v.data(), v.size()), STORE_OK);
    }
    ASSERT_EQ(store_tx_commit(s), STORE_OK);
  }
  // A process that starts store_recover stops the others' calls (STORE_ERR_PROC_FAILED): all
  // commits end first.
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Comm comm = MPI_COMM_NULL;
  ASSERT_EQ(store_recover(s, &comm), STORE_OK);
  if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  store_recovery_t r;
  store_recovery_init(&r);
  ASSERT_EQ(store_last_recovery(s, &r), STORE_OK);
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(r.survivors, p);
  EXPECT_EQ(r.lost_count, 0u);
  EXPECT_EQ(r.tx_rolled_back, 0u) << "pending copies of committed transactions counted as rolled back";
  EXPECT_EQ(r.tx_rolled_forward, 0u);
  EXPECT_EQ(r.keys_repaired, 0u);
  for (int rank = 0; rank < p; ++rank) {
    for (int k = 0; k < kKeys; ++k) {
      const auto expected = static_cast<std::uint64_t>(std::min(3, kKeys - k));
      EXPECT_EQ(version_of(s, key_of(rank, k), kLen), expected) << rank << "/" << k;
    }
  }
  ASSERT_EQ(store_back_to_normal(s), STORE_OK);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}

// A store_recover that lost no process keeps its window instead of leaving one behind (about
// 24 KB each). What stays is less than the communicator calls of a recovery keep inside Open MPI
// (store_bench --op recover-memory, docs/benchmarks.md).
TEST_P(RecoverReport, RepeatedRecoveryKeepsMemoryBounded) {
  store_t s = make_store(2, 64, GetParam());
  ASSERT_NE(s, nullptr);
  const int me = world_rank();
  for (int k = 0; k < 8; ++k) {
    const auto v = make_value(key_of(me, k), 1, 48);
    ASSERT_EQ(store_put(s, key_of(me, k), v.data(), v.size()), STORE_OK);
  }
  constexpr int kWarmup = 5, kRounds = 60;
  std::size_t before = 0;
  for (int i = 0; i < kWarmup + kRounds; ++i) {
    if (i == kWarmup) before = heap_in_use();
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm comm = MPI_COMM_NULL;
    ASSERT_EQ(store_recover(s, &comm), STORE_OK);
    MPI_Comm_free(&comm);
    ASSERT_EQ(store_back_to_normal(s), STORE_OK);
  }
  const double per_call = (static_cast<double>(heap_in_use()) - static_cast<double>(before)) / kRounds;
  EXPECT_LT(per_call, 4096.0) << "bytes kept per store_recover";
  for (int k = 0; k < 8; ++k) EXPECT_EQ(version_of(s, key_of(me, k), 48), 1u);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}

INSTANTIATE_TEST_SUITE_P(Variants, RecoverReport, ::testing::Values(STORE_RECOVERY_GLOBAL, STORE_RECOVERY_LOCALIZED),
                         [](const ::testing::TestParamInfo<int> &i) {
                           return i.param == STORE_RECOVERY_GLOBAL ? std::string("global") : std::string("localized");
                         });

} // namespace
