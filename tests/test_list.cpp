// store_list without failures (with failures: test_failure, where survivors list the keys of a
// dead rank's range): every key of a range, page by page, and nothing deleted or outside it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "test_util.hpp"

using namespace rmastore::test;

namespace {

store_key_t base_of(int rank) {
  return static_cast<store_key_t>(900000) + static_cast<store_key_t>(rank) * 100000;
}

// Every key in [first, last], `page` at a time.
std::vector<store_key_t> list_all(store_t s, store_key_t first, store_key_t last, std::size_t page) {
  std::vector<store_key_t> all, buf(page);
  for (int calls = 0; calls < 100000; ++calls) {
    size_t count = 0;
    int more = 0;
    EXPECT_EQ(store_list(s, first, last, buf.data(), buf.size(), &count, &more), STORE_OK);
    EXPECT_LE(count, page);
    EXPECT_TRUE(std::is_sorted(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(count)));
    all.insert(all.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(count));
    if (!more) return all;
    EXPECT_GT(count, 0u);
    if (count == 0) return all;
    first = buf[count - 1] + 1;
  }
  ADD_FAILURE() << "listing did not end";
  return all;
}

} // namespace

TEST(List, EveryKeyOfARangePageByPage) {
  store_t s = make_store(2);
  ASSERT_NE(s, nullptr);
  const int me = world_rank(), p = world_size();
  const int n = 57;
  // Keys 3 apart in this rank's range, and one just outside it on each side.
  for (int k = 0; k < n; ++k) {
    const store_key_t key = base_of(me) + 3 * static_cast<store_key_t>(k) + 1;
    const auto v = make_value(key, 1, 20);
    ASSERT_EQ(store_put(s, key, v.data(), v.size()), STORE_OK);
  }
  const auto edge = make_value(base_of(me), 1, 4);
  ASSERT_EQ(store_put(s, base_of(me), edge.data(), edge.size()), STORE_OK);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int r = 0; r < p; ++r) {
    std::vector<store_key_t> want;
    for (int k = 0; k < n; ++k) want.push_back(base_of(r) + 3 * static_cast<store_key_t>(k) + 1);
    for (std::size_t page : {1u, 7u, 1000u}) {
      EXPECT_EQ(list_all(s, base_of(r) + 1, base_of(r) + 3 * n, page), want) << "rank " << r << " page " << page;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // Deleted keys are not listed.
  for (int k = 0; k < n; k += 2)
    ASSERT_EQ(store_delete(s, base_of(me) + 3 * static_cast<store_key_t>(k) + 1), STORE_OK);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int r = 0; r < p; ++r) {
    std::vector<store_key_t> want;
    for (int k = 1; k < n; k += 2) want.push_back(base_of(r) + 3 * static_cast<store_key_t>(k) + 1);
    EXPECT_EQ(list_all(s, base_of(r) + 1, base_of(r) + 3 * n, 10), want) << "rank " << r;
  }
  // The whole key space: every key left, once.
  const std::vector<store_key_t> everything = list_all(s, 0, UINT64_MAX, 100);
  EXPECT_EQ(everything.size(), static_cast<std::size_t>(p) * (n / 2 + 1));
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}

TEST(List, Arguments) {
  store_t s = make_store(2);
  ASSERT_NE(s, nullptr);
  store_key_t keys[4];
  size_t count = 0;
  int more = 0;
  EXPECT_EQ(store_list(s, 5, 4, keys, 4, &count, &more), STORE_ERR_ARG) << "first > last";
  EXPECT_EQ(store_list(s, 0, 4, keys, 0, &count, &more), STORE_ERR_ARG) << "capacity 0";
  EXPECT_EQ(store_list(s, 0, 4, nullptr, 4, &count, &more), STORE_ERR_ARG);
  EXPECT_EQ(store_list(s, 0, 4, keys, 4, nullptr, &more), STORE_ERR_ARG);
  EXPECT_EQ(store_list(s, 0, 4, keys, 4, &count, nullptr), STORE_ERR_ARG);
  EXPECT_EQ(store_list(nullptr, 0, 4, keys, 4, &count, &more), STORE_ERR_HANDLE);
  // An empty range of an empty store.
  EXPECT_EQ(store_list(s, 10, 20, keys, 4, &count, &more), STORE_OK);
  EXPECT_EQ(count, 0u);
  EXPECT_EQ(more, 0);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}
