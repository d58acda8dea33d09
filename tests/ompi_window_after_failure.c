/* Open MPI 5.0.7 behaviour that rmastore works around (src/recovery.cpp, rebuild_window).
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

#include <signal.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  int provided, rank, size;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int free_old = argc > 1 && strcmp(argv[1], "free") == 0;
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
