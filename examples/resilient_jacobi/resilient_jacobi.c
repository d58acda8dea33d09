/* resilient_jacobi: an iterative stencil solver that survives a dead process.
 *
 * Jacobi iterations for the Laplace equation on an N x N grid (the top edge held at 1, the
 * others at 0). The interior rows are cut into blocks, several per process. Every iteration
 * each block publishes its first and last row in the store (the halos its neighbours read), and
 * every --every iterations each block checkpoints its rows, alternating between two generations.
 *
 * When a process dies, the survivors call store_recover, agree on the newest iteration that
 * every block has a checkpoint of, redistribute all blocks over themselves, reload them from
 * the store, and go on from there. At the end rank 0 gathers the solution from the store and
 * compares it, and its residual, with a serial run of the same iterations without failures.
 *
 *   mpirun --with-ft ulfm -n 4 ./resilient_jacobi [--n 130] [--iters 600] [--every 25]
 *                                                 [--kill-rank 1] [--kill-at 210]
 *
 * Why two generations are enough: a process writes the checkpoint of iteration k+every only
 * after a barrier that follows the checkpoint of iteration k, and a barrier completes only once
 * every process, the dead included, entered it; so no block is ever two checkpoints ahead of
 * another. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <rmastore/store.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/example_cli.h"

#define KEY_CKPT 1000000  /* + 2 * block + generation */
#define KEY_EDGE 2000000  /* + 4 * block + 2 * side + parity */
#define KEY_FINAL 3000000 /* + block */

static int n = 130, iters = 600, every = 25, kill_rank = 1, kill_at = 210;
static int world_rank, world_size, nblocks, rows_per_block;
/* Times in the log: seconds on CLOCK_REALTIME since an origin rank 0 chose and broadcast, so
 * that all processes' lines (and a death time one process stored and another reads) compare.
 * MPI_Wtime would not do: each process may count from its own origin (MPI_WTIME_IS_GLOBAL is
 * false in Open MPI), which printed negative times on other ranks. One machine has one
 * CLOCK_REALTIME; across nodes, times are as close as the nodes' clocks. */
static double t0;
static double wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static double now(void) {
  return wall() - t0;
}
static store_t store;
static MPI_Comm comm; /* the survivors */
static int me, nalive;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("[%7.3f s] rank %d: ", now(), world_rank);
  vprintf(fmt, ap);
  printf("\n");
  fflush(stdout);
  va_end(ap);
}

static void die(const char *what, int code) {
  fprintf(stderr, "rank %d: %s: %d\n", world_rank, what, code);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Block b holds interior rows [first_row(b), first_row(b+1)) of the grid. */
static int first_row(int b) {
  return 1 + b * rows_per_block;
}

typedef struct {
  int64_t iter;
  double v[]; /* rows_per_block x n */
} ckpt_t;

static size_t block_bytes(void) {
  return sizeof(ckpt_t) + sizeof(double) * (size_t)rows_per_block * (size_t)n;
}

static int owner(int b) {
  return b % nalive;
}

/* One Jacobi sweep of block b: `up` and `down` are the rows just outside it. */
static void sweep(const double *in, const double *up, const double *down, double *out) {
  for (int i = 0; i < rows_per_block; ++i) {
    const double *above = i == 0 ? up : in + (size_t)(i - 1) * (size_t)n;
    const double *below = i == rows_per_block - 1 ? down : in + (size_t)(i + 1) * (size_t)n;
    const double *row = in + (size_t)i * (size_t)n;
    double *o = out + (size_t)i * (size_t)n;
    o[0] = 0;
    o[n - 1] = 0;
    for (int j = 1; j < n - 1; ++j) o[j] = 0.25 * (above[j] + below[j] + row[j - 1] + row[j + 1]);
  }
}

static void boundary_row(int row, double *out) {
  for (int j = 0; j < n; ++j) out[j] = row == 0 && j > 0 && j < n - 1 ? 1.0 : 0.0;
}

/* The serial reference: the same iterations on the whole grid. Returns the grid. */
static double *serial(void) {
  double *a = calloc((size_t)n * (size_t)n, sizeof(double)), *b = calloc((size_t)n * (size_t)n, sizeof(double));
  boundary_row(0, a);
  boundary_row(0, b);
  for (int it = 0; it < iters; ++it) {
    for (int i = 1; i < n - 1; ++i)
      for (int j = 1; j < n - 1; ++j)
        b[i * n + j] = 0.25 * (a[(i - 1) * n + j] + a[(i + 1) * n + j] + a[i * n + j - 1] + a[i * n + j + 1]);
    double *t = a;
    a = b;
    b = t;
  }
  free(b);
  return a;
}

/* || 4 x(i,j) - neighbours ||_2 over the interior: the residual of the discrete Laplace problem. */
static double residual(const double *g) {
  double s = 0;
  for (int i = 1; i < n - 1; ++i)
    for (int j = 1; j < n - 1; ++j) {
      double r = 4 * g[i * n + j] - g[(i - 1) * n + j] - g[(i + 1) * n + j] - g[i * n + j - 1] - g[i * n + j + 1];
      s += r * r;
    }
  return sqrt(s);
}

/* ---- state of this process ------------------------------------------------------------------- */

static double **cur, **nxt; /* per block, if owned */

static void set_comm(MPI_Comm c) {
  comm = c;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &nalive);
}

