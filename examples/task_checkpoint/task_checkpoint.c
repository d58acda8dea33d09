/* task_checkpoint: task-level checkpointing with rmastore, the use the store was designed for.
 *
 * The program counts the solutions of the N-queens problem. A task is one placement of the
 * first three queens; tasks are numbered 0 .. N^3-1 and start out split evenly among the
 * workers. A worker with no tasks left steals half of a range from a random other worker
 * (dynamic load balancing). Each worker's state (its task ranges and the solutions it found)
 * lives in the store under its key, so a dead worker's finished work is kept and its unfinished
 * tasks can be taken over:
 *
 *   - a task in progress has a checkpoint of its own (which subtrees of the fourth queen are
 *     done, and their solutions), under a key in its worker's range of task keys, written after
 *     every subtree;
 *   - a finished task is folded into the worker's key and its checkpoint deleted, in one
 *     transaction: the store holds one task checkpoint per worker at a time, and its memory
 *     stays flat however many tasks run;
 *   - a steal is one transaction by the victim over both keys: tasks are never in flight
 *     outside the store, so none is lost and none is counted twice, even if either side dies;
 *   - after a failure the survivors call store_recover, then (in transaction mode) each dead
 *     worker's remaining tasks are adopted by one survivor, again in one transaction, together
 *     with the checkpoint of the task it was running, which the survivor finds by listing the
 *     dead worker's range of task keys (store_list) and resumes where it stopped;
 *   - the program ends when every worker's key holds no task, and the sum of all workers'
 *     solutions must equal the known count, with no task checkpoint left in the store.
 *
 *   - with --rounds K the tasks run in K rounds; at the end of each, its solutions are folded
 *     into one key, its workers' keys deleted, and (with --snapshot-dir) a snapshot written. A
 *     new job, of any number of processes, started with --restore after the whole job was
 *     killed, goes on from the round after the newest snapshot and finishes the count.
 *
 *   mpirun --with-ft ulfm -n 4 ./task_checkpoint [--n 13] [--kill-rank 1] [--kill-after 100]
 *                                               [--kill2-rank -1] [--replicas 2]
 *                                               [--rounds 1] [--snapshot-dir DIR [--restore]]
 *
 * --kill-rank R dies (SIGKILL) half-way through its first task after --kill-after finished
 * ones; -1: no failure.
 * --kill2-rank R2 dies inside the survivors' recovery, after store_recover returned and before
 * the adoption: the survivors recover again. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <rmastore/store.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/example_cli.h"

#define MAX_RANGES 64
/* Steal requests and answers carry the round in their tag: a request left over from a round
 * (its thief saw the round done and left) is never served in the next one. */
#define TAG_ASK (1 + 2 * (int)round_no)
#define TAG_ANSWER (2 + 2 * (int)round_no)
#define DEATH_KEY 1000000    /* + world rank: when a killed worker died (now()) */
#define PROGRESS_KEY 2000000 /* progress_t: the rounds done, and their solutions */
/* Worker w's task checkpoints: key task_key(w, t) for task t, a range of 2^32 keys per worker. */
static store_key_t task_key(int worker, uint32_t task) {
  return ((store_key_t)(worker + 1) << 40) + task;
}

/* The tasks run in rounds; a snapshot follows each round (--snapshot-dir). Worker w's state in
 * round k is under key (k << 24) + w. */
static uint32_t round_no;
static store_key_t worker_key(int worker) {
  return ((store_key_t)round_no << 24) + (store_key_t)worker;
}

typedef struct {
  uint64_t rounds_done, solutions; /* the solutions of the rounds done */
} progress_t;

typedef struct {
  uint32_t lo, hi;
} range_t;

typedef struct {
  uint64_t solutions;  /* found in the tasks done so far */
  uint64_t tasks_done; /* by this worker, adopted or stolen tasks included */
  int32_t nranges;
  int32_t adopted_by; /* -1, or the worker that took over the remaining tasks */
  range_t r[MAX_RANGES];
} worker_t;

/* A task in progress: the subtrees of the fourth queen (one per column) done so far. */
typedef struct {
  uint32_t task;
  uint32_t next; /* the next column of the fourth queen to try */
  uint64_t solutions;
} task_ckpt_t;

static const uint64_t known[] = {1, 1, 0, 0, 2, 10, 4, 40, 92, 352, 724, 2680, 14200, 73712, 365596};

