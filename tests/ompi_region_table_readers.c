/* Open MPI osc/rdma behaviour that any program may meet, not only rmastore: RMA toward a region
 * of a dynamic window that stays attached must never fail while its owner attaches and
 * detaches other regions.
 *
 * 3 ranks. Rank 0 attaches one region for the whole run and, in a loop, attaches and detaches a
 * second one (a 4 KiB page of its own), pausing between cycles. Ranks 1 and 2 put into the
 * first region in a loop (MPI_Put + MPI_Win_flush), counting MPI_ERR_RMA_RANGE and every other
 * error. Phases of 1 s (times RMASTORE_TEST_TIME_SCALE): pauses of 100 us and 10 us between
 * attach cycles, then a control phase without attach or detach.
 *
 * The region that comes and goes lies below the one that stays, so that each attach or detach
 * moves the entry that the readers look for. Unpatched Open MPI 5.0.7 searches a same-node
 * table in place, with no lock, while its owner moves entries (osc_rdma_dynamic.c,
 * ompi_osc_rdma_find_dynamic_region): 10 to 60 puts of a run failed with MPI_ERR_RMA_RANGE,
 * over shared memory and over btl/tcp alike (osc/rdma keeps node mates' tables in its own
 * shared segment either way). The first version of scripts/openmpi-patches/0008 made it worse
 * (9 to 374): the search took the owner's "table changing" marker for a region count. The patch
 * as it is now makes the search wait out a change and search again after one.
 *
 * Premise, checked: rank 0 completed attach cycles in every attach phase, and the puts of
 * ranks 1 and 2 arrived in rank 0's memory during each phase.
 *
 *   mpirun --with-ft ulfm -n 3 ./ompi_region_table_readers
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ompi_verdict.h"

enum { kOwner = 0, kSize = 3, kPhases = 3, kPage = 4096 };
static const int kPauseUs[kPhases] = {100, 10, -1}; /* -1: no attach or detach */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(int rank, const char *what, int rc) {
  char text[256];
  snprintf(text, sizeof text, "%s returned %d", what, rc);
  return verdict(rank, text);
}

int main(int argc, char **argv) {
  int provided, rank, size, rc;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (size != kSize) {
    MPI_Finalize();
    return verdict(rank, "needs 3 processes");
  }
  const double phase_s = 1.0 * time_scale();

  MPI_Win win;
  if ((rc = MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win)) != MPI_SUCCESS)
    return fail(rank, "MPI_Win_create_dynamic", rc);
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  /* The region that comes and goes: a page of its own below the one that stays (one slot per
   * rank and phase), so that each attach and detach moves the entry of the one that stays in
   * the sorted table, where the readers search for it. */
  char *pool = aligned_alloc(kPage, 16 * kPage);
  char *extra = pool;
  uint64_t *stay = (uint64_t *)(pool + 8 * kPage);
  memset(stay, 0, kPage);
  if ((rc = MPI_Win_attach(win, stay, kPage)) != MPI_SUCCESS) return fail(rank, "MPI_Win_attach", rc);
  MPI_Aint base;
  MPI_Get_address(stay, &base);
  if ((rc = MPI_Bcast(&base, 1, MPI_AINT, kOwner, MPI_COMM_WORLD)) != MPI_SUCCESS) return fail(rank, "MPI_Bcast", rc);
  if ((rc = MPI_Win_lock_all(MPI_MODE_NOCHECK, win)) != MPI_SUCCESS) return fail(rank, "MPI_Win_lock_all", rc);

  long cycles[kPhases] = {0}, puts[kPhases] = {0}, range[kPhases] = {0};
  for (int ph = 0; ph < kPhases; ++ph) {
    if ((rc = MPI_Barrier(MPI_COMM_WORLD)) != MPI_SUCCESS) return fail(rank, "MPI_Barrier", rc);
    const double end = now() + phase_s;
    if (rank == kOwner) {
      while (now() < end) {
        if (kPauseUs[ph] >= 0) {
          if ((rc = MPI_Win_attach(win, extra, kPage)) != MPI_SUCCESS) return fail(rank, "MPI_Win_attach", rc);
          if ((rc = MPI_Win_detach(win, extra)) != MPI_SUCCESS) return fail(rank, "MPI_Win_detach", rc);
          ++cycles[ph];
        }
        for (const double until = now() + (kPauseUs[ph] > 0 ? kPauseUs[ph] : 100) * 1e-6; now() < until;) {
          int flag;
          MPI_Iprobe(MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE); /* progress for btl/tcp */
        }
      }
    } else {
      const MPI_Aint at = base + (MPI_Aint)(sizeof(uint64_t) * (size_t)(rank * kPhases + ph));
      for (uint64_t i = 1; now() < end; ++i) {
        rc = MPI_Put(&i, 1, MPI_UINT64_T, kOwner, at, 1, MPI_UINT64_T, win);
        if (rc == MPI_SUCCESS) rc = MPI_Win_flush(kOwner, win);
        int cls = MPI_SUCCESS;
        if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
        if (cls == MPI_ERR_RMA_RANGE) {
          ++range[ph];
        } else if (rc != MPI_SUCCESS) {
          return fail(rank, "MPI_Put/MPI_Win_flush toward an attached region", rc);
        } else {
          ++puts[ph];
        }
      }
    }
  }
  if ((rc = MPI_Barrier(MPI_COMM_WORLD)) != MPI_SUCCESS) return fail(rank, "MPI_Barrier", rc);
  /* The puts were flushed before the barrier; the sync makes them visible to rank 0's loads. */
  if ((rc = MPI_Win_sync(win)) != MPI_SUCCESS) return fail(rank, "MPI_Win_sync", rc);
  if ((rc = MPI_Win_unlock_all(win)) != MPI_SUCCESS) return fail(rank, "MPI_Win_unlock_all", rc);

  const char *failure = NULL;
  char text[512];
  if (rank == kOwner) {
    printf("rank 0: attach/detach cycles per phase (pause 100 us, 10 us, none): %ld %ld %ld\n", cycles[0], cycles[1],
           cycles[2]);
    for (int ph = 0; ph < kPhases && failure == NULL; ++ph) {
      if (kPauseUs[ph] >= 0 && cycles[ph] == 0) failure = "no attach cycle in an attach phase (premise)";
      for (int r = 1; r < kSize; ++r)
        if (stay[r * kPhases + ph] == 0) failure = "a reader's puts did not arrive in a phase (premise)";
    }
  } else {
    snprintf(text, sizeof text,
             "rank %d: puts per phase %ld %ld %ld, MPI_ERR_RMA_RANGE toward an attached region %ld %ld %ld\n", rank,
             puts[0], puts[1], puts[2], range[0], range[1], range[2]);
    fputs(text, stdout);
    if (range[0] + range[1] + range[2] != 0) {
      snprintf(text, sizeof text, "%ld puts toward an attached region failed with MPI_ERR_RMA_RANGE",
               range[0] + range[1] + range[2]);
      failure = text;
    }
  }
  fflush(stdout);
  if ((rc = MPI_Win_detach(win, stay)) != MPI_SUCCESS) return fail(rank, "MPI_Win_detach", rc);
  if ((rc = MPI_Win_free(&win)) != MPI_SUCCESS) return fail(rank, "MPI_Win_free", rc);
  MPI_Finalize();
  free(pool);
  return verdict(rank, failure);
}
