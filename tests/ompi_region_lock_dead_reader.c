/* Open MPI 5.0.7 behaviour that rmastore needs fixed: a process that dies while it reads another
 * process's table of attached regions leaves that table locked forever.
 *
 * 6 ranks on 3 hosts, two per host: {0,1} {2,3} {4,5}. Rank 0 attaches and detaches a buffer
 * over and over, so that every RMA call toward it from another process first reloads its region
 * table (osc/rdma takes a shared lock on the table, reads it, releases the lock). Ranks 2-5
 * put a counter into rank 0's memory in a loop, and each is SIGKILLed by a thread of its own at
 * a random moment. A victim that dies between taking and releasing the shared lock leaves the
 * lock held: rank 0's next MPI_Win_attach or MPI_Win_detach, which takes the lock exclusively,
 * then spins forever (seen in rmastore's tests across hosts: a survivor's slot enlargement hung
 * in MPI_Win_attach after its peer died in a put). Patch 0008 has readers check the table's
 * version instead of locking it. Rank 0 must then go on attaching, and rank 1 must still reach
 * it. A watchdog turns a hang into a FAIL verdict after 20 s (scaled with
 * RMASTORE_TEST_TIME_SCALE).
 *
 * The premise, that the victims died while reading rank 0's table, is checked as far as MPI
 * lets a test see it: rank 0 attached and detached while the victims' puts kept arriving, up to
 * their deaths. Without the patch rank 0 hung in 8 of 8 runs (four victims, each inside the
 * lock for a good part of every put).
 *
 *   mpirun --with-ft ulfm --hostfile <3 hosts, 2 slots each> -n 6 ./ompi_region_lock_dead_reader
 */
#include <mpi.h>
// after mpi.h, on purpose
#include <mpi-ext.h>

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ompi_verdict.h"

enum { kTarget = 0, kWitness = 1, kSize = 6, kVictims = 4 };

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

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int failed_count(void) {
  MPI_Group failed;
  int n = 0;
  if (MPIX_Comm_get_failed(MPI_COMM_WORLD, &failed) == MPI_SUCCESS) {
    MPI_Group_size(failed, &n);
    MPI_Group_free(&failed);
  }
  return n;
}

/* The victim's killer: the death lands wherever the RMA loop happens to be. */
static void *killer(void *arg) {
  const useconds_t delay = *(const useconds_t *)arg;
  usleep(delay);
  mark_death(g_rank, "own hand, during its puts\n");
  kill(getpid(), SIGKILL);
  return NULL;
}

static int attach_detach(MPI_Win win, char *extra, size_t bytes) {
  int rc = MPI_Win_attach(win, extra, (MPI_Aint)bytes);
  if (rc == MPI_SUCCESS) rc = MPI_Win_detach(win, extra);
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
  if (size != kSize || provided != MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    return verdict(rank, "needs 6 processes and MPI_THREAD_MULTIPLE");
  }
  const double scale = time_scale();

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

  if (rank >= kSize - kVictims) {
    expect_own_death(rank);
    /* Between 0.2 and 0.7 s into the puts, different for each victim, counted from the first
     * put's completion: the first put across hosts also connects, which took longer than that
     * on a loaded machine, and the victim then died before rank 0 saw its puts (the premise). */
    srand((unsigned)(time(NULL) * 7919 + rank * 104729 + getpid()));
    static useconds_t delay;
    delay = (useconds_t)(200000 + rand() % 500000);
    for (uint64_t i = 1;; ++i) {
      MPI_Request req;
      int rc = MPI_Rput(&i, 1, MPI_UINT64_T, kTarget, bases[kTarget] + (MPI_Aint)(sizeof(uint64_t) * (size_t)rank), 1,
                        MPI_UINT64_T, win, &req);
      if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) return fail(rank, "a victim's MPI_Rput before its death", rc);
      if (i == 1) {
        pthread_t t;
        pthread_create(&t, NULL, killer, &delay);
      }
    }
  }

  signal(SIGALRM, on_alarm);
  alarm((unsigned)(20.0 * scale + 0.5));
  /* Pages of its own: a buffer that shares a page with an attached region changes no table. */
  enum { kExtra = 1 << 16 };
  char *extra = aligned_alloc(kExtra, kExtra);
  int rc;
  if (rank == kTarget) {
    /* Attach and detach until every victim is known dead, then 20 more times: each must return. */
    g_stage = "MPI_Win_attach/MPI_Win_detach while the victims put and die";
    long rounds = 0;
    uint64_t last[kSize] = {0};
    int moving = 0; /* victims whose puts arrived while the table kept changing */
    while (failed_count() < kVictims) {
      if ((rc = attach_detach(win, extra, kExtra)) != MPI_SUCCESS) return fail(rank, "MPI_Win_attach/detach", rc);
      ++rounds;
      /* A pause in which readers can load the table (with patch 0008 a change during their read
       * makes them read again, so without pauses they would never get through). */
      for (const double until = now() + 300e-6; now() < until;) {
        int flag;
        MPI_Iprobe(MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE); /* progress */
      }
      MPI_Win_sync(win);
      for (int v = kSize - kVictims; v < kSize; ++v) {
        const uint64_t seen = __atomic_load_n(&mem[v], __ATOMIC_RELAXED);
        if (seen != last[v] && last[v] != 0) moving |= 1 << v;
        last[v] = seen;
      }
    }
    g_stage = "MPI_Win_attach/MPI_Win_detach after the deaths";
    for (int i = 0; i < 20; ++i)
      if ((rc = attach_detach(win, extra, kExtra)) != MPI_SUCCESS) return fail(rank, "MPI_Win_attach/detach", rc);
    printf("rank 0: %ld attach/detach pairs while the victims ran; puts arriving from victims (bits) %#x; 20 more "
           "after their deaths returned\n",
           rounds, moving);
    fflush(stdout);
    if (moving != 0x3c) return verdict(rank, "not every victim's puts arrived while the table changed (premise)");
  } else {
    g_stage = "waiting for the victims' deaths";
    while (failed_count() < kVictims) {
      int flag;
      MPI_Iprobe(MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE); /* progress */
      usleep(1000);
    }
  }

  MPI_Comm survivors;
  g_stage = "MPIX_Comm_shrink";
  rc = MPIX_Comm_shrink(MPI_COMM_WORLD, &survivors);
  if (rc != MPI_SUCCESS) return fail(rank, "MPIX_Comm_shrink", rc);
  if (rank == kWitness) {
    /* After all those changes of rank 0's table, a put toward it still finds its memory. */
    g_stage = "MPI_Rput toward rank 0";
    uint64_t value = 4242;
    MPI_Request req;
    rc = MPI_Rput(&value, 1, MPI_UINT64_T, kTarget, bases[kTarget] + (MPI_Aint)(sizeof(uint64_t) * kWitness), 1,
                  MPI_UINT64_T, win, &req);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS) rc = MPI_Win_flush(kTarget, win);
    if (rc != MPI_SUCCESS) return fail(rank, "MPI_Rput toward rank 0", rc);
  }
  g_stage = "MPI_Barrier";
  if ((rc = MPI_Barrier(survivors)) != MPI_SUCCESS) return fail(rank, "MPI_Barrier of the survivors", rc);
  MPI_Win_sync(win);
  if (rank == kTarget && mem[kWitness] != 4242) return verdict(rank, "rank 1's put did not arrive");

  g_stage = "MPI_Finalize";
  MPI_Comm_free(&survivors);
  MPI_Finalize(); /* frees the window abandoned with its dead processes */
  alarm(0);
  free(extra);
  return verdict(rank, NULL);
}
