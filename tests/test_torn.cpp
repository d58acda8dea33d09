// A get racing with puts of the same key never returns a torn value. One rank writes the key
// in a tight loop with values of changing length and content; every other rank (holders read
// their own copy, others read remotely) reads it in a tight loop and checks each read is one
// whole value.
#include <gtest/gtest.h>

#include <chrono>

#include "capi/test_access.hpp"
#include "test_util.hpp"

using namespace rmastore::test;

namespace {

// Length of version v: alternates between the small (one put) and the large (two puts) path.
std::size_t length_of(std::uint64_t v) {
  return v % 2 == 0 ? 100 + v % 4000 : 20000 + (v * 7919) % 60000;
}

} // namespace

TEST(Torn, GetsRacingPutsSeeWholeValues) {
  const int me = world_rank();
  ASSERT_GE(world_size(), 2) << "a race between processes needs two of them (registered from np2)";
  store_t s = make_store(2);
  ASSERT_NE(s, nullptr);
  constexpr store_key_t kKey = 77;
  const int writer = 0;
  if (me == writer) {
    const auto v = make_value(kKey, 1, length_of(1));
    ASSERT_EQ(store_put(s, kKey, v.data(), v.size()), STORE_OK);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // Readers read for 1.5 s and until they saw 3 versions (across hosts a get that loses the race
  // to the writer's puts can take longer), within a hard bound; the writer writes until every
  // reader is done.
  const auto start = std::chrono::steady_clock::now();
  const auto until = start + scaled(1500), bound = start + scaled(30000);
  std::uint64_t reads = 0, versions_seen = 0, last = 0;
  auto *impl = rmastore::internal::impl(s);
  int prev_holder = -1;
  std::vector<std::byte> buf(100000);
  MPI_Request readers_done = MPI_REQUEST_NULL;
  if (me == writer) {
    ASSERT_EQ(MPI_Ibarrier(MPI_COMM_WORLD, &readers_done), MPI_SUCCESS);
    int done = 0;
    for (std::uint64_t v = 2; !done && std::chrono::steady_clock::now() < bound; ++v) {
      const auto val = make_value(kKey, v, length_of(v));
      ASSERT_EQ(store_put(s, kKey, val.data(), val.size()), STORE_OK);
      ASSERT_EQ(MPI_Test(&readers_done, &done, MPI_STATUS_IGNORE), MPI_SUCCESS);
    }
  } else {
    auto now = std::chrono::steady_clock::now();
    while ((now < until || versions_seen < 3) && now < bound) {
      size_t len = 0;
      ASSERT_EQ(store_get(s, kKey, buf.data(), buf.size(), &len), STORE_OK);
      std::uint64_t version = 0;
      ASSERT_TRUE(check_value(kKey, buf.data(), len, &version)) << "torn value of length " << len;
      ASSERT_EQ(len, length_of(version)) << "length does not belong to version " << version;
      ASSERT_GE(version, last) << "a read went back in time; served by " << impl->last_read_holder() << " previous by "
                               << prev_holder;
      prev_holder = impl->last_read_holder();
      if (version != last) ++versions_seen;
      last = version;
      ++reads;
      now = std::chrono::steady_clock::now();
    }
    ASSERT_EQ(MPI_Ibarrier(MPI_COMM_WORLD, &readers_done), MPI_SUCCESS);
  }
  ASSERT_EQ(MPI_Wait(&readers_done, MPI_STATUS_IGNORE), MPI_SUCCESS);
  // The race must actually have happened: readers saw several versions while the writer wrote.
  std::uint64_t min_seen = 0;
  std::uint64_t mine = me == writer ? ~std::uint64_t{0} : versions_seen;
  MPI_Allreduce(&mine, &min_seen, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  EXPECT_GE(min_seen, 3u) << "readers saw too few versions for a race";
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}