/* Publishes the edge rows of the owned blocks for iteration `it`. */
static int publish(int it) {
  for (int b = 0; b < nblocks; ++b) {
    if (owner(b) != me) continue;
    for (int side = 0; side < 2; ++side) {
      const double *row = cur[b] + (size_t)(side == 0 ? 0 : rows_per_block - 1) * (size_t)n;
      int st = store_put(store, KEY_EDGE + 4 * (store_key_t)b + 2 * (store_key_t)side + (store_key_t)(it % 2), row,
                         sizeof(double) * (size_t)n);
      if (st != STORE_OK) return st;
    }
  }
  return STORE_OK;
}

/* The row just above (side 0) or below (side 1) block b at iteration `it`. */
static int halo(int b, int side, int it, double *out) {
  int nb = side == 0 ? b - 1 : b + 1;
  if (nb < 0 || nb >= nblocks) {
    boundary_row(side == 0 ? 0 : n - 1, out);
    return STORE_OK;
  }
  size_t len = 0;
  return store_get(store, KEY_EDGE + 4 * (store_key_t)nb + 2 * (store_key_t)(side == 0 ? 1 : 0) + (store_key_t)(it % 2),
                   out, sizeof(double) * (size_t)n, &len);
}

static int checkpoint(int it) {
  ckpt_t *c = malloc(block_bytes());
  c->iter = it;
  int st = STORE_OK;
  for (int b = 0; b < nblocks && st == STORE_OK; ++b) {
    if (owner(b) != me) continue;
    memcpy(c->v, cur[b], block_bytes() - sizeof(ckpt_t));
    st = store_put(store, KEY_CKPT + 2 * (store_key_t)b + (store_key_t)((it / every) % 2), c, block_bytes());
  }
  free(c);
  return st;
}

/* After store_recover: the newest iteration of which every block has a checkpoint, and the
 * owned blocks loaded from it. */
static int restore(int *restart) {
  ckpt_t *c = malloc(block_bytes());
  int64_t newest_common = INT64_MAX;
  for (int b = 0; b < nblocks; ++b) {
    int64_t newest = -1;
    for (int g = 0; g < 2; ++g) {
      size_t len = 0;
      int st = store_get(store, KEY_CKPT + 2 * (store_key_t)b + (store_key_t)g, c, block_bytes(), &len);
      if (st == STORE_OK && c->iter > newest)
        newest = c->iter;
      else if (st != STORE_OK && st != STORE_ERR_NOT_FOUND) {
        free(c);
        return st;
      }
    }
    if (newest < newest_common) newest_common = newest;
  }
  *restart = (int)newest_common;
  for (int b = 0; b < nblocks; ++b) {
    if (owner(b) != me) continue;
    size_t len = 0;
    int st =
        store_get(store, KEY_CKPT + 2 * (store_key_t)b + (store_key_t)((*restart / every) % 2), c, block_bytes(), &len);
    if (st != STORE_OK) {
      free(c);
      return st;
    }
    if (c->iter != *restart) die("a block lacks the common checkpoint", (int)c->iter);
    if (!cur[b]) cur[b] = malloc(block_bytes()), nxt[b] = malloc(block_bytes());
    memcpy(cur[b], c->v, block_bytes() - sizeof(ckpt_t));
  }
  free(c);
  return STORE_OK;
}

