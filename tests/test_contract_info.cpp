// store_get_info (issue 9): its figures stay exact while slots are created, grow (move) and
// shrink; and it does not keep this process's helper from serving the others while it counts
// the local copies (it used to hold the slot table's lock for the whole walk, so every request
// to the process waited for it).
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "capi/test_access.hpp"
#include "test_util.hpp"

using namespace rmastore::test;

namespace {

store_info_t get_info(store_t s) {
  store_info_t info;
  store_info_init(&info);
  EXPECT_EQ(store_get_info(s, &info), STORE_OK);
  return info;
}

// What this rank must report: the keys it holds a copy of, and their current lengths.
void expect_counts(store_t s, const std::map<store_key_t, std::size_t> &lengths, const char *when) {
  const int me = world_rank();
  std::uint64_t copies = 0, bytes = 0;
  for (const auto &[key, len] : lengths) {
    for (int h : rmastore::internal::impl(s)->holders(key)) {
      if (h != me) continue;
      ++copies;
      bytes += len;
    }
  }
  const store_info_t info = get_info(s);
  EXPECT_EQ(info.local_copies, copies) << when;
  EXPECT_EQ(info.local_bytes, bytes) << when;
  EXPECT_GE(info.attached_regions, copies > 0 ? 1 : 0) << when;
  EXPECT_GE(info.attached_bytes, bytes) << when;
  EXPECT_EQ(info.size, world_size());
  EXPECT_EQ(info.rank, me);
  // Nobody puts the next round before everybody counted this one.
  EXPECT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
}

} // namespace

TEST(ContractInfo, CountsMatchAfterPutsGrowthAndShrinking) {
  store_t s = make_store(2, 64);
  ASSERT_NE(s, nullptr);
  const int me = world_rank(), p = world_size();
  std::map<store_key_t, std::size_t> lengths; // every rank's keys, as every rank knows them
  const auto round = [&](int version, auto len_of) {
    for (int i = 0; i < 40; ++i) {
      const auto key = static_cast<store_key_t>(me * 1000 + i);
      const auto v = make_value(key, static_cast<std::uint64_t>(version), len_of(i));
      ASSERT_EQ(store_put(s, key, v.data(), v.size()), STORE_OK) << "key " << key;
    }
    for (int r = 0; r < p; ++r) {
      for (int i = 0; i < 40; ++i) lengths[static_cast<store_key_t>(r * 1000 + i)] = len_of(i);
    }
    ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
    // Readers of the next rank's keys: the next growth then waits for their invalidation.
    for (int i = 0; i < 40; ++i) {
      std::vector<std::byte> buf(len_of(i));
      size_t len = 0;
      EXPECT_EQ(store_get(s, static_cast<store_key_t>(((me + 1) % p) * 1000 + i), buf.data(), buf.size(), &len),
                STORE_OK);
    }
    ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  };
  // Nothing held yet.
  expect_counts(s, lengths, "empty store");
  // Small values in their first slots; then most of them grow past their slots (which moves
  // them, in place and into double-buffered sizes); then they shrink again (slots stay).
  round(1, [](int i) { return static_cast<std::size_t>(i % 7) * 9; });
  expect_counts(s, lengths, "after the first puts");
  round(2, [](int i) { return i % 3 == 0 ? std::size_t{20} : std::size_t{700} + 5000 * static_cast<std::size_t>(i); });
  expect_counts(s, lengths, "after growth");
  round(3, [](int i) { return static_cast<std::size_t>(i % 5); });
  expect_counts(s, lengths, "after shrinking");
  // A transaction: its values count, its decision record and pending copies do not.
  ASSERT_EQ(store_tx_begin(s), STORE_OK);
  for (int i = 0; i < 3; ++i) {
    const auto key = static_cast<store_key_t>(me * 1000 + i);
    const auto v = make_value(key, 4, 33);
    ASSERT_EQ(store_put(s, key, v.data(), v.size()), STORE_OK);
  }
  ASSERT_EQ(store_tx_commit(s), STORE_OK);
  for (int r = 0; r < p; ++r) {
    for (int i = 0; i < 3; ++i) lengths[static_cast<store_key_t>(r * 1000 + i)] = 33;
  }
  ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  expect_counts(s, lengths, "after a transaction");
  ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}

// Rank 1 calls store_get_info from a second thread, with its walk over the local copies slowed
// down (RMASTORE_DELAY=info.walk:<us>, set by tests/contract.cmake). Meanwhile rank 0 puts new
// keys, for which rank 1 must create slots: its helper serves that. The puts must complete
// while store_get_info is still walking. The only time setting is the delay; the puts start
// after a tenth of it, so that the walk has begun.
TEST(ContractInfo, DoesNotBlockTheHelperWhileCounting) {
  const char *d = std::getenv("RMASTORE_DELAY");
  if (d == nullptr || world_size() < 2) FAIL() << "needs RMASTORE_DELAY=info.walk:<us> and 2 ranks";
  const long delay_us = std::atol(std::strchr(d, ':') != nullptr ? std::strchr(d, ':') + 1 : "0");
  ASSERT_GT(delay_us, 0);
  store_t s = make_store(world_size(), 64); // every rank holds every key
  ASSERT_NE(s, nullptr);
  const int me = world_rank();
  // One key first, so that rank 1 has a copy to walk over.
  if (me == 0) {
    const auto v = make_value(7, 1, 8);
    ASSERT_EQ(store_put(s, 7, v.data(), v.size()), STORE_OK);
  }
  ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  int served_during_walk = 1;
  if (me == 1) {
    std::atomic<bool> info_returned{false};
    store_info_t info;
    store_info_init(&info);
    std::thread counter([&] {
      EXPECT_EQ(store_get_info(s, &info), STORE_OK);
      info_returned = true;
    });
    int done = 0;
    ASSERT_EQ(MPI_Recv(&done, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_SUCCESS);
    served_during_walk = info_returned ? 0 : 1;
    counter.join();
    EXPECT_GE(info.local_copies, 1u);
  } else if (me == 0) {
    usleep(static_cast<useconds_t>(delay_us / 10));
    for (int k = 100; k < 103; ++k) {
      const auto v = make_value(static_cast<store_key_t>(k), 1, 8);
      EXPECT_EQ(store_put(s, static_cast<store_key_t>(k), v.data(), v.size()), STORE_OK);
    }
    int done = 1;
    ASSERT_EQ(MPI_Send(&done, 1, MPI_INT, 1, 0, MPI_COMM_WORLD), MPI_SUCCESS);
  }
  ASSERT_EQ(MPI_Bcast(&served_during_walk, 1, MPI_INT, 1, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(served_during_walk, 1) << "rank 1's helper served nobody while store_get_info counted its copies";
  ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}
