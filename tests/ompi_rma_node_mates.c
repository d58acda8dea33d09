/* Open MPI 5.0.7 behaviour that rmastore needs fixed: RMA from another host toward a live process
 * whose node mate died.
 *
 * 6 ranks on 3 hosts, two per host: {0,1} {2,3} {4,5}. Rank 1 (not its node's first process)
 * and rank 2 (its node's first process) die. Every survivor then puts a value into every other
 * survivor's memory, on a dynamic window created before the deaths, and reads it back; every
 * call must succeed and every value arrive.
 *
 * osc/rdma keeps the state of a node's processes (region table, locks), which every RMA call on
 * a dynamic window reads first, in the memory of the node's first process. Unpatched, rank 3
 * cannot be reached from hosts 1 and 3 once rank 2 died. With patch 0004 as first written, rank
 * 0 could not be reached either: a process counted as failed when the endpoint of the state of
 * a failed process (rank 1's, held by rank 0) was its own. Patch 0004 now compares with each
 * failed process's own endpoints, and patch 0006 has every process keep its own state under
 * ULFM on more than one node. Then a put toward a dead process never used before must return (it
 * dereferenced a NULL peer without patch 0006). A watchdog turns a hang into a FAIL verdict after 20 s (scaled
 * with RMASTORE_TEST_TIME_SCALE).
 *
 *   mpirun --with-ft ulfm --hostfile <3 hosts, 2 slots each> -n 6 ./ompi_rma_node_mates
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

enum { kVictimA = 1, kVictimB = 2, kSize = 6 };

static int g_rank = -1;
static const char *volatile g_stage = "start";

static void on_alarm(int sig) {
  (void)sig;
  char text[256];
  snprintf(text, sizeof text, "hung in %s", g_stage);
  _exit(verdict(g_rank, text));
}

static int fail(int rank, const char *what, int peer, int rc) {
  char text[256];
  snprintf(text, sizeof text, "%s toward rank %d returned %d", what, peer, rc);
  return verdict(rank, text);
}

static int victim(int r) {
  return r == kVictimA || r == kVictimB;
}

/* RMA toward a live peer completes: MPI_Wait is bounded by the watchdog. */
static int rma(int is_put, uint64_t *buf, int peer, MPI_Aint at, MPI_Win win) {
  MPI_Request req;
  int rc = is_put ? MPI_Rput(buf, 1, MPI_UINT64_T, peer, at, 1, MPI_UINT64_T, win, &req)
                  : MPI_Rget(buf, 1, MPI_UINT64_T, peer, at, 1, MPI_UINT64_T, win, &req);
  if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
  if (rc == MPI_SUCCESS) rc = MPI_Win_flush(peer, win);
  return rc;
}

int main(int argc, char **argv) {
  int provided, rank, size;
  survive_sigpipe();
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  g_rank = rank;
  if (size != kSize) {
    MPI_Finalize();
    return verdict(rank, "needs 6 processes, 2 per host");
  }
  const double scale = time_scale();

  /* The premise: ranks 0,1 share a host, and so do 2,3, and the victims are not alone on it. */
  MPI_Comm node;
  int node_rank = -1, node_size = 0;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &node_rank);
  MPI_Comm_size(node, &node_size);
  MPI_Comm_free(&node);
  if (node_size != 2 || node_rank != rank % 2) {
    MPI_Finalize();
    return verdict(rank, "the ranks are not 2 per host in rank order (the premise did not hold)");
  }

  MPI_Win win;
  MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  static uint64_t mem[kSize];
  MPI_Win_attach(win, mem, sizeof mem);
  MPI_Aint base, bases[kSize];
  MPI_Get_address(mem, &base);
  MPI_Allgather(&base, 1, MPI_AINT, bases, 1, MPI_AINT, MPI_COMM_WORLD);
  MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
  MPI_Barrier(MPI_COMM_WORLD);

  if (victim(rank)) {
    expect_own_death(rank);
    mark_death(rank, "own hand\n");
    raise(SIGKILL);
  }

  signal(SIGALRM, on_alarm);
  alarm((unsigned)(20.0 * scale + 0.5));
  /* Both deaths known here before any RMA: what is tested is reaching the live, not the dead. */
  g_stage = "waiting for both failures to be known";
  for (;;) {
    MPI_Group failed;
    int n = 0;
    if (MPIX_Comm_get_failed(MPI_COMM_WORLD, &failed) == MPI_SUCCESS) {
      MPI_Group_size(failed, &n);
      MPI_Group_free(&failed);
    }
    if (n == 2) break;
    int flag;
    MPI_Iprobe(MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE); /* progress */
    usleep(1000);
  }
  MPI_Comm survivors;
  g_stage = "MPIX_Comm_shrink";
  int rc = MPIX_Comm_shrink(MPI_COMM_WORLD, &survivors);
  if (rc != MPI_SUCCESS) return fail(rank, "MPIX_Comm_shrink", -1, rc);

  g_stage = "MPI_Rput";
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank || victim(peer)) continue;
    uint64_t value = 1000u * (uint64_t)rank + (uint64_t)peer;
    rc = rma(1, &value, peer, bases[peer] + (MPI_Aint)(sizeof(uint64_t) * (size_t)rank), win);
    if (rc != MPI_SUCCESS) return fail(rank, "MPI_Rput", peer, rc);
  }
  g_stage = "MPI_Barrier";
  rc = MPI_Barrier(survivors);
  if (rc != MPI_SUCCESS) return fail(rank, "MPI_Barrier of the survivors", -1, rc);
  MPI_Win_sync(win);
  g_stage = "MPI_Rget";
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank || victim(peer)) continue;
    uint64_t got = 0;
    rc = rma(0, &got, peer, bases[peer] + (MPI_Aint)(sizeof(uint64_t) * (size_t)rank), win);
    if (rc != MPI_SUCCESS) return fail(rank, "MPI_Rget", peer, rc);
    if (got != 1000u * (uint64_t)rank + (uint64_t)peer) return fail(rank, "MPI_Rget read a wrong value", peer, 0);
    if (mem[peer] != 1000u * (uint64_t)peer + (uint64_t)rank) return fail(rank, "a put did not arrive", peer, 0);
  }
  printf("rank %d: puts and gets toward every survivor succeeded\n", rank);
  fflush(stdout);
  /* A put toward a dead process never used before: osc/rdma looks its data up from it first,
   * which fails; it must return an error, not crash (patch 0006). */
  g_stage = "MPI_Rput toward a dead process";
  uint64_t value = 1;
  MPI_Request req = MPI_REQUEST_NULL;
  rc = MPI_Rput(&value, 1, MPI_UINT64_T, kVictimA, bases[kVictimA], 1, MPI_UINT64_T, win, &req);
  printf("rank %d: MPI_Rput toward dead rank %d returned %d\n", rank, kVictimA, rc);
  if (rc == MPI_SUCCESS) MPI_Request_free(&req);

  g_stage = "MPI_Finalize";
  MPI_Comm_free(&survivors);
  MPI_Finalize(); /* frees the window abandoned with its dead processes */
  alarm(0);
  return verdict(rank, NULL);
}
