// A process that calls MPI_Finalize with its store still open (store_finalize forgotten) while
// its peers are still inside store calls: the peers' calls must complete, and every process
// must leave MPI_Finalize (issue 23: process 0 stopped its helper inside MPI_Finalize, and
// process 1, still inside a store_put of a new key, waited forever for its reply).
//
// Rank 0 puts a key of its own and calls MPI_Finalize at once, with no barrier. The other ranks
// first wait until rank 0 is inside MPI_Finalize (a file it writes just before the call), then
// put a new key of which rank 0 holds a copy and read it back: their puts need rank 0's helper
// while rank 0 finalizes, whatever the timing. After MPI_Finalize every rank checks that the store is dead
// (STORE_ERR_MPI_STATE) and writes its verdict without MPI.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "rmastore/store_hooks.h"
#include "test_util.hpp"

using namespace rmastore::test;

namespace {

std::string marker_path() {
  const char *dir = std::getenv("RMASTORE_TEST_VERDICT_DIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/rank0-in-mpi-finalize";
}

bool file_exists(const std::string &path) {
  return access(path.c_str(), F_OK) == 0;
}

// The verdict, once MPI is gone (write_verdict would use MPI).
void verdict_without_mpi(int rank, bool pass) {
  const char *dir = std::getenv("RMASTORE_TEST_VERDICT_DIR");
  if (dir == nullptr) return;
  const std::string path = std::string(dir) + "/rank-" + std::to_string(rank);
  if (FILE *f = std::fopen(path.c_str(), "w")) {
    std::fputs(pass ? "PASS\n" : "FAIL\n", f);
    std::fclose(f);
  }
}

} // namespace

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int rank = world_rank();
  const int size = world_size();
  CHECK(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE");
  CHECK(size >= 2, "needs 2 processes or more");
  const std::string marker = marker_path();
  if (rank == 0) std::remove(marker.c_str());
  MPI_Barrier(MPI_COMM_WORLD); // nobody sees a marker of an earlier run

  store_t s = make_store(2);
  if (s == nullptr) {
    CHECK(false, "store_init");
    verdict_without_mpi(rank, false);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  // A new key of which rank 0 holds a copy: its first put must ask rank 0's helper.
  store_key_t key = static_cast<store_key_t>(1000 + 1000 * rank);
  for (int holders[8], count = 0;; ++key) {
    if (store_key_holders(s, key, holders, 8, &count) != STORE_OK) break;
    if (rank == 0 || std::find(holders, holders + count, 0) != holders + count) break;
  }
  const std::vector<std::byte> value = make_value(key, 1, 256);
  if (rank == 0) {
    CHECK(store_put(s, key, value.data(), value.size()) == STORE_OK, "rank 0's store_put");
    if (FILE *f = std::fopen(marker.c_str(), "w")) std::fclose(f);
  } else {
    // Wait for rank 0 to be (about) inside MPI_Finalize, then a little more: the put of a new
    // key asks other processes, rank 0 among them, for its slots.
    const auto deadline = std::chrono::steady_clock::now() + scaled(20000);
    while (!file_exists(marker) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(file_exists(marker), "rank 0 did not reach MPI_Finalize");
    std::this_thread::sleep_for(scaled(100));
    const auto t0 = std::chrono::steady_clock::now();
    const store_status_t ps = store_put(s, key, value.data(), value.size());
    CHECK(ps == STORE_OK, "store_put while rank 0 is in MPI_Finalize: %s", store_strerror(ps));
    std::vector<std::byte> back(value.size());
    size_t len = 0;
    const store_status_t gs = store_get(s, key, back.data(), back.size(), &len);
    CHECK(gs == STORE_OK && len == value.size() && back == value, "store_get of the key just put: %s",
          store_strerror(gs));
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("rank %d: put and get while rank 0 is in MPI_Finalize took %.1f ms\n", rank, ms);
    std::fflush(stdout);
  }
  MPI_Finalize();

  // CHECK would ask MPI for the rank.
  const auto expect = [rank](bool ok, const char *what) {
    if (ok) return;
    std::fprintf(stderr, "[rank %d] check failed: %s\n", rank, what);
    ++check_failures;
  };
  std::vector<std::byte> buf(256);
  size_t len = 0;
  expect(store_get(s, key, buf.data(), buf.size(), &len) == STORE_ERR_MPI_STATE, "store_get after MPI_Finalize");
  expect(store_finalize(&s) == STORE_ERR_MPI_STATE, "store_finalize after MPI_Finalize");
  expect(s == nullptr, "store_finalize sets the handle to NULL");
  verdict_without_mpi(rank, check_failures == 0);
  return check_failures == 0 ? 0 : 1;
}
