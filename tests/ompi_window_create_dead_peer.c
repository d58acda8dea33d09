/* Open MPI 5.0.7 defect met by store_recover, fixed by
 * scripts/openmpi-patches/0001-osc-rdma-window-creation-with-a-dead-peer.patch:
 * MPI_Win_create_dynamic on a communicator that holds a process which has died segfaulted in
 * every caller (ompi_osc_rdma_free, from the error path of ompi_osc_rdma_component_select).
 *
 * The last rank kills itself after a barrier; the others wait until MPI knows of the death
 * (so that the premise holds: the communicator holds a dead process), then create a dynamic
 * window on MPI_COMM_WORLD. Pass: the creation returns an error, and the rank goes on.
 *
 *   mpicc -o wcdp ompi_window_create_dead_peer.c
 *   mpirun --with-ft ulfm -n 3 ./wcdp
 */
#include <mpi.h>
// after mpi.h, on purpose
#include <mpi-ext.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ompi_verdict.h"

static int failed_count(MPI_Comm comm) {
  MPI_Group g;
  int n = 0;
  if (MPIX_Comm_get_failed(comm, &g) != MPI_SUCCESS) return -1;
  MPI_Group_size(g, &n);
  MPI_Group_free(&g);
  return n;
}

int main(int argc, char **argv) {
  int provided, rank, size;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == size - 1) raise(SIGKILL);
  /* A receive from the victim completes with an error once MPI knows it died. */
  int dummy = 0;
  const int rc_recv = MPI_Recv(&dummy, 1, MPI_INT, size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  const int known = failed_count(MPI_COMM_WORLD);
  MPI_Win win = MPI_WIN_NULL;
  const int rc = MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  int cls = MPI_SUCCESS;
  MPI_Error_class(rc, &cls);
  printf("rank %d: receive from the dead rank: %d, failed processes known: %d, MPI_Win_create_dynamic: "
         "error class %d\n",
         rank, rc_recv, known, cls);
  fflush(stdout);
  const int pass = rc_recv != MPI_SUCCESS && known >= 1 && rc != MPI_SUCCESS;
  if (rc == MPI_SUCCESS) MPI_Win_free(&win);
  const int result = verdict(rank, pass ? NULL : "window creation did not fail as a failure");
  MPI_Finalize();
  return result;
}