static int n = 13, kill_rank = 1, kill_after = 100, kill2_rank = -1, replicas = 2, rounds = 1, restore = 0;
static const char *snapshot_dir = NULL;
/* Round k runs tasks round_lo(k) .. round_lo(k + 1) - 1. */
static uint32_t round_lo(uint32_t k) {
  return (uint32_t)((uint64_t)n * (uint64_t)n * (uint64_t)n * k / (uint64_t)rounds);
}
static uint32_t round_tasks(uint32_t k) {
  return round_lo(k + 1) - round_lo(k);
}
static int world_rank, world_size;
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
static MPI_Comm work;    /* the survivors; steal requests travel here */
static int *alive_world; /* world rank of each rank of work */
static int nalive, me;   /* size of work, rank in work */
static int recoveries;
static char *reported, *reported_adoption; /* already in the log */
/* Task checkpoints this worker adopted from dead workers (under its own keys now). */
static task_ckpt_t adopted_ckpts[MAX_RANGES];
static int nadopted;
static uint64_t ckpts_made, ckpts_deleted; /* task checkpoints this worker created and deleted */
static MPI_Request ask_req = MPI_REQUEST_NULL;
static int ask_buf;

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

static void die(const char *what, store_status_t st) {
  fprintf(stderr, "rank %d: %s: %s\n", world_rank, what, store_strerror(st));
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* ---- the computation ---------------------------------------------------------------------- */

static uint64_t solve(uint32_t cols, uint32_t d1, uint32_t d2, int row) {
  if (row == n) return 1;
  uint64_t count = 0;
  uint32_t free_cols = ~(cols | d1 | d2) & ((1u << n) - 1);
  while (free_cols) {
    uint32_t bit = free_cols & -free_cols;
    free_cols -= bit;
    count += solve(cols | bit, (d1 | bit) << 1, (d2 | bit) >> 1, row + 1);
  }
  return count;
}

/* The first three queens of task t: 0 if they attack each other (the task has no subtree). */
static int place_three(uint32_t t, uint32_t *cols, uint32_t *d1, uint32_t *d2) {
  uint32_t q[3] = {t / (uint32_t)(n * n), t / (uint32_t)n % (uint32_t)n, t % (uint32_t)n};
  *cols = *d1 = *d2 = 0;
  for (int i = 0; i < 3; ++i) {
    uint32_t bit = 1u << q[i];
    if ((*cols | *d1 | *d2) & bit) return 0;
    *cols |= bit;
    *d1 = (*d1 | bit) << 1;
    *d2 = (*d2 | bit) >> 1;
  }
  return 1;
}

/* ---- worker state in the store ------------------------------------------------------------- */

static uint32_t remaining(const worker_t *w) {
  uint32_t left = 0;
  for (int i = 0; i < w->nranges; ++i) left += w->r[i].hi - w->r[i].lo;
  return left;
}

static store_status_t load(int worker, worker_t *w) {
  size_t len = 0;
  store_status_t st = store_get(store, worker_key(worker), w, sizeof *w, &len);
  if (st == STORE_OK && len != sizeof *w) die("a worker's state has the wrong size", STORE_ERR_INTERNAL);
  return st;
}

/* Set after a recovery: a task may have been checkpointed by this worker before the failure cut
 * it short, so its checkpoint is looked up before it runs again. */
static int look_for_own_ckpt;

/* Task t (this worker runs it): its solutions in *found. Checkpointed after every subtree of the
 * fourth queen, the last one's result going into the fold-in instead; *checkpointed says whether
 * a checkpoint of it exists. A task adopted in progress resumes from its checkpoint. Returns
 * STORE_OK, or a failure status (the checkpoint in the store says where the next try resumes). */
static store_status_t run_task(const worker_t *mine, uint32_t t, uint64_t *found, int *checkpointed) {
  uint32_t cols, d1, d2;
  *found = 0;
  *checkpointed = 0;
  if (!place_three(t, &cols, &d1, &d2)) return STORE_OK; /* no subtree, nothing to checkpoint */
  task_ckpt_t c = {t, 0, 0};
  int resumed = 0;
  for (int i = 0; i < nadopted && !resumed; ++i) {
    if (adopted_ckpts[i].task != t) continue;
    c = adopted_ckpts[i];
    adopted_ckpts[i] = adopted_ckpts[--nadopted];
    resumed = 1;
  }
  if (!resumed && look_for_own_ckpt) {
    task_ckpt_t saved; /* store_get leaves its buffer unspecified unless it returns STORE_OK */
    size_t len = 0;
    store_status_t st = store_get(store, task_key(world_rank, t), &saved, sizeof saved, &len);
    if (st == STORE_OK && len == sizeof saved) {
      c = saved;
      resumed = 1;
    }
    if (st != STORE_OK && st != STORE_ERR_NOT_FOUND) return st;
    look_for_own_ckpt = 0;
  }
  if (resumed) {
    *checkpointed = 1;
    say("resumes task %u at subtree %u of %d (%llu solutions in the subtrees done)", t, c.next, n,
        (unsigned long long)c.solutions);
  }
  for (uint32_t col = c.next; col < (uint32_t)n; ++col) {
    uint32_t bit = 1u << col;
    if (!((cols | d1 | d2) & bit)) c.solutions += solve(cols | bit, (d1 | bit) << 1, (d2 | bit) >> 1, 4);
    c.next = col + 1;
    if (c.next == (uint32_t)n) break;
    store_status_t st = store_put(store, task_key(world_rank, t), &c, sizeof c);
    if (st != STORE_OK) return st;
    if (!*checkpointed) ++ckpts_made;
    *checkpointed = 1;
    if (world_rank == kill_rank && mine->tasks_done >= (uint64_t)kill_after && c.next == (uint32_t)n / 2) {
      double died = now();
      store_put(store, DEATH_KEY + (store_key_t)world_rank, &died, sizeof died);
      say("finished %llu tasks (%llu solutions so far) and %u of %d subtrees of task %u; dies now (SIGKILL)",
          (unsigned long long)mine->tasks_done, (unsigned long long)mine->solutions, c.next, n, t);
      raise(SIGKILL);
    }
  }
  *found = c.solutions;
  return STORE_OK;
}

static void add_range(worker_t *w, range_t r) {
  if (r.lo == r.hi) return;
  if (w->nranges == MAX_RANGES) die("too many task ranges", STORE_ERR_NO_MEMORY);
  w->r[w->nranges++] = r;
}

/* ---- failures ------------------------------------------------------------------------------- */

static void set_work(MPI_Comm comm) {
  MPI_Group g, world;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &nalive);
  MPI_Comm_group(comm, &g);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  int *ranks = malloc(sizeof(int) * (size_t)nalive);
  for (int i = 0; i < nalive; ++i) ranks[i] = i;
  free(alive_world);
  alive_world = malloc(sizeof(int) * (size_t)nalive);
  MPI_Group_translate_ranks(g, nalive, ranks, world, alive_world);
  free(ranks);
  MPI_Group_free(&g);
  MPI_Group_free(&world);
  work = comm;
}

