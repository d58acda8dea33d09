// store_init with MPI below MPI_THREAD_MULTIPLE fails on every rank with STORE_ERR_THREAD_LEVEL.
// Run with argument "all" (every rank asks for MPI_THREAD_SERIALIZED) or "odd" (odd ranks do,
// even ranks ask for MPI_THREAD_MULTIPLE), so the check must be collective.
#include <mpi.h>

#include <cstdio>
#include <cstring>

#include "test_util.hpp"

int main(int argc, char **argv) {
  const bool odd_only = argc > 1 && std::strcmp(argv[1], "odd") == 0;
  int rank = 0, provided = 0;
  // The rank is not known before MPI_Init_thread; PMIx exports it to the environment.
  const char *env_rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const int pre_rank = env_rank ? std::atoi(env_rank) : 0;
  const int wanted = (odd_only && pre_rank % 2 == 0) ? MPI_THREAD_MULTIPLE : MPI_THREAD_SERIALIZED;
  MPI_Init_thread(&argc, &argv, wanted, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  store_config_t cfg;
  store_config_init(&cfg);
  cfg.replicas = 1;
  store_t s = nullptr;
  const store_status_t st = store_init(MPI_COMM_WORLD, &cfg, &s);
  int some_below = provided < MPI_THREAD_MULTIPLE ? 1 : 0, any_below = 0;
  MPI_Allreduce(&some_below, &any_below, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  bool ok;
  if (any_below) {
    ok = st == STORE_ERR_THREAD_LEVEL && s == nullptr;
  } else {
    // This MPI upgraded every rank to MPI_THREAD_MULTIPLE: then init must work.
    ok = st == STORE_OK && store_finalize(&s) == STORE_OK;
  }
  if (!ok) std::printf("rank %d: store_init returned %d (%s), provided %d\n", rank, st, store_strerror(st), provided);
  rmastore::test::write_verdict(ok);
  MPI_Finalize();
  return ok ? 0 : 1;
}
