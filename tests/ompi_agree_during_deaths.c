/* Open MPI 5.0.7 behaviour that rmastore needs fixed: a process that dies while the others are
 * inside an agreement can crash a survivor.
 *
 * coll/ftagree (the early-returning agreement behind MPIX_Comm_agree and MPIX_Comm_shrink)
 * learns of a failure through era_mark_process_failed. When that cannot take the agreement's
 * lock (the notice comes while the agreement holds it), it defers the work to a zero-delay
 * timer and keeps a pointer to the agreement without a reference. If the agreement completes
 * first, the timer works on freed memory: survivors crashed in era_error_event_cb ->
 * era_mark_process_failed (seen in rmastore's soak of deaths inside store_recover across hosts,
 * inside MPIX_Comm_shrink). scripts/openmpi-patches/0009 backports the upstream fix; this
 * program did not crash in 30 runs without it, the soak did (the patch says so).
 *
 * 6 ranks. Every rank agrees on MPI_COMM_WORLD in a loop, acknowledging the failures it knows
 * of; ranks 2-5 are SIGKILLed by a thread of their own at random moments between 0.1 and 0.6 s,
 * so that their deaths land inside agreements. The survivors (0 and 1) go on until every victim
 * is known dead, then agree 200 more times. A watchdog turns a hang into a FAIL verdict after
 * 30 s (scaled with RMASTORE_TEST_TIME_SCALE); a crash leaves no verdict.
 *
 * Checked: the survivors' agreements had the same outcomes (return code and value, in order): a
 * late failure notice must not change an agreement already decided. Premise, checked: the
 * survivors agreed while the victims died (at least one agreement returned MPIX_ERR_PROC_FAILED
 * on each survivor).
 *
 *   mpirun --with-ft ulfm -n 6 ./ompi_agree_during_deaths
 */
#include <mpi.h>
// after mpi.h, on purpose
#include <mpi-ext.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "ompi_verdict.h"

enum { kSize = 6, kVictims = 4 };

static int g_rank = -1;
static const char *volatile g_stage = "start";

static void on_alarm(int sig) {
  (void)sig;
  char text[256];
  snprintf(text, sizeof text, "hung in %s", g_stage);
  _exit(verdict(g_rank, text));
}

static void *killer(void *arg) {
  usleep(*(const useconds_t *)arg);
  mark_death(g_rank, "own hand, among the agreements\n");
  kill(getpid(), SIGKILL);
  return NULL;
}

/* A second thread that keeps MPI progressing, as rmastore's helper thread does: failure
 * notices then also come while the agreement's lock is held by the other thread. */
static volatile int g_stop_progress;
static void *progress(void *arg) {
  MPI_Comm comm = *(MPI_Comm *)arg;
  while (!g_stop_progress) {
    int flag;
    MPI_Iprobe(MPI_ANY_SOURCE, 0, comm, &flag, MPI_STATUS_IGNORE);
  }
  return NULL;
}

static int failed_count(MPI_Comm comm) {
  MPI_Group failed;
  int n = 0;
  if (MPIX_Comm_get_failed(comm, &failed) == MPI_SUCCESS) {
    MPI_Group_size(failed, &n);
    MPI_Group_free(&failed);
  }
  return n;
}

/* A running hash of the outcomes (return class and value) of this process's agreements: they are
 * uniform, so the survivors' hashes must be equal. */
static unsigned long g_outcomes = 5381;

/* One agreement on `flag` (bitwise and); the failures known are acknowledged first, so that
 * the next ones go on. */
static int agree_once(int *flag, int *proc_failed) {
  int acked = 0;
  int rc = MPIX_Comm_ack_failed(MPI_COMM_WORLD, kSize, &acked);
  if (rc != MPI_SUCCESS) return rc;
  rc = MPIX_Comm_agree(MPI_COMM_WORLD, flag);
  int cls = MPI_SUCCESS;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
  if (cls == MPIX_ERR_PROC_FAILED) ++*proc_failed;
  g_outcomes = g_outcomes * 33 + (unsigned long)cls * 7 + (unsigned long)(unsigned)*flag;
  return cls == MPI_SUCCESS || cls == MPIX_ERR_PROC_FAILED ? MPI_SUCCESS : rc;
}

int main(int argc, char **argv) {
  int provided, rank, size, rc;
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
  MPI_Comm side;
  if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &side)) != MPI_SUCCESS) {
    MPI_Finalize();
    return verdict(rank, "MPI_Comm_dup");
  }
  MPI_Comm_set_errhandler(side, MPI_ERRORS_RETURN);
  pthread_t progress_thread;
  pthread_create(&progress_thread, NULL, progress, &side);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank >= kSize - kVictims) {
    expect_own_death(rank);
    srand((unsigned)(time(NULL) * 7919 + rank * 104729 + getpid()));
    static useconds_t delay;
    delay = (useconds_t)(100000 + rand() % 500000);
    pthread_t t;
    pthread_create(&t, NULL, killer, &delay);
  }
  signal(SIGALRM, on_alarm);
  alarm((unsigned)(30.0 * time_scale() + 0.5));
  g_stage = "MPIX_Comm_agree while processes die";
  int proc_failed = 0;
  long agreements = 0;
  /* The agreement itself decides when to stop (every survivor calls it equally often): once
   * every survivor knows every victim dead. */
  for (int done = 0; !done;) {
    done = rank < kSize - kVictims && failed_count(MPI_COMM_WORLD) == kVictims;
    if ((rc = agree_once(&done, &proc_failed)) != MPI_SUCCESS) {
      char text[128];
      snprintf(text, sizeof text, "MPIX_Comm_agree returned %d", rc);
      return verdict(rank, text);
    }
    ++agreements;
  }
  g_stage = "MPIX_Comm_agree after the deaths";
  for (int i = 0; i < 200; ++i) {
    int flag = 1;
    if ((rc = agree_once(&flag, &proc_failed)) != MPI_SUCCESS) return verdict(rank, "MPIX_Comm_agree after the deaths");
  }
  printf("rank %d: %ld agreements while the victims died, %d of them reported a failure\n", rank, agreements,
         proc_failed);
  fflush(stdout);
  if (proc_failed == 0) return verdict(rank, "no agreement saw a failure (premise)");
  /* The two survivors compare their agreements' outcomes. */
  g_stage = "comparing the survivors' outcomes";
  unsigned long other = 0;
  if ((rc = MPI_Sendrecv(&g_outcomes, 1, MPI_UNSIGNED_LONG, 1 - rank, 7, &other, 1, MPI_UNSIGNED_LONG, 1 - rank, 7,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE)) != MPI_SUCCESS)
    return verdict(rank, "MPI_Sendrecv between the survivors");
  if (other != g_outcomes) return verdict(rank, "the survivors' agreements returned different outcomes");
  alarm(0);
  g_stop_progress = 1;
  pthread_join(progress_thread, NULL);
  MPI_Finalize();
  return verdict(rank, NULL);
}