static int is_alive(int worker) {
  for (int i = 0; i < nalive; ++i)
    if (alive_world[i] == worker) return 1;
  return 0;
}

/* Adopts the remaining tasks of the dead workers assigned to this survivor. */
static store_status_t adopt(void) {
  for (int d = 0; d < world_size; ++d) {
    if (is_alive(d) || alive_world[d % nalive] != world_rank) continue;
    worker_t dead, mine;
    store_status_t st = load(d, &dead);
    if (st == STORE_ERR_NOT_FOUND) continue; /* between rounds: nothing to adopt */
    if (st != STORE_OK) return st;
    uint32_t moved = remaining(&dead);
    if (moved == 0) {
      if (dead.adopted_by >= 0 && !reported_adoption[d])
        say("dead worker %d's tasks are with worker %d already (store_recover completed that adoption)", d,
            dead.adopted_by);
      reported_adoption[d] = 1;
      continue; /* adopted before, or it had finished */
    }
    if ((st = load(world_rank, &mine)) != STORE_OK) return st;
    /* The checkpoint of the task it was running: its name is not known here, its range is. */
    store_key_t found[MAX_RANGES];
    size_t nfound = 0;
    int more = 0;
    if ((st = store_list(store, task_key(d, 0), task_key(d, UINT32_MAX), found, MAX_RANGES, &nfound, &more)) !=
        STORE_OK)
      return st;
    task_ckpt_t ckpt[MAX_RANGES];
    for (size_t i = 0; i < nfound; ++i) {
      size_t len = 0;
      if ((st = store_get(store, found[i], &ckpt[i], sizeof ckpt[i], &len)) != STORE_OK) return st;
    }
    for (int i = 0; i < dead.nranges; ++i) add_range(&mine, dead.r[i]);
    dead.nranges = 0;
    dead.adopted_by = world_rank;
    if ((st = store_tx_begin(store)) != STORE_OK) return st;
    store_put(store, worker_key(d), &dead, sizeof dead);
    store_put(store, worker_key(world_rank), &mine, sizeof mine);
    for (size_t i = 0; i < nfound; ++i) { /* the task checkpoints move under this worker's keys */
      store_put(store, task_key(world_rank, ckpt[i].task), &ckpt[i], sizeof ckpt[i]);
      store_delete(store, found[i]);
    }
    if ((st = store_tx_commit(store)) != STORE_OK) {
      say("the adoption of worker %d's tasks was cut short by a failure: store_recover will finish or undo it", d);
      return st;
    }
    for (size_t i = 0; i < nfound && nadopted < MAX_RANGES; ++i) adopted_ckpts[nadopted++] = ckpt[i];
    reported_adoption[d] = 1;
    say("adopted the %u remaining tasks of dead worker %d (its %llu solutions so far are kept)", moved, d,
        (unsigned long long)dead.solutions);
    for (size_t i = 0; i < nfound; ++i)
      say("adopted dead worker %d's task %u in progress: %u of %d subtrees done, %llu solutions in them", d,
          ckpt[i].task, ckpt[i].next, n, (unsigned long long)ckpt[i].solutions);
  }
  return STORE_OK;
}

