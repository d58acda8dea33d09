/* Checks that the MPI really recovers from a dead process: 3 ranks, the last one
 * kills itself, the survivors see the failure, revoke, shrink to 2 and agree. */
#include <mpi.h>
// mpi-ext.h (the ULFM calls) needs mpi.h first: keep it in its own block so it is not sorted.
#include <mpi-ext.h>

#include <signal.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == size - 1) raise(SIGKILL);
  int rc = MPI_Barrier(MPI_COMM_WORLD);
  int cls = MPI_SUCCESS;
  MPI_Error_class(rc, &cls);
  if (cls != MPIX_ERR_PROC_FAILED && cls != MPIX_ERR_REVOKED) {
    printf("smoke: rank %d barrier returned class %d, not a failure\n", rank, cls);
    return 1;
  }
  MPIX_Comm_revoke(MPI_COMM_WORLD);
  MPI_Comm shrunk;
  if (MPIX_Comm_shrink(MPI_COMM_WORLD, &shrunk) != MPI_SUCCESS) return 1;
  int n = 0, flag = 1;
  MPI_Comm_size(shrunk, &n);
  rc = MPIX_Comm_agree(shrunk, &flag);
  if (rc == MPI_SUCCESS && flag == 1 && n == size - 1) printf("smoke: ok rank %d\n", rank);
  fflush(stdout);
  MPI_Comm_free(&shrunk);
  MPI_Finalize();
  return 0;
}
