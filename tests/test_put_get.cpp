// Failure-free data path: sizes, growth and shrinking, concurrent writers of distinct keys,
// ownership moving between writers, a model-based random test, and copy counts.
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

constexpr std::size_t kSlot = 64; // initial slot size used below

class PutGet : public ::testing::TestWithParam<int> {
protected:
  void SetUp() override {
    s_ = make_store(GetParam(), kSlot);
    ASSERT_NE(s_, nullptr);
  }
  void TearDown() override {
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_EQ(store_finalize(&s_), STORE_OK);
  }
  // Gets `key` and checks it is exactly make_value(key, version, len).
  void expect_value(store_key_t key, std::uint64_t version, std::size_t len) {
    std::vector<std::byte> buf(len + 1);
    size_t got = 12345;
    ASSERT_EQ(store_get(s_, key, buf.data(), buf.size(), &got), STORE_OK) << "key " << key;
    ASSERT_EQ(got, len) << "key " << key;
    EXPECT_EQ(std::vector<std::byte>(buf.begin(), buf.begin() + static_cast<long>(len)), make_value(key, version, len))
        << "key " << key << " len " << len;
  }
  void put(store_key_t key, std::uint64_t version, std::size_t len) {
    const auto v = make_value(key, version, len);
    ASSERT_EQ(store_put(s_, key, v.data(), v.size()), STORE_OK) << "key " << key << " len " << len;
  }
  // How many of `key`'s holders are other processes.
  std::uint64_t remote_holders(store_key_t key) const {
    const auto *impl = rmastore::internal::impl(s_);
    std::vector<int> holders(static_cast<std::size_t>(impl->placement()->replicas()));
    impl->placement()->holders(key, holders);
    return static_cast<std::uint64_t>(
        std::count_if(holders.begin(), holders.end(), [](int h) { return h != world_rank(); }));
  }
  store_t s_ = nullptr;
};

} // namespace

TEST_P(PutGet, AllSizesFromEveryRank) {
  constexpr std::size_t kLimit = rmastore::internal::kInPlaceLimit; // where the protocols meet
  // Past kLimit every size takes the same path; the largest size has a test of its own (below).
  const std::vector<std::size_t> sizes = {0, 1, 8, kSlot - 1, kSlot, kSlot + 1, kLimit, kLimit + 1, 1 << 20, 8 << 20};
  const int me = world_rank(), p = world_size();
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    put(static_cast<store_key_t>(me * 100 + i), 1, sizes[i]);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (int owner = 0; owner < p; ++owner) {
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      // Everyone reads everything except the 8 MiB values, which only the next rank reads.
      if (sizes[i] == (8u << 20) && owner != (me + 1) % p) continue;
      expect_value(static_cast<store_key_t>(owner * 100 + i), 1, sizes[i]);
    }
  }
}

TEST_P(PutGet, ValuesGrowAndShrink) {
  const std::vector<std::size_t> sizes = {8, 1000, 100000, 3, 0, 1 << 20, 16, 70000, 65, 300000, 2000};
  const int me = world_rank(), p = world_size();
  const auto key = static_cast<store_key_t>(1000 + me);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    put(key, i + 1, sizes[i]);
    expect_value(key, i + 1, sizes[i]);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int other = 0; other < p; ++other) expect_value(static_cast<store_key_t>(1000 + other), i + 1, sizes[i]);
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

TEST_P(PutGet, MissingKeyAndShortBuffers) {
  std::vector<std::byte> buf(64);
  size_t len = 0;
  EXPECT_EQ(store_get(s_, 0xdeadbeef, buf.data(), buf.size(), &len), STORE_ERR_NOT_FOUND);
  const auto key = static_cast<store_key_t>(2000 + world_rank());
  put(key, 1, 1000);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto other = static_cast<store_key_t>(2000 + (world_rank() + 1) % world_size());
  for (store_key_t k : {key, other}) {
    len = 0;
    EXPECT_EQ(store_get(s_, k, buf.data(), buf.size(), &len), STORE_ERR_TRUNCATED);
    EXPECT_EQ(len, 1000u);
    len = 0;
    EXPECT_EQ(store_get(s_, k, nullptr, 0, &len), STORE_ERR_TRUNCATED) << "length query";
    EXPECT_EQ(len, 1000u);
    expect_value(k, 1, 1000);
  }
}

