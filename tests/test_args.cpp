// Argument and handle checks: every bad call returns a clear status, on every rank, and none
// crashes or hangs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "test_util.hpp"

using namespace rmastore::test;

TEST(Args, NullAndDeadHandles) {
  char buf[8] = {};
  size_t len = 0;
  EXPECT_EQ(store_put(nullptr, 1, buf, 8), STORE_ERR_HANDLE);
  EXPECT_EQ(store_get(nullptr, 1, buf, 8, &len), STORE_ERR_HANDLE);
  EXPECT_EQ(store_finalize(nullptr), STORE_ERR_ARG);
  store_t null_store = nullptr;
  EXPECT_EQ(store_finalize(&null_store), STORE_ERR_HANDLE);
  store_info_t info;
  store_info_init(&info);
  EXPECT_EQ(store_get_info(nullptr, &info), STORE_ERR_HANDLE);

  store_t s = make_store(2);
  ASSERT_NE(s, nullptr);
  store_t stale = s;
  ASSERT_EQ(store_finalize(&s), STORE_OK);
  EXPECT_EQ(s, nullptr);
  EXPECT_EQ(store_put(stale, 1, buf, 8), STORE_ERR_HANDLE);
  EXPECT_EQ(store_get(stale, 1, buf, 8, &len), STORE_ERR_HANDLE);
  EXPECT_EQ(store_get_info(stale, &info), STORE_ERR_HANDLE);
  EXPECT_EQ(store_finalize(&stale), STORE_ERR_HANDLE);
}

TEST(Args, FinalizeWhileAnotherThreadUsesTheHandle) {
  // Calls from another thread either complete before the finalize or find a dead handle.
  store_t s = make_store(2);
  ASSERT_NE(s, nullptr);
  store_t shared = s;
  std::atomic<bool> go{false};
  std::atomic<int> bad{0}, dead{0};
  std::thread other([&] {
    char v[32] = {};
    const auto key = static_cast<store_key_t>(world_rank());
    while (!go.load()) std::this_thread::yield();
    const auto until = std::chrono::steady_clock::now() + scaled(20000);
    while (std::chrono::steady_clock::now() < until) {
      const store_status_t st = store_put(shared, key, v, sizeof v);
      if (st == STORE_ERR_HANDLE) {
        ++dead;
        break;
      }
      if (st != STORE_OK) ++bad;
    }
  });
  go = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(store_finalize(&s), STORE_OK);
  other.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(dead.load(), 1) << "the other thread must end on STORE_ERR_HANDLE";
  EXPECT_EQ(store_finalize(&shared), STORE_ERR_HANDLE);
}

TEST(Args, BadBuffersAndLengths) {
  store_t s = make_store(2);
  ASSERT_NE(s, nullptr);
  char buf[8] = {};
  size_t len = 0;
  const auto key = static_cast<store_key_t>(world_rank()); // one writer per key
  EXPECT_EQ(store_put(s, key, nullptr, 8), STORE_ERR_ARG);
  EXPECT_EQ(store_put(s, key, nullptr, 0), STORE_OK) << "an empty value needs no buffer";
  EXPECT_EQ(store_put(s, key, buf, STORE_MAX_VALUE_SIZE + 1), STORE_ERR_TOO_LARGE);
  EXPECT_EQ(store_get(s, key, nullptr, 8, &len), STORE_ERR_ARG);
  EXPECT_EQ(store_get(s, key, buf, 8, nullptr), STORE_ERR_ARG);
  EXPECT_EQ(store_get(s, key, nullptr, 0, &len), STORE_OK);
  EXPECT_EQ(len, 0u);
  EXPECT_EQ(store_get_info(s, nullptr), STORE_ERR_ARG);
  store_info_t info;
  info.struct_size = 0;
  EXPECT_EQ(store_get_info(s, &info), STORE_ERR_ARG) << "info not initialised with store_info_init";
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}

TEST(Args, InitRejectsLocalMistakesWithoutCommunicating) {
  store_config_t cfg;
  store_config_init(&cfg);
  store_t s = reinterpret_cast<store_t>(0x1);
  EXPECT_EQ(store_init(MPI_COMM_NULL, &cfg, &s), STORE_ERR_ARG);
  EXPECT_EQ(s, nullptr) << "the out-handle is cleared on error";
  EXPECT_EQ(store_init(MPI_COMM_WORLD, &cfg, nullptr), STORE_ERR_ARG);
  EXPECT_EQ(store_init_version(MPI_COMM_WORLD, &cfg, &s, STORE_API_VERSION_MAJOR + 1, 0), STORE_ERR_VERSION);
}

