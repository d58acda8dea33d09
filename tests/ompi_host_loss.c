/* Open MPI 5.0.7 (bundled PRRTE) behaviour that rmastore needs fixed: losing a whole host.
 *
 * 6 processes on 3 hosts, 2 per host. Both processes of the last host die, and the PRRTE
 * daemon (prted) of that host dies first, as when the machine goes away. Under
 * --with-ft ulfm the 4 survivors should see two failed processes, shrink to 4 and go on.
 * Unpatched PRRTE instead aborts the whole job ("PRTE has lost communication with a remote
 * daemon ... We cannot recover from this failure", open-mpi/ompi#12227), so no survivor
 * passes. scripts/openmpi-patches/0003-prrte-survive-a-lost-daemon-under-ulfm.patch fixes it.
 *
 *   mpicc -o ompi_host_loss ompi_host_loss.c
 *   mpirun --with-ft ulfm --hostfile <3 hosts, 2 slots each> -n 6 ./ompi_host_loss
 *
 * Each survivor prints its verdict ("PASS" or "FAIL: reason") and, if
 * RMASTORE_TEST_VERDICT_DIR is set, writes it to $RMASTORE_TEST_VERDICT_DIR/rank-<rank> as
 * tests/mpirun_test.sh expects; the victim that kills the prted leaves killed.<rank> there for
 * each victim just before.
 */
#include <mpi.h>
// after mpi.h, on purpose
#include <mpi-ext.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ompi_verdict.h"

#define NAME_LEN MPI_MAX_PROCESSOR_NAME

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t); /* all simulated hosts share this clock */
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The parent must be the prted of this host: killing anything else (mpirun itself, when all
 * ranks run on one host) would test something else. */
static int parent_is_prted(void) {
  char path[64], comm[64] = "";
  snprintf(path, sizeof path, "/proc/%d/comm", (int)getppid());
  FILE *f = fopen(path, "r");
  if (f == NULL) return 0;
  if (fgets(comm, sizeof comm, f) == NULL) comm[0] = '\0';
  fclose(f);
  return strncmp(comm, "prted", 5) == 0;
}

/* The victim that does not kill the prted waits until it is gone (we are reparented), so that
 * no daemon is left to report either victim's death: PRRTE must learn of it from the lost
 * daemon alone, as with a real host loss. Bounded, so a missed kill cannot hang the test. */
static void wait_for_parent_death(pid_t parent) {
  const struct timespec tick = {0, 10 * 1000 * 1000};
  for (int i = 0; i < 500 && getppid() == parent; ++i) nanosleep(&tick, NULL);
}