static void recover(const char *where, store_status_t why) {
  double noticed = now();
  say("%s: %s -> store_recover", where, store_strerror(why));
  if (ask_req != MPI_REQUEST_NULL) { /* the receive of steal requests, on the old communicator */
    MPI_Cancel(&ask_req);
    MPI_Wait(&ask_req, MPI_STATUS_IGNORE);
    ask_req = MPI_REQUEST_NULL;
  }
  for (;;) {
    MPI_Comm fresh = MPI_COMM_NULL;
    double start = now();
    store_status_t st;
    while ((st = store_recover(store, &fresh)) == STORE_ERR_RECOVER_AGAIN) say("another process failed: again");
    if (st != STORE_OK) die("store_recover", st);
    ++recoveries;
    store_recovery_t rep;
    store_recovery_init(&rep);
    store_last_recovery(store, &rep);
    if (work != MPI_COMM_WORLD) MPI_Comm_free(&work);
    set_work(fresh);
    say("store_recover took %.1f ms: %d survivors, %d failed, %llu of %llu keys repaired, %.1f KiB moved, "
        "%llu keys lost",
        (now() - start) * 1e3, rep.survivors, rep.failed, (unsigned long long)rep.keys_repaired,
        (unsigned long long)rep.keys, (double)rep.bytes_moved / 1024, (unsigned long long)rep.lost_count);
    if (rep.lost_count != 0) die("checkpoints were lost", STORE_ERR_DATA_LOST);
    for (int d = 0; d < world_size; ++d) {
      double died = 0;
      size_t len = 0;
      if (is_alive(d) || reported[d]) continue;
      reported[d] = 1;
      if (store_get(store, DEATH_KEY + (store_key_t)d, &died, sizeof died, &len) == STORE_OK)
        say("worker %d died at %.3f s: noticed here %.1f ms later", d, died, (noticed - died) * 1e3);
    }
    if (world_rank == kill2_rank) {
      double died = now(); /* transaction mode: puts only inside a transaction */
      store_tx_begin(store);
      store_put(store, DEATH_KEY + (store_key_t)world_rank, &died, sizeof died);
      store_tx_commit(store);
      say("dies now, inside the recovery (SIGKILL)");
      raise(SIGKILL);
    }
    look_for_own_ckpt = 1;
    /* In transaction mode: the adoption is one transaction per dead worker. */
    if ((st = adopt()) == STORE_OK) st = store_back_to_normal(store);
    if (st == STORE_OK) return;
    if (st != STORE_ERR_PROC_FAILED) die("adoption", st);
    noticed = now();
    say("another process failed during the recovery: recovering again");
  }
}

/* ---- stealing ------------------------------------------------------------------------------- */

/* Answers pending steal requests: half of this worker's largest range goes to the thief, in one
 * transaction over both workers' keys. Returns STORE_OK or a failure status. */
