/* Open MPI 5.0.7 behaviour that rmastore needs fixed: with two threads in MPI, an agreement
 * can return a value nobody contributed, and after a failure it crashes.
 *
 * coll/ftagree (the early-returning agreement behind MPIX_Comm_agree and MPIX_Comm_shrink)
 * receives its messages in a BTL callback. When another thread holds the agreement's lock,
 * era_cb_fn copies the message into a deferred event (era_bounce_event_t) and then stores three
 * pointers into the event; the copy starts at the event's `msg` field, and those three pointer
 * fields follow it, so the pointers overwrite the message's first 24 bytes after its header:
 * the agreed value and the ranks of newly failed processes. The value read back is then part of
 * a pointer, and after a failure, ranks read back from pointers made every survivor of
 * rmastore's LAMMPS host-loss test crash in ompi_errhandler_proc_failed_internal (1 run in 70;
 * scripts/openmpi-patches/0010 says more).
 *
 * 6 ranks, no failure. Two threads per process agree in a loop for 2 s, each on its own
 * duplicate of MPI_COMM_WORLD: one in MPIX_Comm_agree, the other polling MPIX_Comm_iagree with
 * MPI_Test (as rmastore's helper thread polls next to an application that agrees), so that
 * each often holds the lock when the other's messages arrive. Every rank contributes the same
 * value, so that every agreement must return it. Without the patch, most runs saw wrong values.
 *
 * Checked: every agreement returned MPI_SUCCESS and the value contributed. A watchdog turns a
 * hang into a FAIL verdict after 30 s (scaled with RMASTORE_TEST_TIME_SCALE).
 *
 *   mpirun --with-ft ulfm -n 6 ./ompi_agree_two_threads
 */
#include <mpi.h>
// after mpi.h, on purpose
#include <mpi-ext.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ompi_verdict.h"

/* Each thread agrees until 2 s (scaled) have passed on some process, at most kMax times. Bit 0
 * of the value says "go on"; the other bits are the same on every process, so every agreement
 * must return them. */
enum { kMax = 20000, kGoOn = 1 };
static const int kValue = 0x2b1d4e5e;

static int g_rank = -1;
static double g_deadline;

static void on_alarm(int sig) {
  (void)sig;
  _exit(verdict(g_rank, "hung in MPIX_Comm_agree"));
}

struct loop {
  MPI_Comm comm;
  int agreements, wrong_value, wrong_rc, first_wrong;
  int nonblocking;
};

/* One agreement; returns whether every process goes on. A thread with `nonblocking` polls with
 * MPI_Test, as rmastore's helper thread polls its receive: it progresses MPI at the same time as
 * the other thread, which waits inside MPIX_Comm_agree. */
static int agree_once(struct loop *l) {
  int flag = kValue | (MPI_Wtime() < g_deadline ? kGoOn : 0);
  int rc;
  if (l->nonblocking) {
    MPI_Request req;
    int done = 0;
    rc = MPIX_Comm_iagree(l->comm, &flag, &req);
    while (rc == MPI_SUCCESS && !done) rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
  } else {
    rc = MPIX_Comm_agree(l->comm, &flag);
  }
  ++l->agreements;
  if (rc != MPI_SUCCESS) ++l->wrong_rc;
  if ((flag & ~kGoOn) != kValue && l->wrong_value++ == 0) l->first_wrong = flag;
  return rc == MPI_SUCCESS && (flag & kGoOn);
}

static void *agree_loop(void *arg) {
  struct loop *l = arg;
  for (int i = 0; i < kMax && agree_once(l); ++i) {
  }
  return NULL;
}

int main(int argc, char **argv) {
  int provided, rank;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  g_rank = rank;
  if (provided != MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    return verdict(rank, "needs MPI_THREAD_MULTIPLE");
  }
  struct loop loops[2] = {{MPI_COMM_NULL, 0, 0, 0, 0, 0}, {MPI_COMM_NULL, 0, 0, 0, 0, 1}};
  for (int t = 0; t < 2; ++t) {
    if (MPI_Comm_dup(MPI_COMM_WORLD, &loops[t].comm) != MPI_SUCCESS) {
      MPI_Finalize();
      return verdict(rank, "MPI_Comm_dup");
    }
    MPI_Comm_set_errhandler(loops[t].comm, MPI_ERRORS_RETURN);
  }
  g_deadline = MPI_Wtime() + 2.0 * time_scale();
  signal(SIGALRM, on_alarm);
  alarm((unsigned)(30.0 * time_scale() + 0.5));
  pthread_t other;
  pthread_create(&other, NULL, agree_loop, &loops[1]);
  agree_loop(&loops[0]);
  pthread_join(other, NULL);
  alarm(0);
  const int wrong_value = loops[0].wrong_value + loops[1].wrong_value;
  const int wrong_rc = loops[0].wrong_rc + loops[1].wrong_rc;
  printf("rank %d: %d agreements, %d returned another value (first: 0x%08x), %d an error\n", rank,
         loops[0].agreements + loops[1].agreements, wrong_value,
         (unsigned)(loops[0].wrong_value ? loops[0].first_wrong : loops[1].first_wrong), wrong_rc);
  for (int t = 0; t < 2; ++t) MPI_Comm_free(&loops[t].comm);
  MPI_Finalize();
  if (wrong_rc != 0) return verdict(rank, "an agreement without failures returned an error");
  if (wrong_value != 0) return verdict(rank, "an agreement returned a value nobody contributed");
  return verdict(rank, NULL);
}
