/* Open MPI 5.0.7 behaviour that rmastore works around (src/transport/runtime.hpp, Runtime::retire).
 *
 * A process that ULFM's heartbeat detector declared failed may be alive: here the last of 3
 * processes stops (SIGSTOP) for 6 s against a 2 s detector timeout. The two others notice,
 * revoke and shrink their communicator, and create new communicators on the survivors. When the
 * stopped process runs again, it sends on the old communicator. If the survivors freed it, a new
 * communicator has taken its context id, ob1 delivers the late message there, finds a source
 * rank beyond the size, and aborts the job. Kept, the late message goes to the old communicator
 * and is never matched.
 *
 *   mpicc -o ompi_late_message_reused_cid ompi_late_message_reused_cid.c
 *   export OMPI_MCA_mpi_ft_detector=true OMPI_MCA_mpi_ft_detector_thread=false \
 *          OMPI_MCA_mpi_ft_detector_period=0.5 OMPI_MCA_mpi_ft_detector_timeout=2
 *   mpirun --with-ft ulfm -n 3 ./ompi_late_message_reused_cid free  # survivors aborted
 *   mpirun --with-ft ulfm -n 3 ./ompi_late_message_reused_cid keep  # both survivors PASS
 *
 * An abort that is not in Open MPI's own bug tracker as of this writing; the library keeps every
 * communicator that spanned a failed process until store_finalize. */
#include <mpi.h>
// after mpi.h, on purpose
#include <mpi-ext.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ompi_verdict.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Stops this process for `seconds`: a forked child sends the SIGCONT. */
static void stop_for(double seconds) {
  const pid_t self = getpid();
  const pid_t child = fork();
  if (child == 0) {
    struct timespec t = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
    kill(self, SIGCONT);
    _exit(0);
  }
  if (child > 0) raise(SIGSTOP);
}

int main(int argc, char **argv) {
  int provided, rank, size;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int free_old = argc > 1 && strcmp(argv[1], "free") == 0;
  if (argc > 2 || (argc == 2 && !free_old && strcmp(argv[1], "keep") != 0)) {
    if (rank == 0) fprintf(stderr, "usage: ompi_late_message_reused_cid [free|keep]\n");
    MPI_Finalize();
    return 2;
  }
  const double stop = 6.0 * time_scale();
  const int suspect = size - 1;
  MPI_Comm old;
  MPI_Comm_dup(MPI_COMM_WORLD, &old);
  MPI_Comm_set_errhandler(old, MPI_ERRORS_RETURN);
  char marker[64];
  snprintf(marker, sizeof marker, "stopped@%d\n", suspect);
  if (rank == 0) verdict_write_file("faults-expected", marker, O_APPEND);
  MPI_Barrier(old);
  const double t0 = now();
  if (rank == suspect) {
    snprintf(marker, sizeof marker, "stopped.%d", suspect);
    verdict_write_file(marker, "stops for the heartbeat detector\n", O_TRUNC);
    stop_for(stop);
    /* Running again: late messages on the old communicator, to every other process. */
    int token = 7;
    MPI_Request req[8];
    for (int r = 0; r < size - 1 && r < 8; ++r) MPI_Isend(&token, 1, MPI_INT, r, 1, old, &req[r]);
    for (double until = now() + 2.0; now() < until;) {
      int done = 0;
      MPI_Testall(size - 1, req, &done, MPI_STATUSES_IGNORE);
      if (done) break;
    }
    printf("rank %d: ran again and sent on the old communicator\n", rank);
    fflush(stdout);
    _exit(0);
  }
  /* Until the detector declares the suspect failed: a receive from it fails. */
  int token = 0;
  const int rc = MPI_Recv(&token, 1, MPI_INT, suspect, 0, old, MPI_STATUS_IGNORE);
  const char *failure = NULL;
  if (rc == MPI_SUCCESS) failure = "the receive from the stopped process succeeded";
  MPIX_Comm_revoke(old);
  MPI_Comm shrunk;
  if (failure == NULL && MPIX_Comm_shrink(old, &shrunk) != MPI_SUCCESS) failure = "MPIX_Comm_shrink";
  if (failure == NULL) {
    const double noticed = now() - t0;
    if (free_old) MPI_Comm_free(&old);
    /* New communicators take the lowest free context ids. */
    MPI_Comm fresh[4];
    for (int i = 0; i < 4; ++i) {
      MPI_Comm_dup(shrunk, &fresh[i]);
      MPI_Comm_set_errhandler(fresh[i], MPI_ERRORS_RETURN);
    }
    /* Work on until well after the suspect ran again; rank 0's clock decides for both. */
    long rounds = 0;
    for (int more = 1; more && failure == NULL; ++rounds) {
      more = now() < t0 + stop + 4.0 * time_scale();
      for (int i = 0; i < 4 && failure == NULL; ++i) {
        if (MPI_Bcast(&more, 1, MPI_INT, 0, fresh[i]) != MPI_SUCCESS) failure = "MPI_Bcast on a new communicator";
      }
    }
    printf("rank %d: noticed the failure after %.2f s, %ld rounds after it (old communicator %s)\n", rank, noticed,
           rounds, free_old ? "freed" : "kept");
    fflush(stdout);
  }
  const int code = verdict(rank, failure);
  MPI_Finalize();
  return code;
}