static store_status_t serve(worker_t *mine) {
  for (;;) {
    if (ask_req == MPI_REQUEST_NULL) MPI_Irecv(&ask_buf, 1, MPI_INT, MPI_ANY_SOURCE, TAG_ASK, work, &ask_req);
    int got = 0;
    MPI_Status status;
    /* An error here is a failure: the caller recovers. */
    if (MPI_Test(&ask_req, &got, &status) != MPI_SUCCESS) return STORE_ERR_PROC_FAILED;
    if (!got) return STORE_OK;
    int thief = ask_buf, gave = 0, best = -1;
    for (int i = 0; i < mine->nranges; ++i)
      if (best < 0 || mine->r[i].hi - mine->r[i].lo > mine->r[best].hi - mine->r[best].lo) best = i;
    if (best >= 0 && mine->r[best].hi - mine->r[best].lo >= 2) {
      worker_t other;
      store_status_t st = load(thief, &other);
      if (st != STORE_OK) return st;
      uint32_t mid = mine->r[best].lo + (mine->r[best].hi - mine->r[best].lo) / 2;
      range_t given = {mid, mine->r[best].hi};
      worker_t next = *mine;
      next.r[best].hi = mid;
      add_range(&other, given);
      if ((st = store_tx_begin(store)) != STORE_OK) return st;
      store_put(store, worker_key(world_rank), &next, sizeof next);
      store_put(store, worker_key(thief), &other, sizeof other);
      if ((st = store_tx_commit(store)) != STORE_OK) return st;
      *mine = next;
      gave = (int)(given.hi - given.lo);
    }
    MPI_Send(&gave, 1, MPI_INT, status.MPI_SOURCE, TAG_ANSWER, work);
  }
}

/* True when every task is done: the workers' task counts add up to all tasks. The counts only
 * grow, so reading the keys one after another can undercount but never overcount. (Reading
 * whether each key still holds tasks could: a steal may move tasks from a key not read yet to
 * one read already.) */
static store_status_t all_done(int *done) {
  uint64_t finished = 0;
  for (int w = 0; w < world_size; ++w) {
    worker_t s;
    store_status_t st = load(w, &s);
    if (st != STORE_OK) return st;
    finished += s.tasks_done;
  }
  *done = finished == round_tasks(round_no);
  return STORE_OK;
}

/* An idle worker asks a random other worker for tasks, serving requests while it waits. Sets
 * *got to the number of tasks received (they are in this worker's key already). */
