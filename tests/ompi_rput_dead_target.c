/* Open MPI 5.0.7 behaviour that rmastore needs fixed: RMA toward a process of another host that
 * dies while the operation is in flight.
 *
 * Each process attaches memory to a dynamic window (osc/rdma over btl/tcp between hosts). The
 * last rank stops making MPI progress, then dies DELAY later. Meanwhile the survivors call
 * MPI_Rput toward it, then MPI_Rget; both must return, with or without an error, once the death
 * is known. MPI_Finalize must then return although the window was never freed (rmastore
 * abandons a window that holds a dead process).
 *
 * Unpatched, MPI_Rput never returns: every RMA call on a dynamic window first reads the target's
 * region table with a blocking get (ompi_osc_get_data_blocking), and a get in flight to a
 * process that dies is never completed over TCP. (Issued after the death, it fails at once.)
 * scripts/openmpi-patches/0004-osc-rdma-abandon-blocking-waits-on-a-failed-process.patch makes
 * the blocking waits give up when the target is known to have failed. A watchdog turns a hang
 * into a FAIL verdict after 20 s; DELAY is 1 s; both scale with RMASTORE_TEST_TIME_SCALE.
 *
 *   mpirun --with-ft ulfm --hostfile <3 hosts, 1 slot each> -n 3 ./ompi_rput_dead_target
 */
#include <mpi.h>
// after mpi.h, on purpose
#include <mpi-ext.h>

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ompi_verdict.h"

static int g_rank = -1;
static const char *volatile g_stage = "start";

static void on_alarm(int sig) {
  (void)sig;
  char text[256];
  snprintf(text, sizeof text, "hung in %s toward the dying process", g_stage);
  _exit(verdict(g_rank, text));
}

static int fail(int rank, const char *what, int rc) {
  char text[256];
  snprintf(text, sizeof text, "%s returned %d", what, rc);
  return verdict(rank, text);
}

int main(int argc, char **argv) {
  int provided, rank, size;
  survive_sigpipe();
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  g_rank = rank;
  const int victim = size - 1;
  const double scale = time_scale();

  MPI_Win win;
  MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  static uint64_t mem[512];
  MPI_Win_attach(win, mem, sizeof mem);
  MPI_Aint base;
  MPI_Get_address(mem, &base);
  MPI_Aint *bases = malloc(sizeof(MPI_Aint) * (size_t)size);
  MPI_Allgather(&base, 1, MPI_AINT, bases, 1, MPI_AINT, MPI_COMM_WORLD);
  MPI_Win_lock_all(MPI_MODE_NOCHECK, win);

  /* One put to every peer while all live: the premise that RMA toward the victim works. */
  uint64_t value = (uint64_t)rank + 1;
  for (int peer = 0; peer < size; ++peer) {
    MPI_Request req;
    int rc = MPI_Rput(&value, 1, MPI_UINT64_T, peer, bases[peer] + (MPI_Aint)(8 * rank), 1, MPI_UINT64_T, win, &req);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS) rc = MPI_Win_flush(peer, win);
    if (rc != MPI_SUCCESS) return fail(rank, "a put before the failure", rc);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const double delay = 1.0 * scale;
  const double t0 = MPI_Wtime();
  if (rank == victim) {
    usleep((useconds_t)(delay * 1e6)); /* no MPI call: operations toward this process stay in flight */
    expect_own_death(rank);
    mark_death(rank, "own hand\n");
    raise(SIGKILL);
  }

  signal(SIGALRM, on_alarm);
  alarm((unsigned)(20.0 * scale + 0.5));
  g_stage = "MPI_Rput";
  /* Puts that the victim still serves (the end of its barrier) return at once: repeat until one
   * is in flight when it dies. */
  int rc_put, puts = 0;
  double t_put;
  do {
    MPI_Request req = MPI_REQUEST_NULL;
    rc_put = MPI_Rput(&value, 1, MPI_UINT64_T, victim, bases[victim], 1, MPI_UINT64_T, win, &req);
    if (rc_put == MPI_SUCCESS) MPI_Request_free(&req);
    ++puts;
    t_put = MPI_Wtime() - t0;
  } while (rc_put == MPI_SUCCESS && t_put < 0.9 * delay && puts < 100000);
  g_stage = "MPI_Rget";
  uint64_t got = 0;
  MPI_Request req_get = MPI_REQUEST_NULL;
  const int rc_get = MPI_Rget(&got, 1, MPI_UINT64_T, victim, bases[victim], 1, MPI_UINT64_T, win, &req_get);
  printf("rank %d: MPI_Rput %d toward the dying process returned %d after %.3f s, then MPI_Rget %d\n", rank, puts,
         rc_put, t_put, rc_get);
  fflush(stdout);
  /* The premise: the put was in flight when the target died, not issued after. */
  if (t_put < 0.9 * delay) return fail(rank, "MPI_Rput before the death (the premise did not hold)", rc_put);

  /* The window is abandoned, not freed: MPI_Finalize frees it. */
  g_stage = "MPI_Finalize";
  free(bases);
  MPI_Finalize();
  alarm(0);
  return verdict(rank, NULL);
}
