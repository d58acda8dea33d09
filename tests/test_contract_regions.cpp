// Memory regions per window are limited (Open MPI: osc_rdma_max_attach, default 64). The store
// must report running out of them as STORE_ERR_NO_MEMORY and never wait without bound (issue 9:
// with 1 GiB slots on two processes, key 64 failed and the put of key 65 never returned, because
// Open MPI 5.0.7's osc/rdma keeps its region lock after refusing an attach beyond its limit).
//
// Slots of 1 GiB are reserved address space that is never touched (values are 8 bytes), so the
// test costs almost no memory. RMASTORE_TEST_MAX_ATTACH=<n> lowers Open MPI's limit for the run
// (it sets OMPI_MCA_osc_rdma_max_attach before MPI_Init), so that the limit is reached quickly.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "test_util.hpp"

using namespace rmastore::test;

namespace {

const int kMaxAttach = [] {
  const char *v = std::getenv("RMASTORE_TEST_MAX_ATTACH");
  if (v == nullptr) return 64; // Open MPI's default
  setenv("OMPI_MCA_osc_rdma_max_attach", v, 1);
  return std::atoi(v);
}();

constexpr std::size_t kSlot = std::size_t{1} << 30;
// Enough keys to pass Open MPI's default limit of 64 regions if each took a region of its own.
constexpr int kKeys = 100;

int attached_regions(store_t s) {
  store_info_t info;
  store_info_init(&info);
  if (store_get_info(s, &info) != STORE_OK) return -1;
  return info.attached_regions;
}

} // namespace

TEST(ContractRegions, LargeSlotsEndInNoMemoryNeverInAHang) {
  store_t s = make_store(2, kSlot);
  ASSERT_NE(s, nullptr);
  // Rank 0 writes (the global variant forbids overlapping writers of a key); every rank holds
  // copies, so every rank attaches regions.
  int stored = 0;
  bool exhausted = false;
  if (world_rank() == 0) {
    for (int k = 0; k < kKeys; ++k) {
      const auto v = make_value(static_cast<store_key_t>(k), 1, 8);
      const store_status_t st = store_put(s, static_cast<store_key_t>(k), v.data(), v.size());
      if (st == STORE_ERR_NO_MEMORY) {
        exhausted = true;
        break;
      }
      if (st != STORE_OK) {
        ADD_FAILURE() << "key " << k << ": " << store_strerror(st);
        break; // not ASSERT: the other ranks wait for this one below
      }
      ++stored;
    }
    if (exhausted) {
      // Running out is permanent for new slots, and reported each time: it must not hang.
      for (int k = kKeys; k < kKeys + 3; ++k) {
        const auto v = make_value(static_cast<store_key_t>(k), 1, 8);
        EXPECT_EQ(store_put(s, static_cast<store_key_t>(k), v.data(), v.size()), STORE_ERR_NO_MEMORY) << "key " << k;
      }
      // Keys that have their slots still take new values.
      const auto v = make_value(0, 2, 8);
      EXPECT_EQ(store_put(s, 0, v.data(), v.size()), STORE_OK);
    }
    std::printf("rank 0: %d keys of %zu-byte slots stored (limit %d regions, exhausted: %s), %d regions\n", stored,
                kSlot, kMaxAttach, exhausted ? "yes" : "no", attached_regions(s));
  }
  MPI_Bcast(&stored, 1, MPI_INT, 0, MPI_COMM_WORLD);
  int ex = exhausted ? 1 : 0;
  MPI_Bcast(&ex, 1, MPI_INT, 0, MPI_COMM_WORLD);
  exhausted = ex != 0;

  const int regions = attached_regions(s);
  EXPECT_GE(regions, 1);
  EXPECT_LE(regions, kMaxAttach);
  if (kMaxAttach >= 64) {
    // Regions grow geometrically: 100 keys of 1 GiB slots fit in far fewer than 64 regions.
    EXPECT_FALSE(exhausted);
    EXPECT_EQ(stored, kKeys);
    EXPECT_LE(regions, kMaxAttach / 2);
  } else {
    // A small limit is reached, but only after several keys per region on average.
    EXPECT_TRUE(exhausted);
    EXPECT_GE(stored, 3 * kMaxAttach);
  }
  // Everything stored is readable everywhere.
  for (int k = 0; k < stored; ++k) {
    std::vector<std::byte> buf(8);
    size_t len = 0;
    ASSERT_EQ(store_get(s, static_cast<store_key_t>(k), buf.data(), buf.size(), &len), STORE_OK) << "key " << k;
    std::uint64_t version = (k == 0 && exhausted) ? 2 : 1;
    EXPECT_TRUE(len == 8 && check_value(static_cast<store_key_t>(k), buf.data(), len, &version)) << "key " << k;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}
