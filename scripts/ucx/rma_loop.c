/* rma_loop.c: does osc/rdma (or whatever osc is selected) give a one-sided path?
 *
 * 2 processes, dynamic window of 1 MiB attached on every rank, lock_all.
 * Phase A (put):  rank 0 does N x (MPI_Put 8 bytes + MPI_Win_flush(1)).
 * Phase B (get):  rank 0 does N x (MPI_Get 8 bytes + MPI_Win_flush(1)), checks values.
 * Phase C (fop):  rank 0 does N/10 x (MPI_Fetch_and_op SUM 8 bytes + flush), checks result.
 * In "busy" mode rank 1 spins for SPIN seconds with no MPI call during each phase, and at the end
 * of the put spin counts (by plain loads, still without any MPI call) how many of the puts have
 * already landed in its memory.
 *
 * usage: rma_loop [idle|busy] [N] [SPIN_SECONDS]
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WIN_BYTES (1 << 20)
#define SLOTS (WIN_BYTES / 8)
#define MAGIC 0x5157000000000000ull

static int rank;

static void chk(int rc, const char *what, int line) {
  if (rc != MPI_SUCCESS) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0, cls = -1;
    MPI_Error_string(rc, s, &len);
    MPI_Error_class(rc, &cls);
    printf("[rank %d] ERROR line %d %s: code %d class %d: %s\n", rank, line, what, rc, cls, s);
    fflush(stdout);
  }
}
#define CHK(call) chk((call), #call, __LINE__)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static volatile double sink;
static void spin(double seconds) {
  double t0 = now(), x = 1.0;
  while (now() - t0 < seconds) {
    for (int i = 0; i < 10000; ++i) x = x * 1.0000001 + 1e-9;
  }
  sink = x;
}

typedef struct {
  double total, max, first;
  int before_deadline; /* operations completed within SPIN s of the phase start */
} stats_t;

/* One operation of a phase, begun at `began`; the phase began at t0. */
static void record(stats_t *s, int i, double began, double t0, double spin_s) {
  double d = now() - began;
  if (0 == i) s->first = d;
  if (d > s->max) s->max = d;
  if (now() - t0 < spin_s) s->before_deadline++;
}

static void report(const char *name, int n, stats_t *s, double spin_s) {
  printf("[rank 0] %-4s n=%d total=%.6f s mean=%.2f us max=%.2f us first=%.2f us", name, n, s->total,
         s->total / n * 1e6, s->max * 1e6, s->first * 1e6);
  if (spin_s > 0) printf(" completed_during_target_spin=%d/%d", s->before_deadline, n);
  printf("\n");
  fflush(stdout);
}

