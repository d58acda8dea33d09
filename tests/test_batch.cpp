// Batches and nonblocking puts without failures (failures: test_failure --batch 1):
// store_put_many and store_get_many do what as many store_put and store_get calls do, and
// store_put_nb's puts take effect in call order.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "test_util.hpp"

using namespace rmastore::test;

namespace {

store_key_t key_of(int rank, int k) {
  return static_cast<store_key_t>(500000) + static_cast<store_key_t>(rank) * 1000000 + static_cast<store_key_t>(k);
}

// Value lengths of both protocols and empty ones.
std::size_t length_of(int k) {
  static const std::size_t lens[] = {0, 8, 100, 3000, 20000};
  return lens[k % 5];
}

store_info_t info_of(store_t s) {
  store_info_t info;
  store_info_init(&info);
  EXPECT_EQ(store_get_info(s, &info), STORE_OK);
  return info;
}

} // namespace

TEST(Batch, PutManyThenGetManyEverywhere) {
  store_t s = make_store(2);
  ASSERT_NE(s, nullptr);
  const int me = world_rank(), p = world_size();
  // More keys than a batch works on at once (kBatchKeys), so that chunks join up.
  const int n = 1100;
  for (std::uint64_t version = 1; version <= 2; ++version) {
    std::vector<store_key_t> keys(n);
    std::vector<std::vector<std::byte>> values(n);
    std::vector<const void *> bufs(n);
    std::vector<size_t> lens(n);
    for (int k = 0; k < n; ++k) {
      keys[k] = key_of(me, k);
      values[k] = make_value(keys[k], version, length_of(k));
      bufs[k] = values[k].data();
      lens[k] = values[k].size();
    }
    ASSERT_EQ(store_put_many(s, n, keys.data(), bufs.data(), lens.data()), STORE_OK);
    MPI_Barrier(MPI_COMM_WORLD);
    // Everybody reads everybody's keys in one call, with one key missing and one buffer short.
    for (int r = 0; r < p; ++r) {
      std::vector<store_key_t> want(n + 1);
      std::vector<std::vector<std::byte>> out(n + 1, std::vector<std::byte>(20000));
      std::vector<void *> obufs(n + 1);
      std::vector<size_t> caps(n + 1, 20000), olens(n + 1, 0);
      std::vector<store_status_t> st(n + 1, STORE_ERR_INTERNAL);
      for (int k = 0; k <= n; ++k) {
        want[k] = k < n ? key_of(r, k) : key_of(r, 999999);
        obufs[k] = out[k].data();
      }
      caps[3] = 10; // length_of(3) is 3000
      ASSERT_EQ(store_get_many(s, n + 1, want.data(), obufs.data(), caps.data(), olens.data(), st.data()), STORE_OK);
      for (int k = 0; k < n; ++k) {
        if (k == 3) {
          EXPECT_EQ(st[k], STORE_ERR_TRUNCATED);
          EXPECT_EQ(olens[k], length_of(3));
          continue;
        }
        std::uint64_t got = version; // values under 16 bytes carry no version: checked as this one
        EXPECT_TRUE(st[k] == STORE_OK && olens[k] == length_of(k) &&
                    check_value(want[k], out[k].data(), olens[k], &got) && got == version)
            << "rank " << r << " key " << k << ": " << store_strerror(st[k]);
      }
      EXPECT_EQ(st[n], STORE_ERR_NOT_FOUND);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  // Every copy is where placement puts it: r copies of every key, counted by the holders.
  std::uint64_t copies = info_of(s).local_copies, all = 0;
  MPI_Allreduce(&copies, &all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(all, static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(p) * std::min(2, p));
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}

TEST(Batch, Arguments) {
  store_t s = make_store(2);
  ASSERT_NE(s, nullptr);
  const store_key_t keys[] = {1, 2, 1};
  const int x = 7;
  const void *bufs[] = {&x, &x, &x};
  const size_t lens[] = {sizeof x, sizeof x, sizeof x};
  EXPECT_EQ(store_put_many(s, 3, keys, bufs, lens), STORE_ERR_ARG) << "a key twice";
  const void *nulls[] = {nullptr, &x};
  EXPECT_EQ(store_put_many(s, 2, keys, nulls, lens), STORE_ERR_ARG) << "NULL with a length";
  EXPECT_EQ(store_put_many(s, 0, nullptr, nullptr, nullptr), STORE_OK);
  EXPECT_EQ(store_put_many(nullptr, 1, keys, bufs, lens), STORE_ERR_HANDLE);
  size_t olen = 0;
  store_status_t st = STORE_OK;
  void *obuf = nullptr;
  const size_t cap = 0;
  EXPECT_EQ(store_get_many(s, 1, keys, &obuf, &cap, &olen, nullptr), STORE_ERR_ARG);
  store_request_t req = nullptr;
  EXPECT_EQ(store_put_nb(s, 1, nullptr, 4, &req), STORE_ERR_ARG);
  EXPECT_EQ(store_put_nb(s, 1, &x, sizeof x, nullptr), STORE_ERR_ARG);
  int done = 0;
  EXPECT_EQ(store_test(&req, &done), STORE_ERR_ARG) << "no request";
  EXPECT_EQ(store_wait(nullptr), STORE_ERR_ARG);
  (void)st;
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}

// Puts started without waiting complete, in call order: a later put of the same key wins, and a
// blocking call on the handle sees every earlier one done.
TEST(Batch, NonblockingPutsInOrder) {
  store_t s = make_store(2);
  ASSERT_NE(s, nullptr);
  const int me = world_rank(), p = world_size();
  const int n = 200;
  std::vector<std::vector<std::byte>> values;
  values.reserve(3 * n);
  std::vector<store_request_t> reqs;
  for (std::uint64_t version = 1; version <= 3; ++version) {
    for (int k = 0; k < n; ++k) {
      values.push_back(make_value(key_of(me, k), version, length_of(k)));
      store_request_t r = nullptr;
      ASSERT_EQ(store_put_nb(s, key_of(me, k), values.back().data(), values.back().size(), &r), STORE_OK);
      ASSERT_NE(r, nullptr);
      reqs.push_back(r);
    }
  }
  // Completed by the worker, by store_wait, or polled by store_test.
  std::size_t tested = 0;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    if (i % 2 == 0) {
      EXPECT_EQ(store_wait(&reqs[i]), STORE_OK);
      EXPECT_EQ(reqs[i], nullptr);
      continue;
    }
    int done = 0;
    while (!done) {
      const store_status_t st = store_test(&reqs[i], &done);
      EXPECT_EQ(st, STORE_OK);
      ++tested;
    }
    EXPECT_EQ(reqs[i], nullptr);
  }
  EXPECT_GE(tested, reqs.size() / 2);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int r = 0; r < p; ++r) {
    for (int k = 0; k < n; ++k) {
      if (length_of(k) < 16) continue; // too short to carry its version
      EXPECT_EQ(version_of(s, key_of(r, k), 20000), 3u) << "rank " << r << " key " << k;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // A blocking call after nonblocking puts sees them done, without a wait: here a get of this
  // process's own key, right after its put was started.
  const auto v = make_value(key_of(me, 0), 9, 50);
  store_request_t r = nullptr;
  ASSERT_EQ(store_put_nb(s, key_of(me, 0), v.data(), v.size(), &r), STORE_OK);
  EXPECT_EQ(version_of(s, key_of(me, 0), 50), 9u);
  EXPECT_EQ(store_wait(&r), STORE_OK);
  // Outstanding at store_finalize: it runs them first; their requests are still waited for.
  const auto w = make_value(key_of(me, 1), 10, 50);
  ASSERT_EQ(store_put_nb(s, key_of(me, 1), w.data(), w.size(), &r), STORE_OK);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
  EXPECT_EQ(store_wait(&r), STORE_OK);
}

// Inside a transaction, batches join it.
TEST(Batch, InsideATransaction) {
  store_t s = make_store(2);
  ASSERT_NE(s, nullptr);
  const int me = world_rank();
  const store_key_t keys[] = {key_of(me, 1), key_of(me, 2)};
  const auto a = make_value(keys[0], 4, 30), b = make_value(keys[1], 4, 30);
  const void *bufs[] = {a.data(), b.data()};
  const size_t lens[] = {a.size(), b.size()};
  ASSERT_EQ(store_tx_begin(s), STORE_OK);
  ASSERT_EQ(store_put_many(s, 2, keys, bufs, lens), STORE_OK);
  std::vector<std::byte> o1(30), o2(30);
  void *obufs[] = {o1.data(), o2.data()};
  const size_t caps[] = {30, 30};
  size_t olens[2] = {};
  store_status_t st[2] = {};
  ASSERT_EQ(store_get_many(s, 2, keys, obufs, caps, olens, st), STORE_OK);
  std::uint64_t got = 0;
  EXPECT_TRUE(st[0] == STORE_OK && check_value(keys[0], o1.data(), olens[0], &got) && got == 4)
      << "a batch reads the open transaction's values";
  ASSERT_EQ(store_tx_abort(s), STORE_OK);
  ASSERT_EQ(store_get_many(s, 2, keys, obufs, caps, olens, st), STORE_OK);
  EXPECT_EQ(st[0], STORE_ERR_NOT_FOUND);
  EXPECT_EQ(st[1], STORE_ERR_NOT_FOUND);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}