TEST_P(PutGet, ConcurrentWritersOfDistinctKeys) {
  const int me = world_rank(), p = world_size();
  constexpr int kKeys = 200;
  for (int i = 0; i < kKeys; ++i)
    put(static_cast<store_key_t>(me * kKeys + i), 7, static_cast<std::size_t>(i * 13 % 300));
  MPI_Barrier(MPI_COMM_WORLD);
  for (int owner = 0; owner < p; ++owner) {
    for (int i = 0; i < kKeys; ++i) {
      expect_value(static_cast<store_key_t>(owner * kKeys + i), 7, static_cast<std::size_t>(i * 13 % 300));
    }
  }
}

TEST_P(PutGet, WritersTakeTurnsOnOneKey) {
  // Each rank in turn overwrites the same keys, growing them, while every rank has read (and
  // cached) the old copies: exercises write-grant transfer and slot moves with cached readers.
  const int me = world_rank(), p = world_size();
  for (int round = 0; round < 2 * p; ++round) {
    const int writer = round % p;
    const std::size_t len = 10u << round;
    if (me == writer) {
      for (store_key_t k = 3000; k < 3010; ++k) put(k, static_cast<std::uint64_t>(round + 1), len);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (store_key_t k = 3000; k < 3010; ++k) expect_value(k, static_cast<std::uint64_t>(round + 1), len);
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

TEST_P(PutGet, EveryKeyHasItsCopiesWhereThePlacementSays) {
  const int me = world_rank(), p = world_size();
  constexpr int kKeys = 300;
  for (int i = 0; i < kKeys; ++i) put(static_cast<store_key_t>(5000 + me * kKeys + i), 1, 24);
  MPI_Barrier(MPI_COMM_WORLD);
  auto *impl = rmastore::internal::impl(s_);
  ASSERT_NE(impl, nullptr);
  const int r = impl->placement()->replicas();
  std::vector<int> holders(static_cast<std::size_t>(r));
  std::uint64_t held = 0;
  for (int i = 0; i < kKeys * p; ++i) {
    const auto key = static_cast<store_key_t>(5000 + i);
    impl->placement()->holders(key, holders);
    SlotHeader h;
    std::vector<std::byte> v;
    const bool mine = std::find(holders.begin(), holders.end(), me) != holders.end();
    EXPECT_EQ(impl->read_local_copy(key, h, v), mine) << "key " << key;
    if (mine) {
      ++held;
      EXPECT_EQ(v, make_value(key, 1, 24));
    }
  }
  store_info_t info;
  store_info_init(&info);
  ASSERT_EQ(store_get_info(s_, &info), STORE_OK);
  EXPECT_EQ(info.local_copies, held);
  std::uint64_t total = 0;
  MPI_Allreduce(&held, &total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(total, static_cast<std::uint64_t>(kKeys) * p * r);
}

TEST_P(PutGet, RepeatPutsThatFitAreOneSided) {
  const auto key = static_cast<store_key_t>(7000 + world_rank());
  store_info_t before, after;
  store_info_init(&before);
  store_info_init(&after);
  put(key, 1, 1000); // first put: asks every holder for a slot
  ASSERT_EQ(store_get_info(s_, &before), STORE_OK);
  for (std::uint64_t v = 2; v < 50; ++v) put(key, v, 10 + v * 19 % 1000); // all fit in 1024
  ASSERT_EQ(store_get_info(s_, &after), STORE_OK);
  const auto *impl = rmastore::internal::impl(s_);
  const std::uint64_t remote = remote_holders(key);
  // Localized: the first put's locks stay cached, so the repeat puts take them without a message.
  EXPECT_EQ(after.requests_sent, before.requests_sent) << "a put that fits its slots sent a message";
  put(key, 50, 5000); // outgrows the slots: one request per remote holder, no more
  store_info_t grown;
  store_info_init(&grown);
  ASSERT_EQ(store_get_info(s_, &grown), STORE_OK);
  EXPECT_LE(grown.requests_sent - after.requests_sent, remote);
  MPI_Barrier(MPI_COMM_WORLD);
  expect_value(key, 50, 5000);
  // Slots were created for the first puts and moved for the growth, by the holders.
  store_info_t done;
  store_info_init(&done);
  ASSERT_EQ(store_get_info(s_, &done), STORE_OK);
  std::uint64_t served = done.enlargements_served, total = 0;
  MPI_Allreduce(&served, &total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_GE(total,
            2u * static_cast<std::uint64_t>(world_size()) * static_cast<std::uint64_t>(impl->placement()->replicas()));
}

// A key another process wrote first: its records exist, and this process's grant replies say
// so. Its repeat puts must send nothing either (the second put used to record the key again).
TEST_P(PutGet, ASecondWritersRepeatPutsAreOneSided) {
  const int p = world_size();
  const auto key = static_cast<store_key_t>(7500 + world_rank());
  put(static_cast<store_key_t>(7500 + (world_rank() + p - 1) % p), 1, 100); // the previous rank's key
  MPI_Barrier(MPI_COMM_WORLD); // puts of one key by two processes must be ordered
  put(key, 2, 100);            // this process's first put of its key: asks its holders
  store_info_t before, after;
  store_info_init(&before);
  store_info_init(&after);
  ASSERT_EQ(store_get_info(s_, &before), STORE_OK);
  for (std::uint64_t v = 3; v < 20; ++v) put(key, v, 100);
  ASSERT_EQ(store_get_info(s_, &after), STORE_OK);
  // Localized: the previous writer's cached locks were taken back at this process's first put.
  EXPECT_EQ(after.requests_sent, before.requests_sent) << "a second writer's repeat put sent a message";
  MPI_Barrier(MPI_COMM_WORLD);
  expect_value(key, 19, 100);
}

TEST_P(PutGet, GetsReadTheLocalCopyWhenThereIsOne) {
  const int me = world_rank(), p = world_size();
  const auto *impl = rmastore::internal::impl(s_);
  std::vector<int> holders(static_cast<std::size_t>(impl->placement()->replicas()));
  for (int i = 0; i < 20; ++i) put(static_cast<store_key_t>(8000 + me * 20 + i), 1, 100);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < 20 * p; ++i) {
    const auto key = static_cast<store_key_t>(8000 + i);
    expect_value(key, 1, 100);
    impl->placement()->holders(key, holders);
    const bool mine = std::find(holders.begin(), holders.end(), me) != holders.end();
    if (mine) {
      EXPECT_EQ(impl->last_read_holder(), me) << "key " << key << " was not read from the local copy";
    } else {
      EXPECT_EQ(impl->last_read_holder(), holders.front()) << "key " << key;
    }
  }
}

TEST_P(PutGet, ModelBasedRandomOperations) {
  // Each rank applies random puts and gets to its own key range and checks every read against
  // a std::map. The sequence is a function of the rank, so any rank can replay any other's
  // final state without communication, and then all ranks check all keys.
  const int me = world_rank(), p = world_size();
  constexpr int kOps = 400, kKeysPerRank = 40;
  const auto replay = [&](int rank, bool apply) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(rank) * 7919 + 17);
    std::map<store_key_t, std::pair<std::uint64_t, std::size_t>> model; // key -> (version, len)
    for (int op = 0; op < kOps; ++op) {
      const auto key = static_cast<store_key_t>(100000 + rank * kKeysPerRank + static_cast<int>(rng() % kKeysPerRank));
      const bool is_put = rng() % 3 != 0;
      const std::size_t len = rng() % 10 == 0 ? 20000 + rng() % 50000 : rng() % 300;
      if (is_put) {
        const std::uint64_t version = static_cast<std::uint64_t>(op) + 1;
        model[key] = {version, len};
        if (apply) put(key, version, len);
      } else if (apply) {
        auto it = model.find(key);
        if (it == model.end()) {
          std::byte b;
          size_t got = 0;
          EXPECT_EQ(store_get(s_, key, &b, 1, &got), STORE_ERR_NOT_FOUND) << "key " << key;
        } else {
          expect_value(key, it->second.first, it->second.second);
        }
      }
    }
    return model;
  };
  replay(me, true);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int rank = 0; rank < p; ++rank) {
    for (const auto &[key, vl] : replay(rank, false)) expect_value(key, vl.first, vl.second);
  }
}

TEST(PutGetLargest, A256MiBValueRoundTrips) {
  // The largest size the store promises to handle well: written by rank 0, read by the last.
  store_t s = make_store(2);
  ASSERT_NE(s, nullptr);
  constexpr std::size_t kLen = std::size_t{256} << 20;
  constexpr store_key_t kKey = 424242;
  const int last = world_size() - 1;
  if (world_rank() == 0) {
    const auto v = make_value(kKey, 1, kLen);
    ASSERT_EQ(store_put(s, kKey, v.data(), v.size()), STORE_OK);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == last) {
    std::vector<std::byte> buf(kLen);
    size_t len = 0;
    ASSERT_EQ(store_get(s, kKey, buf.data(), buf.size(), &len), STORE_OK);
    ASSERT_EQ(len, kLen);
    std::uint64_t version = 0;
    EXPECT_TRUE(check_value(kKey, buf.data(), len, &version));
    EXPECT_EQ(version, 1u);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}

INSTANTIATE_TEST_SUITE_P(Replicas, PutGet, ::testing::Values(1, 2, 3),
                         [](const auto &param_info) { return "r" + std::to_string(param_info.param); });