int main(int argc, char **argv) {
  int provided, size;
  const char *mode = argc > 1 ? argv[1] : "idle";
  int n = argc > 2 ? atoi(argv[2]) : 1000;
  double spin_s = argc > 3 ? atof(argv[3]) : 3.0;
  int busy = 0 == strcmp(mode, "busy");
  if (!busy) spin_s = 0;

  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (0 == rank) printf("needs exactly 2 processes\n");
    MPI_Finalize();
    return 1;
  }
  if (0 == rank) {
    printf("[rank 0] mode=%s n=%d spin=%.1f s provided=%d\n", mode, n, spin_s, provided);
    fflush(stdout);
  }

  MPI_Win win;
  CHK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
  CHK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
  uint64_t *buf = calloc(SLOTS, 8);
  CHK(MPI_Win_attach(win, buf, WIN_BYTES));
  MPI_Aint mine, addrs[2];
  CHK(MPI_Get_address(buf, &mine));
  CHK(MPI_Allgather(&mine, 1, MPI_AINT, addrs, 1, MPI_AINT, MPI_COMM_WORLD));
  CHK(MPI_Win_lock_all(0, win));
  printf("[rank %d] window ready\n", rank);
  fflush(stdout);

  /* ---- phase A: put ---- */
  CHK(MPI_Barrier(MPI_COMM_WORLD));
  if (0 == rank) {
    stats_t s = {0};
    double t0 = now();
    for (int i = 0; i < n; ++i) {
      uint64_t v = MAGIC + i;
      double a = now();
      CHK(MPI_Put(&v, 1, MPI_UINT64_T, 1, addrs[1] + (MPI_Aint)(i % SLOTS) * 8, 1, MPI_UINT64_T, win));
      CHK(MPI_Win_flush(1, win));
      record(&s, i, a, t0, spin_s);
    }
    s.total = now() - t0;
    report("put", n, &s, spin_s);
  } else if (busy) {
    double t0 = now();
    spin(spin_s);
    /* plain loads, no MPI call since the barrier */
    int landed = 0;
    for (int i = 0; i < n && i < SLOTS; ++i)
      if (((volatile uint64_t *)buf)[i] == MAGIC + (uint64_t)i) landed++;
    printf("[rank 1] after %.2f s of computing without MPI calls: %d/%d puts already in memory\n", now() - t0, landed,
           n);
    fflush(stdout);
  }
  CHK(MPI_Barrier(MPI_COMM_WORLD));
  if (1 == rank) {
    int ok = 0;
    for (int i = 0; i < n && i < SLOTS; ++i)
      if (buf[i] == MAGIC + (uint64_t)i) ok++;
    printf("[rank 1] put verification: %d/%d values correct%s\n", ok, n < SLOTS ? n : SLOTS,
           ok == (n < SLOTS ? n : SLOTS) ? " (OK)" : " (MISMATCH)");
    fflush(stdout);
  }

  /* ---- phase B: get ---- */
  CHK(MPI_Barrier(MPI_COMM_WORLD));
  if (0 == rank) {
    stats_t s = {0};
    int bad = 0;
    double t0 = now();
    for (int i = 0; i < n; ++i) {
      uint64_t v = 0;
      double a = now();
      CHK(MPI_Get(&v, 1, MPI_UINT64_T, 1, addrs[1] + (MPI_Aint)(i % SLOTS) * 8, 1, MPI_UINT64_T, win));
      CHK(MPI_Win_flush(1, win));
      record(&s, i, a, t0, spin_s);
      if (v != MAGIC + (uint64_t)i) bad++;
    }
    s.total = now() - t0;
    report("get", n, &s, spin_s);
    printf("[rank 0] get verification: %d/%d wrong values%s\n", bad, n, bad ? " (MISMATCH)" : " (OK)");
    fflush(stdout);
  } else if (busy) {
    spin(spin_s);
  }
  CHK(MPI_Barrier(MPI_COMM_WORLD));

  /* ---- phase C: fetch_and_op on slot SLOTS-1 of rank 1 ---- */
  int nf = n / 10 > 0 ? n / 10 : 1;
  if (0 == rank) {
    stats_t s = {0};
    int bad = 0;
    double t0 = now();
    for (int i = 0; i < nf; ++i) {
      uint64_t one = 1, old = 12345;
      double a = now();
      CHK(MPI_Fetch_and_op(&one, &old, MPI_UINT64_T, 1, addrs[1] + (MPI_Aint)(SLOTS - 1) * 8, MPI_SUM, win));
      CHK(MPI_Win_flush(1, win));
      record(&s, i, a, t0, spin_s);
      if (old != (uint64_t)i) bad++;
    }
    s.total = now() - t0;
    report("fop", nf, &s, spin_s);
    printf("[rank 0] fop verification: %d/%d wrong old values%s\n", bad, nf, bad ? " (MISMATCH)" : " (OK)");
    fflush(stdout);
  } else if (busy) {
    spin(spin_s);
  }
  CHK(MPI_Barrier(MPI_COMM_WORLD));
  if (1 == rank) {
    printf("[rank 1] fop counter = %llu (expect %d)%s\n", (unsigned long long)buf[SLOTS - 1], nf,
           buf[SLOTS - 1] == (uint64_t)nf ? " (OK)" : " (MISMATCH)");
    fflush(stdout);
  }

  CHK(MPI_Win_unlock_all(win));
  CHK(MPI_Win_detach(win, buf));
  CHK(MPI_Win_free(&win));
  printf("[rank %d] done\n", rank);
  fflush(stdout);
  MPI_Finalize();
  free(buf);
  return 0;
}
