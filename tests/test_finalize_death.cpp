// A process dies inside store_finalize, before its barrier (fault point
// finalize.before_barrier, set by the registration on the last rank). The survivors' own
// store_finalize must return, and say what happened: STORE_ERR_PROC_FAILED in the global variant
// (the barrier cannot complete without the dead process; it was reported as STORE_ERR_MPI,
// "an MPI call failed for a reason other than a process failure"), STORE_OK in the localized
// variant, whose finalize carries on through failures. Either way the handle is gone.
//
// The variant comes from RMASTORE_TEST_RECOVERY, as for the other tests.
#include <vector>

#include "test_util.hpp"

using namespace rmastore::test;

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const bool localized = test_recovery() == STORE_RECOVERY_LOCALIZED;
  const int rank = world_rank(), np = world_size();
  store_t s = make_store(2);
  CHECK(s != nullptr, "store_init");
  // Some keys with copies everywhere, so that the store's window spans every process.
  for (store_key_t k = 0; k < 4 * static_cast<store_key_t>(np); ++k) {
    if (static_cast<int>(k % static_cast<store_key_t>(np)) != rank) continue;
    const std::vector<std::byte> v = make_value(k, 1, 100);
    CHECK(store_put(s, k, v.data(), v.size()) == STORE_OK, "store_put %llu", (unsigned long long)k);
  }
  CHECK(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS, "MPI_Barrier");
  // The victim dies in here (its fault point); the others must come back.
  const store_status_t st = store_finalize(&s);
  const store_status_t want = localized ? STORE_OK : STORE_ERR_PROC_FAILED;
  CHECK(st == want, "store_finalize after a death inside it: %s, expected %s", store_strerror(st),
        store_strerror(want));
  CHECK(s == nullptr, "store_finalize left the handle set");
  write_verdict(check_failures == 0);
  MPI_Finalize();
  return check_failures == 0 ? 0 : 1;
}
