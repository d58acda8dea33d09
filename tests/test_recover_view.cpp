// store_recover never rebuilds the store on survivors that disagree on who survived: the
// agreement after MPIX_Comm_shrink carries each survivor's view of the membership, and a
// difference makes every survivor's store_recover return STORE_ERR_MPI (issue 23: survivors that
// rebuilt without a live process split the store).
//
// The last rank dies by its own hand; RMASTORE_FAULT=recover.skewed_view@1 (the registration)
// makes rank 1 see the survivors otherwise in its first agreement. Every survivor must get
// STORE_ERR_MPI from store_recover, within the bound, and from every later call; store_finalize
// must then abandon the store (STORE_ERR_MPI) and clear the handle. The runner checks that the
// skew fired.
#include <chrono>
#include <thread>

#include "test_util.hpp"

using namespace rmastore::test;

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int rank = world_rank(), size = world_size();
  CHECK(size >= 3, "needs 3 processes or more");
  const int victim = size - 1;
  if (rank == 0) expect_deaths({"own-hand@" + std::to_string(victim)});
  store_t s = make_store(2);
  CHECK(s != nullptr, "store_init");
  if (s == nullptr) {
    write_verdict(false);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  const auto key = static_cast<store_key_t>(rank);
  const std::vector<std::byte> value = make_value(key, 1, 64);
  CHECK(store_put(s, key, value.data(), value.size()) == STORE_OK, "store_put");
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == victim) die_by_own_hand("the failure that store_recover recovers from");

  // Until the death is known: the global variant's puts report it, the localized variant's
  // carry on through it (its store_recover is a compaction).
  const auto deadline = std::chrono::steady_clock::now() + scaled(20000);
  bool known = false;
  while (!known && std::chrono::steady_clock::now() < deadline) {
    if (test_recovery() == STORE_RECOVERY_LOCALIZED) {
      store_info_t info;
      store_info_init(&info);
      known = store_get_info(s, &info) == STORE_OK && info.failed_processes > 0;
    } else {
      known = store_put(s, key, value.data(), value.size()) == STORE_ERR_PROC_FAILED;
    }
    if (!known) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(known, "the death was not reported within the bound");

  const auto t0 = std::chrono::steady_clock::now();
  MPI_Comm comm = MPI_COMM_NULL;
  const store_status_t rs = store_recover(s, &comm);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(rs == STORE_ERR_MPI, "store_recover with differing views of the survivors: %s, not %s", store_strerror(rs),
        store_strerror(STORE_ERR_MPI));
  CHECK(comm == MPI_COMM_NULL, "store_recover handed out a communicator");
  CHECK(seconds < 10.0 * time_scale(), "store_recover took %.1f s", seconds);
  // For good: a second recovery, and data calls, say so too.
  CHECK(store_recover(s, &comm) == STORE_ERR_MPI, "a second store_recover");
  CHECK(store_put(s, key, value.data(), value.size()) == STORE_ERR_MPI, "store_put after the disagreement");
  const store_status_t fs = store_finalize(&s);
  CHECK(fs == STORE_ERR_MPI, "store_finalize after the disagreement: %s", store_strerror(fs));
  CHECK(s == nullptr, "store_finalize left the handle set");
  std::printf("rank %d: store_recover %s in %.3f s, store_finalize %s\n", rank, store_strerror(rs), seconds,
              store_strerror(fs));
  std::fflush(stdout);
  write_verdict(check_failures == 0);
  MPI_Finalize();
  return check_failures == 0 ? 0 : 1;
}