TEST(Args, ReplicasOutOfRangeFailOnEveryRank) {
  const int p = world_size();
  for (int r : {0, -1, p + 1}) {
    store_config_t cfg;
    store_config_init(&cfg);
    cfg.replicas = r;
    store_t s = nullptr;
    EXPECT_EQ(store_init(MPI_COMM_WORLD, &cfg, &s), STORE_ERR_ARG) << "replicas=" << r;
    EXPECT_EQ(s, nullptr);
  }
  store_config_t cfg;
  store_config_init(&cfg);
  cfg.replicas = p; // the largest legal value
  store_t s = nullptr;
  ASSERT_EQ(store_init(MPI_COMM_WORLD, &cfg, &s), STORE_OK);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}

TEST(Args, OneRankWithABadConfigFailsAllRanks) {
  store_config_t cfg;
  store_config_init(&cfg);
  cfg.replicas = 1;
  const int last = world_size() - 1;
  if (world_rank() == last) cfg.replicas = 0;
  store_t s = nullptr;
  const store_status_t st = store_init(MPI_COMM_WORLD, &cfg, &s);
  EXPECT_EQ(st, world_rank() == last ? STORE_ERR_ARG : STORE_ERR_PEER);
  EXPECT_EQ(s, nullptr);
}

TEST(Args, UninitialisedConfigFailsAllRanks) {
  store_config_t cfg{}; // struct_size 0: not from store_config_init
  store_t s = nullptr;
  EXPECT_EQ(store_init(MPI_COMM_WORLD, &cfg, &s), STORE_ERR_ARG);
  EXPECT_EQ(s, nullptr);
}

TEST(Args, InconsistentConfigFailsAllRanks) {
  const int p = world_size();
  for (int field = 0; field < 4; ++field) {
    store_config_t cfg;
    store_config_init(&cfg);
    cfg.replicas = 1;
    const int r = world_rank();
    switch (field) {
    case 0:
      cfg.replicas = 1 + (r % 2 == 1 ? 1 : 0);
      break;
    case 1:
      cfg.initial_slot_size = 64u << (r % 2);
      break;
    case 2:
      cfg.capacity_hint = (std::size_t{1} << 20) << (r % 2);
      break;
    case 3:
      cfg.node_id = r % 2 == 1 ? 0 : -1;
      break;
    }
    store_t s = nullptr;
    const store_status_t st = store_init(MPI_COMM_WORLD, &cfg, &s);
    if (p == 1) {
      // A single rank cannot disagree with itself.
      EXPECT_EQ(st, STORE_OK) << "field " << field;
      EXPECT_EQ(store_finalize(&s), STORE_OK);
    } else {
      EXPECT_EQ(st, STORE_ERR_CONFIG_MISMATCH) << "field " << field;
      EXPECT_EQ(s, nullptr);
    }
  }
}

TEST(Args, NodeIdsMayDifferAcrossRanks) {
  store_config_t cfg;
  store_config_init(&cfg);
  cfg.replicas = 1;
  cfg.node_id = world_rank() % 3;
  store_t s = nullptr;
  ASSERT_EQ(store_init(MPI_COMM_WORLD, &cfg, &s), STORE_OK);
  store_info_t info;
  store_info_init(&info);
  ASSERT_EQ(store_get_info(s, &info), STORE_OK);
  EXPECT_EQ(info.nodes, std::min(3, world_size()));
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}

TEST(Args, StoreOverASubCommunicator) {
  // Stores are independent of MPI_COMM_WORLD: one per half of the job, used concurrently.
  MPI_Comm half;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, world_rank() % 2, 0, &half), MPI_SUCCESS);
  store_config_t cfg;
  store_config_init(&cfg);
  cfg.replicas = 1;
  store_t s = nullptr;
  ASSERT_EQ(store_init(half, &cfg, &s), STORE_OK);
  MPI_Comm_free(&half); // the store keeps its own duplicate
  const int v = world_rank();
  ASSERT_EQ(store_put(s, static_cast<store_key_t>(v), &v, sizeof v), STORE_OK);
  int got = -1;
  size_t len = 0;
  ASSERT_EQ(store_get(s, static_cast<store_key_t>(v), &got, sizeof got, &len), STORE_OK);
  EXPECT_EQ(got, v);
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}