static int recover(int *it) {
  for (;;) {
    double start = now();
    MPI_Comm fresh = MPI_COMM_NULL;
    int st;
    while ((st = store_recover(store, &fresh)) == STORE_ERR_RECOVER_AGAIN) say("another process failed: again");
    if (st != STORE_OK) die("store_recover", st);
    double recovered = now();
    store_recovery_t rep;
    store_recovery_init(&rep);
    store_last_recovery(store, &rep);
    if (comm != MPI_COMM_WORLD) MPI_Comm_free(&comm);
    set_comm(fresh);
    if (rep.lost_count != 0) die("checkpoints were lost", (int)rep.lost_count);
    /* Checkpoints are plain puts: back to normal mode, then reload. */
    if ((st = store_back_to_normal(store)) == STORE_OK && (st = restore(it)) == STORE_OK) {
      int mine = 0;
      for (int b = 0; b < nblocks; ++b) mine += owner(b) == me;
      if (me == 0)
        say("store_recover took %.1f ms (%d survivors, %.1f KiB moved); all %d blocks redistributed and "
            "reloaded from the checkpoint of iteration %d in %.1f ms",
            (recovered - start) * 1e3, rep.survivors, (double)rep.bytes_moved / 1024, nblocks, *it,
            (now() - recovered) * 1e3);
      say("now owns %d block(s)", mine);
      return STORE_OK;
    }
    if (st != STORE_ERR_PROC_FAILED) die("restore", st);
  }
}

/* ---- command line ---------------------------------------------------------------------------- */

static const char usage[] =
    "usage: resilient_jacobi [--n N] [--iters I] [--every E] [--kill-rank R|-1] [--kill-at I]\n";

