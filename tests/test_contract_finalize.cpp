// MPI_Finalize with stores still open (an application leaving through an error path) must not
// abort the job, and every later call on those stores returns STORE_ERR_MPI_STATE (issue 9:
// the helper thread called MPI_Test after MPI_Finalize, and MPI_ERRORS_ARE_FATAL aborted).
//
// Two stores stay open, one of each recovery variant (the localized one has a repair thread
// too). After MPI_Finalize the test waits a little, so that threads left running would call
// MPI, then checks the calls. The verdict is written without MPI: nothing can agree any more.
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace {

int failures = 0;

void expect(bool ok, const char *what, int rank) {
  if (ok) return;
  std::fprintf(stderr, "[rank %d] check failed: %s\n", rank, what);
  ++failures;
}

void write_verdict_without_mpi(int rank, bool pass) {
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
  const int rank = rmastore::test::world_rank();
  const int size = rmastore::test::world_size();
  expect(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE", rank);

  store_t global = rmastore::test::make_store(2, 64, STORE_RECOVERY_GLOBAL);
  store_t localized = rmastore::test::make_store(2, 64, STORE_RECOVERY_LOCALIZED);
  expect(global != nullptr && localized != nullptr, "store_init", rank);
  if (global == nullptr || localized == nullptr) {
    write_verdict_without_mpi(rank, false);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  // Each rank writes its own keys, and reads its neighbour's: the helpers have served requests.
  for (store_t s : {global, localized}) {
    for (int k = 0; k < 4; ++k) {
      const auto key = static_cast<store_key_t>(rank * 10 + k);
      const auto v = rmastore::test::make_value(key, 1, 100);
      expect(store_put(s, key, v.data(), v.size()) == STORE_OK, "store_put before MPI_Finalize", rank);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  std::vector<std::byte> buf(100);
  size_t len = 0;
  const auto other = static_cast<store_key_t>(((rank + 1) % size) * 10);
  expect(store_get(global, other, buf.data(), buf.size(), &len) == STORE_OK, "store_get before MPI_Finalize", rank);
  MPI_Barrier(MPI_COMM_WORLD);

  MPI_Finalize();
  // Threads still running would be calling MPI now; give them the time to.
  usleep(200'000);

  const auto v = rmastore::test::make_value(1, 2, 100);
  expect(store_put(global, 1, v.data(), v.size()) == STORE_ERR_MPI_STATE, "store_put after MPI_Finalize", rank);
  expect(store_get(localized, 1, buf.data(), buf.size(), &len) == STORE_ERR_MPI_STATE, "store_get after MPI_Finalize",
         rank);
  store_info_t info;
  store_info_init(&info);
  expect(store_get_info(global, &info) == STORE_ERR_MPI_STATE, "store_get_info after MPI_Finalize", rank);
  expect(store_tx_begin(localized) == STORE_ERR_MPI_STATE, "store_tx_begin after MPI_Finalize", rank);
  for (store_t *s : {&global, &localized}) {
    expect(store_finalize(s) == STORE_ERR_MPI_STATE, "store_finalize after MPI_Finalize", rank);
    expect(*s == nullptr, "store_finalize sets the handle to NULL", rank);
  }
  expect(store_finalize(&global) == STORE_ERR_HANDLE, "store_finalize of a NULL handle", rank);
  write_verdict_without_mpi(rank, failures == 0);
  return failures == 0 ? 0 : 1;
}
