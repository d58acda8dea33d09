/* Checks and the verdict of the C tests, in the form tests/mpirun_test.sh reads: every failed
 * CHECK is printed and counted, and write_verdict() leaves $RMASTORE_TEST_VERDICT_DIR/rank-<rank>
 * ("PASS" or "FAIL"). Header only: test_install.sh compiles test_c_api.c outside the build. */
#pragma once

#include <stdio.h>
#include <stdlib.h>

static int check_failures = 0;
#define CHECK(cond)                                                                                                    \
  do {                                                                                                                 \
    if (!(cond)) {                                                                                                     \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                                         \
      ++check_failures;                                                                                                \
    }                                                                                                                  \
  } while (0)

/* Returns the process's exit code: 0 if every check passed. */
static int write_verdict(int rank) {
  const char *dir = getenv("RMASTORE_TEST_VERDICT_DIR");
  if (dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/rank-%d", dir, rank);
    FILE *f = fopen(path, "w");
    if (f) {
      fputs(check_failures == 0 ? "PASS\n" : "FAIL\n", f);
      fclose(f);
    }
  }
  return check_failures == 0 ? 0 : 1;
}