int main(int argc, char **argv) {
  int provided, rank, size;
  survive_sigpipe();
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  /* The victims are all ranks on the host of the last rank; learn the placement. */
  char *names = calloc((size_t)size, NAME_LEN);
  char me[NAME_LEN] = "";
  int len = 0;
  MPI_Get_processor_name(me, &len);
  MPI_Allgather(me, NAME_LEN, MPI_CHAR, names, NAME_LEN, MPI_CHAR, MPI_COMM_WORLD);
  const char *last_host = names + (size_t)(size - 1) * NAME_LEN;
  int *victim = calloc((size_t)size, sizeof(int));
  int nvictims = 0, hosts_apart = 0;
  for (int r = 0; r < size; ++r) {
    victim[r] = strcmp(names + (size_t)r * NAME_LEN, last_host) == 0;
    nvictims += victim[r];
  }
  hosts_apart = strcmp(names, last_host) != 0;
  /* Killing the prted of a host that also runs rank 0 would not leave survivors to judge. */
  if (!hosts_apart || nvictims >= size) {
    const int result = verdict(rank, "all ranks on one host: run on 2+ hosts (3 x 2 slots)");
    MPI_Finalize();
    return result;
  }
  if (rank == 0) {
    /* The runner checks that each death announced here happened (killed.<rank>). */
    for (int r = 0; r < size; ++r) {
      if (victim[r]) expect_own_death(r);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);

  /* The host dies now: everyone leaves this barrier within microseconds of the kill. */
  MPI_Barrier(MPI_COMM_WORLD);
  const double t_death = now();
  if (victim[rank]) {
    const pid_t parent = getppid();
    char text[128];
    if (rank == size - 1) {
      if (!parent_is_prted()) {
        /* Fail loudly rather than kill mpirun or test a plain process death. */
        verdict(rank, "parent is not a prted");
      } else {
        /* Every victim's marker is left here, before the kill: once the prted is gone, Open MPI
         * aborts its processes on PMIX_ERR_LOST_CONNECTION (ompi/errhandler/errhandler.c), which
         * can come before the other victim sees itself orphaned. */
        snprintf(text, sizeof text, "host loss: rank %d killed prted %d at %.6f\n", rank, (int)parent, now());
        for (int r = 0; r < size; ++r) {
          if (victim[r]) mark_death(r, text);
        }
        fprintf(stderr, "[rank %d] %s", rank, text);
        fflush(stderr);
        /* The host lives on: a victim's failed verdict fails the test. */
        if (kill(parent, SIGKILL) != 0) verdict(rank, "cannot kill the prted");
      }
    } else {
      wait_for_parent_death(parent);
    }
    raise(SIGKILL);
    abort(); /* not reached */
  }

  /* Survivors: the ranks of the lost host never enter this barrier, so it must fail. */
  const char *failure = NULL;
  char why[256];
  int rc = MPI_Barrier(MPI_COMM_WORLD);
  const double t_detected = now();
  int eclass = MPI_SUCCESS;
  MPI_Error_class(rc, &eclass);
  if (eclass != MPIX_ERR_PROC_FAILED && eclass != MPIX_ERR_REVOKED) {
    snprintf(why, sizeof why, "barrier returned error class %d, not PROC_FAILED/REVOKED", eclass);
    failure = why;
  }
  MPIX_Comm_revoke(MPI_COMM_WORLD);
  MPI_Comm shrunk;
  rc = MPIX_Comm_shrink(MPI_COMM_WORLD, &shrunk);
  const double t_shrunk = now();
  if (rc != MPI_SUCCESS) {
    if (failure == NULL) failure = "shrink failed";
    return verdict(rank, failure);
  }
  MPI_Comm_set_errhandler(shrunk, MPI_ERRORS_RETURN);
  int flag = 1;
  rc = MPIX_Comm_agree(shrunk, &flag);
  if (failure == NULL && (rc != MPI_SUCCESS || flag != 1)) {
    snprintf(why, sizeof why, "agree on the shrunk communicator: rc %d flag %d", rc, flag);
    failure = why;
  }

  /* Exactly the last host's ranks must be gone: in the shrunk communicator and in the failed
   * group of MPI_COMM_WORLD. */
  int shrunk_size = 0, nfailed = 0;
  MPI_Comm_size(shrunk, &shrunk_size);
  MPI_Group world_group, failed_group, shrunk_group;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Comm_group(shrunk, &shrunk_group);
  MPIX_Comm_get_failed(MPI_COMM_WORLD, &failed_group);
  MPI_Group_size(failed_group, &nfailed);
  if (failure == NULL && (shrunk_size != size - nvictims || nfailed != nvictims)) {
    snprintf(why, sizeof why, "shrunk to %d and %d failed; expected %d and %d", shrunk_size, nfailed, size - nvictims,
             nvictims);
    failure = why;
  }
  int *in = malloc(sizeof(int) * (size_t)size), *out = malloc(sizeof(int) * (size_t)size);
  for (int i = 0; i < nfailed && failure == NULL; ++i) {
    in[0] = i;
    MPI_Group_translate_ranks(failed_group, 1, in, world_group, out);
    if (out[0] == MPI_UNDEFINED || !victim[out[0]]) {
      snprintf(why, sizeof why, "rank %d reported failed but was not on the lost host", out[0]);
      failure = why;
    }
  }
  for (int i = 0; i < shrunk_size && failure == NULL; ++i) {
    in[0] = i;
    MPI_Group_translate_ranks(shrunk_group, 1, in, world_group, out);
    if (out[0] == MPI_UNDEFINED || victim[out[0]]) {
      snprintf(why, sizeof why, "shrunk communicator holds rank %d of the lost host", out[0]);
      failure = why;
    }
  }
  printf("rank %d: host loss -> barrier error after %.1f ms, shrink done %.1f ms after the "
         "death (shrink itself %.1f ms), %d survivors, shrunk at %.6f\n",
         rank, (t_detected - t_death) * 1e3, (t_shrunk - t_death) * 1e3, (t_shrunk - t_detected) * 1e3, shrunk_size,
         t_shrunk);
  const int result = verdict(rank, failure);

  free(in);
  free(out);
  free(victim);
  free(names);
  MPI_Group_free(&world_group);
  MPI_Group_free(&failed_group);
  MPI_Group_free(&shrunk_group);
  MPI_Comm_free(&shrunk);
  MPI_Finalize();
  return result;
}
