// STORE_DETECTOR_PING on its own: a put aimed at a dead holder reports STORE_ERR_PROC_FAILED
// because its ping to that holder fails, and for no other reason.
//
// The registration sets RMASTORE_FAULT_OFF=notify: the helper thread then ignores the failures
// MPI reports to it (src/common/fault.hpp), so the store can learn of a failure only from a ping.
// Without the ping, the put's RMA to the dead holder would never complete (a flush to a dead
// process hangs); a watchdog turns that into a failure.
//
// The last rank dies by its own hand. The survivors learn of the death through MPI on their own
// communicator (a barrier that includes the dead rank fails), check that the store has not heard
// of it (otherwise this test would not be about pings), then each puts again a key that the dead
// rank holds a copy of and that this rank already has write grants for (so that the put sends no
// control message, only pings and RMA). The put must fail with STORE_ERR_PROC_FAILED after
// sending pings; then store_recover must work and the key hold a value that was put.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "capi/test_access.hpp"
#include "ping_count.hpp"
#include "test_util.hpp"

using namespace rmastore::test;

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int rank = world_rank(), np = world_size(), victim = np - 1;
  MPI_Comm mine = MPI_COMM_NULL; // the test's own: it learns of the death here, not from the store
  CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &mine) == MPI_SUCCESS, "MPI_Comm_dup");
  MPI_Comm_set_errhandler(mine, MPI_ERRORS_RETURN);

  store_config_t cfg;
  store_config_init(&cfg);
  cfg.replicas = 2;
  cfg.detector = STORE_DETECTOR_PING;
  cfg.recovery = STORE_RECOVERY_GLOBAL;
  store_t s = nullptr;
  CHECK(store_init(MPI_COMM_WORLD, &cfg, &s) == STORE_OK, "store_init");
  if (s == nullptr) MPI_Abort(MPI_COMM_WORLD, 2);
  auto *impl = rmastore::internal::impl(s);

  // A key of this rank with a copy on the victim.
  store_key_t key = static_cast<store_key_t>(rank) * 1000;
  for (;; ++key) {
    const std::vector<int> h = impl->holders(key);
    if (std::find(h.begin(), h.end(), victim) != h.end()) break;
  }
  constexpr std::size_t kLen = 1000;
  const auto v1 = make_value(key, 1, kLen), v2 = make_value(key, 2, kLen);
  CHECK(store_put(s, key, v1.data(), v1.size()) == STORE_OK, "first put");
  CHECK(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS, "barrier");

  if (rank == 0) expect_deaths({"own-hand@" + std::to_string(victim)});
  if (rank == victim) die_by_own_hand("after the first puts");

  // MPI knows of the death once a barrier that includes the victim fails.
  int rc = MPI_SUCCESS;
  const auto deadline = std::chrono::steady_clock::now() + scaled(20000);
  do {
    rc = MPI_Barrier(mine);
  } while (rc == MPI_SUCCESS && std::chrono::steady_clock::now() < deadline);
  CHECK(rc != MPI_SUCCESS, "barriers with the dead rank kept succeeding");

  store_info_t info;
  store_info_init(&info);
  store_get_info(s, &info);
  CHECK(info.failed_processes == 0,
        "the store knew of the failure before any ping (%d failed): RMASTORE_FAULT_OFF=notify had no effect, so "
        "this test would not show that pings detect anything",
        info.failed_processes);

  // The put, bounded by a watchdog: without a ping it would wait forever.
  const std::uint64_t pings_before = pings_sent();
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock lk(m);
    if (cv.wait_for(lk, scaled(10000), [&] { return done; })) return;
    std::fprintf(stderr, "[rank %d] the put to a dead holder did not return: no ping detected the death\n", rank);
    std::fflush(stderr);
    write_verdict(false);
    MPI_Abort(MPI_COMM_WORLD, 1);
  });
  const store_status_t st = store_put(s, key, v2.data(), v2.size());
  {
    std::lock_guard lk(m);
    done = true;
  }
  cv.notify_one();
  watchdog.join();
  CHECK(st == STORE_ERR_PROC_FAILED, "put to a dead holder returned %s", store_strerror(st));
  CHECK(pings_sent() > pings_before, "the put sent no ping");

  // Every survivor has put before any starts store_recover: its revocation would otherwise fail
  // the later puts before their pings. Point to point among the survivors, on a communicator
  // that holds the dead rank.
  char token = 0;
  if (rank == 0) {
    for (int r = 1; r < victim; ++r)
      CHECK(MPI_Recv(&token, 1, MPI_CHAR, r, 7, mine, MPI_STATUS_IGNORE) == MPI_SUCCESS, "recv");
    for (int r = 1; r < victim; ++r) CHECK(MPI_Send(&token, 1, MPI_CHAR, r, 7, mine) == MPI_SUCCESS, "send");
  } else {
    CHECK(MPI_Send(&token, 1, MPI_CHAR, 0, 7, mine) == MPI_SUCCESS, "send");
    CHECK(MPI_Recv(&token, 1, MPI_CHAR, 0, 7, mine, MPI_STATUS_IGNORE) == MPI_SUCCESS, "recv");
  }

  // The failure reported by a ping is a failure like any other: the survivors recover.
  store_status_t rs = STORE_ERR_RECOVER_AGAIN;
  for (int attempts = 0; rs == STORE_ERR_RECOVER_AGAIN && attempts < 10; ++attempts) rs = store_recover(s, nullptr);
  CHECK(rs == STORE_OK, "store_recover: %s", store_strerror(rs));
  std::vector<std::byte> got(kLen);
  std::size_t len = 0;
  std::uint64_t version = 0;
  const store_status_t gs = store_get(s, key, got.data(), got.size(), &len);
  CHECK(gs == STORE_OK && len == kLen && check_value(key, got.data(), len, &version) && version >= 1,
        "key %llu after recovery: %s", (unsigned long long)key, store_strerror(gs));
  CHECK(store_finalize(&s) == STORE_OK, "store_finalize");
  write_verdict(check_failures == 0);
  MPI_Comm_free(&mine);
  MPI_Finalize();
  return check_failures == 0 ? 0 : 1;
}
