/* Verdicts and death markers of the C reproducers, in the form tests/mpirun_test.sh reads:
 * $RMASTORE_TEST_VERDICT_DIR/rank-<rank> ("PASS" or "FAIL: reason"), killed.<rank> left by a
 * victim right before it dies, and own-hand@<rank> lines in faults-expected. Plain POSIX writes:
 * a victim dies right after, and the file must be complete by then. */
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void verdict_write_file(const char *name, const char *text, int flags) {
  const char *dir = getenv("RMASTORE_TEST_VERDICT_DIR");
  if (dir == NULL) return;
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  const int fd = open(path, O_WRONLY | O_CREAT | flags, 0644);
  if (fd < 0) return;
  const ssize_t n = write(fd, text, strlen(text));
  (void)n; /* a short write leaves a marker the runner misses: the test fails, as it should */
  close(fd);
}

/* The factor every time bound of the tests is multiplied by (RMASTORE_TEST_TIME_SCALE, as in
 * tests/test_util.hpp). */
static double time_scale(void) {
  const char *text = getenv("RMASTORE_TEST_TIME_SCALE");
  return text != NULL && atof(text) > 0 ? atof(text) : 1.0;
}

/* Across hosts, btl/tcp's write to the socket of a peer that died raises SIGPIPE, whose default
 * action ends the writer: a survivor (store_init ignores SIGPIPE for this, src/store/store.cpp). The
 * reproducers call survive_sigpipe() before MPI_Init and count it instead; verdict() says how
 * many came, so that such a death is not taken for the behaviour a reproducer tests. */
static volatile sig_atomic_t verdict_sigpipes;
static void verdict_count_sigpipe(int sig) {
  (void)sig;
  verdict_sigpipes = verdict_sigpipes + 1;
}
static void survive_sigpipe(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = verdict_count_sigpipe;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGPIPE, &sa, NULL);
}

/* failure == NULL: PASS. Returns the process's exit code. */
static int verdict(int rank, const char *failure) {
  char name[64], text[512];
  if (verdict_sigpipes > 0) printf("rank %d: survived %d SIGPIPE\n", rank, (int)verdict_sigpipes);
  snprintf(name, sizeof name, "rank-%d", rank);
  if (failure == NULL) {
    snprintf(text, sizeof text, "PASS\n");
  } else {
    snprintf(text, sizeof text, "FAIL: %s\n", failure);
  }
  verdict_write_file(name, text, O_TRUNC);
  printf("rank %d: %s", rank, text);
  fflush(stdout);
  return failure == NULL ? 0 : 1;
}

/* The runner then requires that this rank died where it said (killed.<rank>). */
static void expect_own_death(int rank) {
  char spec[64];
  snprintf(spec, sizeof spec, "own-hand@%d\n", rank);
  verdict_write_file("faults-expected", spec, O_APPEND);
}

static void mark_death(int rank, const char *why) {
  char name[64];
  snprintf(name, sizeof name, "killed.%d", rank);
  verdict_write_file(name, why, O_TRUNC);
}
