// store_init with MPI below MPI_THREAD_MULTIPLE fails on every rank with STORE_ERR_THREAD_LEVEL.
// Run with argument "all" (every rank asks for MPI_THREAD_SERIALIZED) or "odd" (odd ranks do,
// even ranks ask for MPI_THREAD_MULTIPLE), so the check must be collective.
#include <getopt.h>
#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "test_util.hpp"

int main(int argc, char **argv) {
  // Parsed before MPI_Init_thread, whose thread level depends on it: a mistake is printed by
  // every process.
  const rmastore::test::Cli cli{"test_thread_level all|odd"};
  static const option options[] = {{"help", no_argument, nullptr, 'h'}, {nullptr, 0, nullptr, 0}};
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":h", options, nullptr)) != -1;) {
    if (c == 'h') cli.help();
    cli.bad_option(c, argv);
  }
  if (argc - optind != 1) cli.error("needs one argument, all or odd");
  const std::string mode = argv[optind];
  if (mode != "all" && mode != "odd") cli.error("needs all or odd, not '" + mode + "'");
  const bool odd_only = mode == "odd";
  int rank = 0, provided = 0;
  // The rank is not known before MPI_Init_thread; PMIx exports it to the environment.
  const char *env_rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const int pre_rank = env_rank ? static_cast<int>(cli.integer("OMPI_COMM_WORLD_RANK", env_rank, 0, INT_MAX)) : 0;
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
