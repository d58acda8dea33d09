/* ULFM across hosts (run by tests/multihost.cmake on simulated hosts, TCP between them): the
 * last rank kills itself; every survivor must see exactly that process failed, then revoke,
 * shrink and agree.
 *
 *   ompi_ulfm_across_hosts          with the launch settings of scripts/multihost.sh
 *                                   (mpi_add_procs_cutoff: every peer connected at start-up).
 *                                   Without that setting the shrink never returns (Open MPI
 *                                   5.0.7, 6 ranks on 3 hosts, 7 of 7 runs).
 *   ompi_ulfm_across_hosts lazy     with lazy connections (Open MPI's default): checks only the
 *                                   failed group, which held a live process of another host
 *                                   until scripts/openmpi-patches/0002 (the failure event's
 *                                   WILDCARD rank matched a not-yet-connected peer).
 */
#include <mpi.h>
// after mpi.h, on purpose
#include <mpi-ext.h>

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ompi_verdict.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The one optional argument: "lazy", or nothing. Returns -1 after --help, -2 after a mistake
 * (rank 0 prints it and the usage); every rank has the same arguments. */
static int parse_lazy(int argc, char **argv, int rank) {
  static const char usage[] = "usage: ompi_ulfm_across_hosts [lazy]\n";
  static const struct option options[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":h", options, NULL)) != -1;) {
    if (c == 'h') {
      if (rank == 0) fputs(usage, stdout);
      return -1;
    }
    if (rank == 0) fprintf(stderr, "ompi_ulfm_across_hosts: unknown option '%s'\n%s", argv[optind - 1], usage);
    return -2;
  }
  if (optind == argc) return 0;
  if (optind + 1 == argc && strcmp(argv[optind], "lazy") == 0) return 1;
  if (rank == 0) fprintf(stderr, "ompi_ulfm_across_hosts: unexpected argument '%s'\n%s", argv[optind], usage);
  return -2;
}

int main(int argc, char **argv) {
  int provided, rank, size;
  survive_sigpipe();
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int lazy = parse_lazy(argc, argv, rank);
  if (lazy < 0) {
    MPI_Finalize();
    return lazy == -1 ? 0 : 2;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int victim = size - 1;
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == victim) {
    /* The runner checks that this death happened (tests/mpirun_test.sh). */
    expect_own_death(rank);
    mark_death(rank, "own hand\n");
    raise(SIGKILL);
  }
  const double t0 = now();
  int dummy = 0;
  /* Completes with an error once MPI knows the victim died. */
  const int rc_recv = MPI_Recv(&dummy, 1, MPI_INT, victim, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  const double t_detect = now() - t0;
  /* Later events of the same death (the job-wide one among them) arrive within milliseconds. */
  usleep(500000);
  MPI_Group world, failed;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  int nfailed = -1, failed_rank = -1, zero = 0;
  if (MPIX_Comm_get_failed(MPI_COMM_WORLD, &failed) == MPI_SUCCESS) {
    MPI_Group_size(failed, &nfailed);
    if (nfailed >= 1) MPI_Group_translate_ranks(failed, 1, &zero, world, &failed_rank);
    MPI_Group_free(&failed);
  }
  MPI_Group_free(&world);
  int pass = rc_recv != MPI_SUCCESS && nfailed == 1 && failed_rank == victim;
  printf("rank %d on %s: death known after %.1f ms, failed processes %d (first: rank %d)\n", rank, host, t_detect * 1e3,
         nfailed, failed_rank);
  fflush(stdout);
  if (!lazy) {
    MPIX_Comm_revoke(MPI_COMM_WORLD);
    MPI_Comm shrunk = MPI_COMM_NULL;
    const double t1 = now();
    const int rc_shrink = MPIX_Comm_shrink(MPI_COMM_WORLD, &shrunk);
    const double t_shrink = now() - t1;
    int new_size = -1, flag = 1, rc_agree = -1;
    if (rc_shrink == MPI_SUCCESS) {
      MPI_Comm_set_errhandler(shrunk, MPI_ERRORS_RETURN);
      MPI_Comm_size(shrunk, &new_size);
      rc_agree = MPIX_Comm_agree(shrunk, &flag);
      MPI_Comm_free(&shrunk);
    }
    printf("rank %d: shrink %d in %.1f ms, %d processes left, agree %d\n", rank, rc_shrink, t_shrink * 1e3, new_size,
           rc_agree);
    fflush(stdout);
    pass = pass && rc_shrink == MPI_SUCCESS && new_size == size - 1 && rc_agree == MPI_SUCCESS;
  }
  const int result = verdict(rank, pass ? NULL : "see the line above");
  MPI_Finalize();
  return result;
}