static void parse_args(int argc, char **argv) {
  enum { OPT_N = 256, OPT_ITERS, OPT_EVERY, OPT_KILL_RANK, OPT_KILL_AT };
  static const struct option options[] = {{"n", required_argument, NULL, OPT_N},
                                          {"iters", required_argument, NULL, OPT_ITERS},
                                          {"every", required_argument, NULL, OPT_EVERY},
                                          {"kill-rank", required_argument, NULL, OPT_KILL_RANK},
                                          {"kill-at", required_argument, NULL, OPT_KILL_AT},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  cli_init("resilient_jacobi", usage, world_rank);
  for (int c; (c = getopt_long(argc, argv, ":h", options, NULL)) != -1;) {
    switch (c) {
    case OPT_N:
      n = int_arg("--n", optarg, 3, 100000);
      break;
    case OPT_ITERS:
      iters = int_arg("--iters", optarg, 0, INT_MAX);
      break;
    case OPT_EVERY:
      every = int_arg("--every", optarg, 1, INT_MAX);
      break;
    case OPT_KILL_RANK:
      kill_rank = int_arg("--kill-rank", optarg, -1, INT_MAX);
      break;
    case OPT_KILL_AT:
      kill_at = int_arg("--kill-at", optarg, 0, INT_MAX);
      break;
    default:
      cli_other(c, argv);
    }
  }
  cli_no_operands(argc, argv);
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  /* Barriers run on MPI_COMM_WORLD until the first failure: they must return an error. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  parse_args(argc, argv);
  nblocks = 2 * world_size;
  rows_per_block = (n - 2) / nblocks;
  if (world_size < 2 || rows_per_block < 1 || (n - 2) % nblocks != 0 || every < 1 || kill_rank >= world_size ||
      kill_rank == 0) {
    usage_error("needs 2 or more processes, N-2 divisible by 2 x processes, and a victim other than rank 0");
  }
  t0 = wall();
  MPI_Bcast(&t0, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  store_config_t cfg;
  store_config_init(&cfg);
  cfg.replicas = 2;
  int st = store_init(MPI_COMM_WORLD, &cfg, &store);
  if (st != STORE_OK) die("store_init", st);
  set_comm(MPI_COMM_WORLD);
  cur = calloc((size_t)nblocks, sizeof(double *));
  nxt = calloc((size_t)nblocks, sizeof(double *));
  for (int b = 0; b < nblocks; ++b) {
    if (owner(b) != me) continue;
    cur[b] = calloc(1, block_bytes());
    nxt[b] = calloc(1, block_bytes());
  }
  if (world_rank == 0) {
    say("%d x %d grid in %d blocks of %d rows on %d processes, %d iterations, checkpoint every %d", n, n, nblocks,
        rows_per_block, world_size, iters, every);
    if (kill_rank > 0) say("rank %d will die at iteration %d", kill_rank, kill_at);
  }

  int it = 0;
  double *up = malloc(sizeof(double) * (size_t)n), *down = malloc(sizeof(double) * (size_t)n);
  st = checkpoint(0);
  if (st == STORE_OK) st = publish(0);
  if (st == STORE_OK) st = MPI_Barrier(comm);
  while (it < iters || st != STORE_OK) {
    if (st != STORE_OK) {
      say("iteration %d: a process failed -> store_recover", it);
      recover(&it);
      st = publish(it);
      if (st == STORE_OK) st = MPI_Barrier(comm);
      continue;
    }
    if (world_rank == kill_rank && it == kill_at) {
      say("dies now at iteration %d (SIGKILL)", it);
      raise(SIGKILL);
    }
    for (int b = 0; b < nblocks && st == STORE_OK; ++b) {
      if (owner(b) != me) continue;
      if ((st = halo(b, 0, it, up)) == STORE_OK && (st = halo(b, 1, it, down)) == STORE_OK)
        sweep(cur[b], up, down, nxt[b]);
    }
    if (st != STORE_OK) continue;
    for (int b = 0; b < nblocks; ++b) {
      double *t = cur[b];
      cur[b] = nxt[b];
      nxt[b] = t;
    }
    ++it;
    if (it % every == 0) st = checkpoint(it);
    if (st == STORE_OK) st = publish(it);
    if (st == STORE_OK) st = MPI_Barrier(comm);
  }

  /* The solution, gathered through the store, against the serial failure-free run. */
  for (int b = 0; b < nblocks && st == STORE_OK; ++b)
    if (owner(b) == me)
      st = store_put(store, KEY_FINAL + (store_key_t)b, cur[b], sizeof(double) * (size_t)rows_per_block * (size_t)n);
  if (st == STORE_OK) st = MPI_Barrier(comm);
  if (st != STORE_OK) die("a failure after the last iteration is not handled by this example", st);
  int ok = 1;
  if (me == 0) {
    double *g = calloc((size_t)n * (size_t)n, sizeof(double));
    boundary_row(0, g);
    for (int b = 0; b < nblocks; ++b) {
      size_t len = 0;
      st = store_get(store, KEY_FINAL + (store_key_t)b, g + (size_t)first_row(b) * (size_t)n,
                     sizeof(double) * (size_t)rows_per_block * (size_t)n, &len);
      if (st != STORE_OK) die("final get", st);
    }
    double *ref = serial();
    double diff = 0;
    for (int i = 0; i < n * n; ++i) diff = fmax(diff, fabs(g[i] - ref[i]));
    double r = residual(g), rref = residual(ref);
    ok = diff <= 1e-12 && fabs(r - rref) <= 1e-12 * fmax(1.0, rref);
    say("residual %.6e (failure-free run: %.6e), largest difference from the failure-free solution %.1e: %s "
        "(%d failure(s) survived)",
        r, rref, diff, ok ? "MATCH" : "MISMATCH", world_size - nalive);
    free(g);
    free(ref);
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, comm);
  if ((st = store_finalize(&store)) != STORE_OK) die("store_finalize", st);
  for (int b = 0; b < nblocks; ++b) {
    free(cur[b]);
    free(nxt[b]);
  }
  free(cur);
  free(nxt);
  free(up);
  free(down);
  if (comm != MPI_COMM_WORLD) MPI_Comm_free(&comm);
  MPI_Finalize();
  return ok ? 0 : 1;
}
