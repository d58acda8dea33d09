/* Open MPI 5.0.7 behaviour that rmastore works around with a patch: every RMA operation on a
 * dynamic window toward a process of another host first reads the target's region table (its
 * count word) with a blocking get, one network round trip before the operation's own.
 * scripts/openmpi-patches/0011-osc-rdma-cache-dynamic-regions.patch adds the window info key
 * cache_dynamic_regions: with it, an address found in the table as last read costs no read.
 *
 * Three processes on three hosts; rank 1 is the target. With the key set (no argument):
 *   1. a put + flush from rank 0 fills rank 0's copy of rank 1's table;
 *   2. rank 1 makes no MPI call for DELAY; rank 0's MPI_Rput to a cached address must return
 *      within DELAY / 2. Over btl/tcp only the target's own progress answers a read, so a
 *      put that reads the table first waits for the whole DELAY;
 *   3. rank 1 attaches new memory; a put there must land (a miss reads the table again), and
 *      so must one to the first memory, whose table entry the attach may have moved;
 *   4. a put to an address rank 1 never attached must fail with MPI_ERR_RMA_RANGE;
 *   5. rank 1 checks every value.
 * With the argument "uncached" the key is not set, and step 2 must wait for the target: the premise
 * that the check in step 2 tells a cached lookup from an uncached one.
 * DELAY is 1 s; it and the watchdog (20 s) scale with RMASTORE_TEST_TIME_SCALE.
 *
 *   mpirun --with-ft ulfm --hostfile <3 hosts, 1 slot each> -n 3 ./ompi_region_cache [uncached]
 */
#include <mpi.h>

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
  snprintf(text, sizeof text, "hung in %s", g_stage);
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
  const int cached = !(argc > 1 && strcmp(argv[1], "uncached") == 0);
  const double scale = time_scale();
  const double delay = 1.0 * scale;
  signal(SIGALRM, on_alarm);
  alarm((unsigned)(20.0 * scale + 0.5));
  if (size < 2) return verdict(rank, "needs 2 processes or more");
  const int target = 1;

  MPI_Info info;
  MPI_Info_create(&info);
  if (cached) MPI_Info_set(info, "cache_dynamic_regions", "true");
  MPI_Win win;
  int rc = MPI_Win_create_dynamic(info, MPI_COMM_WORLD, &win);
  MPI_Info_free(&info);
  if (rc != MPI_SUCCESS) return fail(rank, "MPI_Win_create_dynamic", rc);
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  /* Page-aligned, so that attaching `mem` (whole pages) never covers `fresh`. */
  static uint64_t mem[512] __attribute__((aligned(4096)));
  static uint64_t fresh[512] __attribute__((aligned(4096)));
  MPI_Win_attach(win, mem, sizeof mem);
  MPI_Aint base;
  MPI_Get_address(mem, &base);
  MPI_Aint *bases = malloc(sizeof(MPI_Aint) * (size_t)size);
  MPI_Allgather(&base, 1, MPI_AINT, bases, 1, MPI_AINT, MPI_COMM_WORLD);
  MPI_Win_lock_all(MPI_MODE_NOCHECK, win);

  const uint64_t first = 0x1111, second = 0x2222, third = 0x3333;
  g_stage = "the first put";
  if (rank == 0) {
    rc = MPI_Put(&first, 1, MPI_UINT64_T, target, bases[target], 1, MPI_UINT64_T, win);
    if (rc == MPI_SUCCESS) rc = MPI_Win_flush(target, win);
    if (rc != MPI_SUCCESS) return fail(rank, "the first put + flush", rc);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  g_stage = "MPI_Rput toward a process that makes no MPI call";
  MPI_Request req = MPI_REQUEST_NULL;
  double waited = 0;
  if (rank == target) usleep((useconds_t)(delay * 1e6));
  if (rank == 0) {
    /* Until the target has surely left the barrier, its progress could answer a read. */
    usleep((useconds_t)(delay * 0.1e6));
    const double t0 = MPI_Wtime();
    rc = MPI_Rput(&second, 1, MPI_UINT64_T, target, bases[target] + 8, 1, MPI_UINT64_T, win, &req);
    waited = MPI_Wtime() - t0;
    if (rc != MPI_SUCCESS) return fail(rank, "MPI_Rput to a cached address", rc);
    printf("rank 0: MPI_Rput returned after %.6f s (target silent for %.1f s, key %s)\n", waited, delay,
           cached ? "set" : "not set");
    fflush(stdout);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS) rc = MPI_Win_flush(target, win);
    if (rc != MPI_SUCCESS) return fail(rank, "completing the second put", rc);
    if (cached && waited > delay / 2) return verdict(rank, "MPI_Rput waited for the target's region table");
    if (!cached && waited < delay / 2)
      return verdict(rank, "without the key MPI_Rput did not wait for the target (the premise failed)");
  }
  if (!cached) goto done; /* the premise held; the steps below need the key */

  g_stage = "a put to newly attached memory";
  MPI_Aint fresh_base = 0;
  if (rank == target) {
    rc = MPI_Win_attach(win, fresh, sizeof fresh);
    if (rc != MPI_SUCCESS) return fail(rank, "MPI_Win_attach", rc);
    MPI_Get_address(fresh, &fresh_base);
  }
  MPI_Bcast(&fresh_base, 1, MPI_AINT, target, MPI_COMM_WORLD);
  if (rank == 0) {
    rc = MPI_Put(&third, 1, MPI_UINT64_T, target, fresh_base, 1, MPI_UINT64_T, win);
    if (rc == MPI_SUCCESS) rc = MPI_Win_flush(target, win);
    if (rc != MPI_SUCCESS) return fail(rank, "a put to newly attached memory", rc);
    /* The first region again, whose entry the attach may have moved in the table. */
    rc = MPI_Put(&third, 1, MPI_UINT64_T, target, bases[target] + 16, 1, MPI_UINT64_T, win);
    if (rc == MPI_SUCCESS) rc = MPI_Win_flush(target, win);
    if (rc != MPI_SUCCESS) return fail(rank, "a put to the first region after the attach", rc);

    g_stage = "a put to an unattached address";
    /* 1 GiB past the attached memory: attached by nobody. */
    rc = MPI_Put(&third, 1, MPI_UINT64_T, target, fresh_base + ((MPI_Aint)1 << 30), 1, MPI_UINT64_T, win);
    if (rc == MPI_SUCCESS) rc = MPI_Win_flush(target, win);
    int cls = MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    if (cls != MPI_ERR_RMA_RANGE) return fail(rank, "a put to an unattached address (MPI_ERR_RMA_RANGE expected)", rc);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  if (rank == target) {
    char text[256];
    if (mem[0] != first || mem[1] != second || fresh[0] != third || mem[2] != third) {
      snprintf(text, sizeof text, "values 0x%llx 0x%llx 0x%llx 0x%llx, expected 0x%llx 0x%llx 0x%llx 0x%llx",
               (unsigned long long)mem[0], (unsigned long long)mem[1], (unsigned long long)fresh[0],
               (unsigned long long)mem[2], (unsigned long long)first, (unsigned long long)second,
               (unsigned long long)third, (unsigned long long)third);
      return verdict(rank, text);
    }
  }
done:
  g_stage = "MPI_Win_free";
  MPI_Win_unlock_all(win);
  MPI_Win_free(&win);
  free(bases);
  MPI_Finalize();
  alarm(0);
  return verdict(rank, NULL);
}