static store_status_t steal(worker_t *mine, int *got) {
  *got = 0;
  if (nalive < 2) return STORE_OK;
  int victim = rand() % (nalive - 1);
  if (victim >= me) ++victim;
  int answer = 0;
  MPI_Request req;
  MPI_Send(&world_rank, 1, MPI_INT, victim, TAG_ASK, work);
  MPI_Irecv(&answer, 1, MPI_INT, victim, TAG_ANSWER, work, &req);
  for (int polls = 0;; ++polls) {
    int flag = 0;
    if (MPI_Test(&req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) return STORE_ERR_PROC_FAILED; /* victim died */
    if (flag) break;
    store_status_t st = serve(mine);
    if (st == STORE_OK && polls % 1000 == 999) {
      int done = 0;
      st = all_done(&done); /* the victim may have left: nothing is left to steal then */
      if (st == STORE_OK && done) {
        MPI_Cancel(&req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        return STORE_OK;
      }
    }
    if (st != STORE_OK) {
      MPI_Cancel(&req);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
      return st;
    }
  }
  if (answer > 0) {
    store_status_t st = load(world_rank, mine);
    if (st != STORE_OK) return st;
    *got = answer;
  }
  return STORE_OK;
}

/* ---- command line ---------------------------------------------------------------------------- */

static const char usage[] = "usage: task_checkpoint [--n N] [--kill-rank R|-1] [--kill-after T] "
                            "[--kill2-rank R|-1] [--replicas R] [--rounds K] [--snapshot-dir DIR [--restore]]\n";

static void parse_args(int argc, char **argv) {
  enum { OPT_N = 256, OPT_KILL_RANK, OPT_KILL_AFTER, OPT_KILL2_RANK, OPT_REPLICAS, OPT_ROUNDS, OPT_DIR, OPT_RESTORE };
  static const struct option options[] = {{"n", required_argument, NULL, OPT_N},
                                          {"kill-rank", required_argument, NULL, OPT_KILL_RANK},
                                          {"kill-after", required_argument, NULL, OPT_KILL_AFTER},
                                          {"kill2-rank", required_argument, NULL, OPT_KILL2_RANK},
                                          {"replicas", required_argument, NULL, OPT_REPLICAS},
                                          {"rounds", required_argument, NULL, OPT_ROUNDS},
                                          {"snapshot-dir", required_argument, NULL, OPT_DIR},
                                          {"restore", no_argument, NULL, OPT_RESTORE},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  cli_init("task_checkpoint", usage, world_rank);
  for (int c; (c = getopt_long(argc, argv, ":h", options, NULL)) != -1;) {
    switch (c) {
    case OPT_N:
      n = int_arg("--n", optarg, 4, 14);
      break;
    case OPT_KILL_RANK:
      kill_rank = int_arg("--kill-rank", optarg, -1, INT_MAX);
      break;
    case OPT_KILL_AFTER:
      kill_after = int_arg("--kill-after", optarg, 0, INT_MAX);
      break;
    case OPT_KILL2_RANK:
      kill2_rank = int_arg("--kill2-rank", optarg, -1, INT_MAX);
      break;
    case OPT_REPLICAS:
      replicas = int_arg("--replicas", optarg, 1, INT_MAX);
      break;
    case OPT_ROUNDS:
      rounds = int_arg("--rounds", optarg, 1, 1000);
      break;
    case OPT_DIR:
      snapshot_dir = optarg;
      break;
    case OPT_RESTORE:
      restore = 1;
      break;
    default:
      cli_other(c, argv);
    }
  }
  cli_no_operands(argc, argv);
  if (restore && snapshot_dir == NULL) usage_error("--restore needs --snapshot-dir");
}

/* ---- main ----------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  /* Steal requests travel on MPI_COMM_WORLD until the first failure: a send to a dead worker
   * must return an error, not abort the job. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  parse_args(argc, argv);
  if (n < 4 || n > 14 || world_size < 2 || kill_rank >= world_size || kill2_rank >= world_size ||
      (kill_rank >= 0 && kill_rank == kill2_rank)) {
    usage_error("needs 4 <= N <= 14, 2 or more processes, and distinct victims");
  }
  if (kill_rank < 0) kill2_rank = -1; /* a death inside a recovery needs a recovery */
  srand((unsigned)world_rank * 7919u + 1u);
  reported = calloc((size_t)world_size, 1);
  reported_adoption = calloc((size_t)world_size, 1);
  t0 = wall();
  MPI_Bcast(&t0, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);

  store_config_t cfg;
  store_config_init(&cfg);
  cfg.replicas = replicas < world_size ? replicas : world_size;
  cfg.snapshot_dir = snapshot_dir;
  cfg.restore = restore;
  store_status_t st = store_init(MPI_COMM_WORLD, &cfg, &store);
  if (st != STORE_OK) die("store_init", st);
  set_work(MPI_COMM_WORLD);
  const uint32_t tasks = (uint32_t)(n * n * n);
  progress_t prog = {0, 0};
  size_t plen = 0;
  st = store_get(store, PROGRESS_KEY, &prog, sizeof prog, &plen);
  if (st != STORE_OK && st != STORE_ERR_NOT_FOUND) die("store_get of the progress", st);
  if (world_rank == 0) {
    say("N=%d: %u tasks in %d round(s) on %d workers, %d copies of every checkpoint; worker %d dies after %d "
        "tasks%s",
        n, tasks, rounds, world_size, cfg.replicas, kill_rank, kill_after,
        kill2_rank >= 0 ? ", another inside the recovery" : "");
    if (kill_rank < 0) say("no failure injected");
    if (restore) {
      store_info_t info;
      store_info_init(&info);
      store_get_info(store, &info);
      say("restored snapshot %llu of %s: %llu of %d rounds done, %llu solutions in them",
          (unsigned long long)info.restored_snapshot, snapshot_dir, (unsigned long long)prog.rounds_done, rounds,
          (unsigned long long)prog.solutions);
    }
  }

  int steals = 0, stolen = 0;
  uint64_t done_here = 0;
  for (round_no = (uint32_t)prog.rounds_done; round_no < (uint32_t)rounds; ++round_no) {
    /* The round's tasks, split among the live workers by the first of them, in one transaction:
     * every worker's key exists before any worker steals. */
    for (;;) {
      worker_t w;
      st = me == 0 ? load(world_rank, &w) : STORE_OK;
      if (st == STORE_ERR_NOT_FOUND) {
        if ((st = store_tx_begin(store)) == STORE_OK) {
          for (int i = 0; i < world_size; ++i) {
            memset(&w, 0, sizeof w);
            w.adopted_by = -1;
            for (int k = 0; k < nalive; ++k) {
              if (alive_world[k] != i) continue;
              add_range(&w,
                        (range_t){round_lo(round_no) + round_tasks(round_no) * (uint32_t)k / (uint32_t)nalive,
                                  round_lo(round_no) + round_tasks(round_no) * (uint32_t)(k + 1) / (uint32_t)nalive});
            }
            store_put(store, worker_key(i), &w, sizeof w);
          }
          st = store_tx_commit(store);
        }
      }
      if (st == STORE_OK && MPI_Barrier(work) != MPI_SUCCESS) st = STORE_ERR_PROC_FAILED;
      if (st == STORE_OK) break;
      recover("starting a round", st);
    }
    worker_t mine;
    if ((st = load(world_rank, &mine)) != STORE_OK) die("load", st);
    for (;;) {
      st = serve(&mine);
      if (st != STORE_OK) {
        recover("serving a steal", st);
        if ((st = load(world_rank, &mine)) != STORE_OK) die("reload", st);
        continue;
      }
      if (mine.nranges > 0) {
        const uint32_t t = mine.r[mine.nranges - 1].lo;
        uint64_t found = 0;
        int checkpointed = 0;
        st = run_task(&mine, t, &found, &checkpointed);
        worker_t next = mine;
        next.solutions += found;
        next.tasks_done += 1;
        next.r[next.nranges - 1].lo += 1;
        if (next.r[next.nranges - 1].lo == next.r[next.nranges - 1].hi) next.nranges -= 1;
        /* The fold-in: the task's result into the worker's key and its checkpoint gone, at once. */
        if (st == STORE_OK && checkpointed) {
          st = store_tx_begin(store);
          if (st == STORE_OK) {
            store_put(store, worker_key(world_rank), &next, sizeof next);
            store_delete(store, task_key(world_rank, t));
            st = store_tx_commit(store);
          }
          if (st == STORE_OK) ++ckpts_deleted;
        } else if (st == STORE_OK) {
          st = store_put(store, worker_key(world_rank), &next, sizeof next);
        }
        if (st != STORE_OK) {
          recover("checkpoint", st);
          if ((st = load(world_rank, &mine)) != STORE_OK) die("reload", st);
          continue;
        }
        mine = next;
        continue;
      }
      int got = 0;
      st = steal(&mine, &got);
      if (st == STORE_OK && got > 0) {
        ++steals;
        stolen += got;
        continue;
      }
      int done = 0;
      if (st == STORE_OK) st = all_done(&done);
      if (st != STORE_OK) {
        recover("stealing", st);
        if ((st = load(world_rank, &mine)) != STORE_OK) die("reload", st);
        continue;
      }
      if (done) break;
    }
    done_here += mine.tasks_done;
    if (ask_req != MPI_REQUEST_NULL) { /* this round's receive of steal requests */
      MPI_Cancel(&ask_req);
      MPI_Wait(&ask_req, MPI_STATUS_IGNORE);
      ask_req = MPI_REQUEST_NULL;
    }
    /* The round's end: its solutions go into the progress and its workers' keys go, in one
     * transaction by the first live worker; then the snapshot. A failure redoes what is not done:
     * the progress says whether the fold did. */
    for (;;) {
      st = MPI_Barrier(work) == MPI_SUCCESS ? STORE_OK : STORE_ERR_PROC_FAILED;
      progress_t p = prog;
      if (st == STORE_OK) st = store_get(store, PROGRESS_KEY, &p, sizeof p, &plen);
      if (st == STORE_ERR_NOT_FOUND) st = STORE_OK; /* round 0 of a fresh run */
      if (st == STORE_OK && me == 0 && p.rounds_done == round_no) {
        char line[1024] = "";
        p.rounds_done = round_no + 1;
        for (int w = 0; w < world_size && st == STORE_OK; ++w) {
          worker_t s;
          if ((st = load(w, &s)) != STORE_OK) break;
          p.solutions += s.solutions;
          size_t used = strlen(line);
          snprintf(line + used, sizeof line - used, " %d:%llu%s", w, (unsigned long long)s.tasks_done,
                   is_alive(w) ? "" : "(dead)");
        }
        if (st == STORE_OK && (st = store_tx_begin(store)) == STORE_OK) {
          store_put(store, PROGRESS_KEY, &p, sizeof p);
          for (int w = 0; w < world_size; ++w) store_delete(store, worker_key(w));
          st = store_tx_commit(store);
        }
        if (st == STORE_OK) say("round %u of %d done, tasks per worker:%s", round_no + 1, rounds, line);
      }
      if (st == STORE_OK && MPI_Barrier(work) != MPI_SUCCESS) st = STORE_ERR_PROC_FAILED;
      if (st == STORE_OK) st = store_get(store, PROGRESS_KEY, &prog, sizeof prog, &plen);
      uint64_t snap = 0;
      if (st == STORE_OK && snapshot_dir != NULL) st = store_snapshot(store, &snap);
      if (st == STORE_OK) {
        if (snap != 0 && me == 0) say("snapshot %llu written after round %u", (unsigned long long)snap, round_no + 1);
        break;
      }
      if (st != STORE_ERR_PROC_FAILED) die("the end of a round", st);
      recover("the end of a round", st);
    }
  }
  /* The result, from the progress the rounds folded their solutions into. */
  const uint64_t total = prog.solutions;
  say("done: %llu tasks of its own, %d steals brought %d tasks", (unsigned long long)done_here, steals, stolen);
  /* Memory: every finished task's checkpoint was deleted, so none is left and the memory the
   * store attached did not grow with the tasks. */
  store_key_t left[4];
  size_t nleft = 0;
  int more = 0;
  /* all_done counts a task done once its fold-in committed, and a commit's values show before it
   * returns (transactions are atomic across failures, not isolated): the checkpoint it deletes
   * may still be in the store. Every worker's last commit returns before the listing. */
  MPI_Barrier(work);
  if ((st = store_list(store, task_key(0, 0), task_key(world_size - 1, UINT32_MAX), left, 4, &nleft, &more)) !=
      STORE_OK)
    die("store_list", st);
  for (size_t i = 0; i < nleft && me == 0; ++i) { /* which task, and what its checkpoint says */
    task_ckpt_t c;
    size_t len = 0;
    st = store_get(store, left[i], &c, sizeof c, &len);
    say("left in the store: worker %d's checkpoint of task %u (%s: subtree %u of %d)", (int)(left[i] >> 40) - 1,
        (unsigned)(left[i] & 0xffffffffu), store_strerror(st), st == STORE_OK ? c.next : 0, n);
  }
  store_info_t info;
  store_info_init(&info);
  store_get_info(store, &info);
  uint64_t sums[3] = {ckpts_made, ckpts_deleted, info.local_copies}, sum[3];
  uint64_t maxes[2] = {info.attached_bytes, (uint64_t)info.attached_regions}, max[2];
  MPI_Reduce(sums, sum, 3, MPI_UINT64_T, MPI_SUM, 0, work);
  MPI_Reduce(maxes, max, 2, MPI_UINT64_T, MPI_MAX, 0, work);
  int ok = total == known[n] && nleft == 0;
  if (me == 0) {
    /* Flat: what is left is the workers' own keys and the death records (a few copies each), in
     * the first memory region the store attached. Every task checkpoint kept would add copies. */
    int flat = sum[2] <= (uint64_t)(2 * world_size * cfg.replicas) && max[1] <= 1;
    say("task checkpoints: %llu made and %llu deleted by the survivors, %zu left in the store; memory %s: "
        "%llu copies held in all, at most %.0f KiB attached per process in %llu region(s)",
        (unsigned long long)sum[0], (unsigned long long)sum[1], nleft, flat ? "flat" : "GREW",
        (unsigned long long)sum[2], (double)max[0] / 1024, (unsigned long long)max[1]);
    say("result: %llu solutions for N=%d, failure-free count %llu: %s (%d failure(s) survived)",
        (unsigned long long)total, n, (unsigned long long)known[n], ok ? "CORRECT" : "WRONG", world_size - nalive);
  }
  MPI_Barrier(work);
  if ((st = store_finalize(&store)) != STORE_OK) die("store_finalize", st);
  if (work != MPI_COMM_WORLD) MPI_Comm_free(&work);
  free(alive_world);
  free(reported);
  free(reported_adoption);
  MPI_Finalize();
  return ok ? 0 : 1;
}
