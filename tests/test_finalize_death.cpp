// A process dies inside store_finalize, before its barrier (fault point
// finalize.before_barrier, set by the registration on the last rank). The survivors' own
// store_finalize must return, and say what happened: STORE_ERR_PROC_FAILED in the global variant
// (the barrier cannot complete without the dead process; it was reported as STORE_ERR_MPI,
// "an MPI call failed for a reason other than a process failure"), STORE_OK in the localized
// variant, whose finalize carries on through failures. Either way the handle is gone.
//
// With --known-before (global variant), the victim dies by its own hand before store_finalize
// instead, and the survivors call it once their puts report the failure, without store_recover:
// STORE_ERR_PROC_FAILED again. In both modes the survivors' MPI_Finalize must then end the job
// (the store's threads once outlived a failed store_finalize and aborted it).
//
// The variant comes from RMASTORE_TEST_RECOVERY, as for the other tests.
#include <chrono>
#include <cstring>
#include <string>
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
  const bool known_before = argc > 1 && std::strcmp(argv[1], "--known-before") == 0;
  CHECK(!known_before || !localized, "--known-before is for the global variant");
  const int victim = np - 1;
  if (known_before && rank == 0) expect_deaths({"own-hand@" + std::to_string(victim)});
  CHECK(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS, "MPI_Barrier");
  if (known_before) {
    if (rank == victim) die_by_own_hand("before store_finalize");
    // Puts that need the victim fail once the failure is known.
    store_status_t put = STORE_OK;
    const auto until = std::chrono::steady_clock::now() + scaled(20000);
    for (store_key_t k = 0; put == STORE_OK && std::chrono::steady_clock::now() < until; ++k) {
      const std::vector<std::byte> v = make_value(k, 2, 100);
      put = store_put(s, k % (4 * static_cast<store_key_t>(np)), v.data(), v.size());
    }
    CHECK(put == STORE_ERR_PROC_FAILED, "puts after the death: %s, expected %s", store_strerror(put),
          store_strerror(STORE_ERR_PROC_FAILED));
  }
  // Without --known-before the victim dies in here (its fault point); the others must come back.
  const store_status_t st = store_finalize(&s);
  const store_status_t want = localized ? STORE_OK : STORE_ERR_PROC_FAILED;
  CHECK(st == want, "store_finalize after a death %s it: %s, expected %s", known_before ? "before" : "inside",
        store_strerror(st), store_strerror(want));
  CHECK(s == nullptr, "store_finalize left the handle set");
  write_verdict(check_failures == 0);
  MPI_Finalize();
  return check_failures == 0 ? 0 : 1;
}
