/* Open MPI 5.0.7 behaviour that rmastore works around (src/store/recovery.cpp, Store::rebuild_runtime).
 *
 * 3 processes share a dynamic window; the last one dies; the two survivors shrink, free the
 * old window, and create a new dynamic window on the shrunk communicator. The whole job then
 * ends (mpirun exit 255, no message) inside MPI_Win_create_dynamic. With 4 processes, or when
 * the old window is not freed, it works.
 *
 *   mpicc -o ompi_window_after_failure ompi_window_after_failure.c
 *   mpirun --with-ft ulfm -n 3 ./ompi_window_after_failure free   # job dies
 *   mpirun --with-ft ulfm -n 3 ./ompi_window_after_failure keep   # "created" twice
 */
#include <mpi.h>
// after mpi.h, on purpose
#include <mpi-ext.h>

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

/* The one argument: "free" (1) or "keep" (0, also without an argument). Returns -1 after --help,
 * -2 after a mistake (rank 0 prints it and the usage); every rank has the same arguments. */
static int parse_free(int argc, char **argv, int rank) {
  static const char usage[] = "usage: ompi_window_after_failure [free|keep]\n";
  static const struct option options[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":h", options, NULL)) != -1;) {
    if (c == 'h') {
      if (rank == 0) fputs(usage, stdout);
      return -1;
    }
    if (rank == 0) fprintf(stderr, "ompi_window_after_failure: unknown option '%s'\n%s", argv[optind - 1], usage);
    return -2;
  }
  if (optind == argc) return 0;
  if (optind + 1 == argc && strcmp(argv[optind], "free") == 0) return 1;
  if (optind + 1 == argc && strcmp(argv[optind], "keep") == 0) return 0;
  if (rank == 0) fprintf(stderr, "ompi_window_after_failure: unexpected argument '%s'\n%s", argv[optind], usage);
  return -2;
}

int main(int argc, char **argv) {
  int provided, rank, size;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int free_old = parse_free(argc, argv, rank);
  if (free_old < 0) {
    MPI_Finalize();
    return free_old == -1 ? 0 : 2;
  }
  MPI_Win old;
  MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &old);
  MPI_Win_set_errhandler(old, MPI_ERRORS_RETURN);
  MPI_Win_lock_all(MPI_MODE_NOCHECK, old);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == size - 1) raise(SIGKILL);
  MPI_Barrier(MPI_COMM_WORLD); /* fails: a process died */
  MPIX_Comm_revoke(MPI_COMM_WORLD);
  MPI_Comm survivors;
  MPIX_Comm_shrink(MPI_COMM_WORLD, &survivors);
  int flag = 1;
  MPIX_Comm_agree(survivors, &flag);
  if (free_old) MPI_Win_free(&old);
  MPI_Win fresh;
  int rc = MPI_Win_create_dynamic(MPI_INFO_NULL, survivors, &fresh);
  printf("rank %d: created (rc %d)\n", rank, rc);
  fflush(stdout);
  MPI_Win_free(&fresh);
  MPI_Finalize();
  return 0;
}
