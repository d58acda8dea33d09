/*
 * rmastore: a resilient, replicated, in-memory key-value store for MPI applications.
 *
 * Every value is held as `replicas` copies on distinct processes (on distinct nodes when the job
 * spans enough nodes). Copies live in slots of one dynamic MPI RMA window and are written with
 * one-sided puts; a helper thread per process serves slot allocation and keeps MPI progressing.
 *
 * Conventions used in the documentation of every call:
 *   Collective  - every process of the store's communicator must call it, in the same order
 *                 relative to other collective calls on the same store.
 *   Local       - needs no matching call on other processes.
 *   Thread use  - a store handle may be used from any thread. Calls on one handle are
 *                 serialised internally: concurrent calls are safe, but each waits until the
 *                 call before it returned, also when that is a collective call waiting for
 *                 other processes. Collective calls must still reach every process in the same
 *                 order: an application that makes them from several threads orders them.
 *
 * All calls return a store_status_t. None of them aborts the process, throws, or lets an MPI error
 * escape: MPI errors are reported as STORE_ERR_MPI. store_strerror() names every status.
 *
 * MPI must be initialised with MPI_THREAD_MULTIPLE, and the job started with
 * `mpirun --with-ft ulfm` (see README.md and docs/).
 *
 * Process failures (docs/failures.md): no call waits without bound on a process that died.
 * Two recovery variants, chosen at store_init (store_config_t::recovery):
 *   STORE_RECOVERY_GLOBAL (default): once this process knows that a process of the store
 *     failed, or that another process started store_recover, store_put, store_get,
 *     store_tx_begin, store_tx_commit (with a transaction open; else STORE_ERR_TX_STATE) and
 *     store_finalize return STORE_ERR_PROC_FAILED, and store_back_to_normal returns it when its
 *     collective meets the failure (possibly on some processes only). store_recover,
 *     store_get_mode, store_get_info, store_last_recovery and store_tx_abort are unaffected.
 *     This lasts until store_recover returns STORE_OK on this process; all survivors must call
 *     it. It rebuilds the store on the survivors and restores every key to its full number of
 *     copies.
 *   STORE_RECOVERY_LOCALIZED: calls carry on through failures. Puts and gets go to the surviving
 *     copies, and each process's repair thread restores the lost copies in the background;
 *     store_recover is optional (it compacts the store onto the survivors).
 * Either way, keys of which every copy was lost are reported, never silently dropped.
 */
#ifndef RMASTORE_STORE_H
#define RMASTORE_STORE_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STORE_API_VERSION_MAJOR 0
#define STORE_API_VERSION_MINOR 2

/*
 * Link names. Every function declared below is exported as rmastore_<its name>
 * (rmastore_store_put, ...): checkpoint code often has a store_put or store_init of its own, and
 * a program that defines one in code that does not include this header still links and calls
 * the right function on each side. Code that includes this header writes the names below and
 * reaches the prefixed symbols; code without the header (dlsym, Fortran's bind(C)) names the
 * prefixed symbols, and calls rmastore_store_init_version with STORE_API_VERSION_MAJOR and
 * _MINOR, as store_init (inline, not exported) does.
 * GCC, Clang and the compilers built on them take an asm label (as glibc's __REDIRECT does).
 * Other compilers get macros, which also rename any identifier of these names (a C++ member
 * function store_get, say) in every file that includes this header, and only there.
 */
#if defined(__GNUC__) || defined(__clang__)
#define RMASTORE_NAME_STR_(x) #x
#define RMASTORE_NAME_STR(x) RMASTORE_NAME_STR_(x)
#ifdef __USER_LABEL_PREFIX__
#define RMASTORE_NAME(name) __asm__(RMASTORE_NAME_STR(__USER_LABEL_PREFIX__) "rmastore_" #name)
#else
#define RMASTORE_NAME(name) __asm__("rmastore_" #name)
#endif
#else
#define RMASTORE_NAME(name)
#define store_config_init rmastore_store_config_init
#define store_strerror rmastore_store_strerror
#define store_init_version rmastore_store_init_version
#define store_put rmastore_store_put
#define store_get rmastore_store_get
#define store_delete rmastore_store_delete
#define store_put_many rmastore_store_put_many
#define store_get_many rmastore_store_get_many
#define store_list rmastore_store_list
#define store_put_nb rmastore_store_put_nb
#define store_test rmastore_store_test
#define store_wait rmastore_store_wait
#define store_finalize rmastore_store_finalize
#define store_recover rmastore_store_recover
#define store_snapshot rmastore_store_snapshot
#define store_snapshot_start rmastore_store_snapshot_start
#define store_snapshot_wait rmastore_store_snapshot_wait
#define store_snapshot_flush_wait rmastore_store_snapshot_flush_wait
#define store_restore_lost rmastore_store_restore_lost
#define store_get_mode rmastore_store_get_mode
#define store_back_to_normal rmastore_store_back_to_normal
#define store_tx_begin rmastore_store_tx_begin
#define store_tx_commit rmastore_store_tx_commit
#define store_tx_abort rmastore_store_tx_abort
#define store_recovery_init_size rmastore_store_recovery_init_size
#define store_last_recovery rmastore_store_last_recovery
#define store_info_init rmastore_store_info_init
#define store_get_info rmastore_store_get_info
#define store_key_holders rmastore_store_key_holders
#define store_key_keepers rmastore_store_key_keepers
#endif

/** Opaque handle to a store. NULL is never a valid store. */
typedef struct store_handle *store_t;

/** A key. Any 64-bit value is a valid key. */
typedef uint64_t store_key_t;

/**
 * Status of every call. STORE_OK is zero, errors are negative. The numeric values are part of the
 * ABI and never change; new codes get new numbers.
 */
typedef enum store_status {
  STORE_OK = 0,
  /** An argument is invalid: a NULL buffer with a non-zero length, a NULL out-pointer, a
   *  replica count out of range, MPI_COMM_NULL, ... */
  STORE_ERR_ARG = -1,
  /** The handle is NULL or was already finalized. */
  STORE_ERR_HANDLE = -2,
  /** The key has never been put. */
  STORE_ERR_NOT_FOUND = -3,
  /** The caller's buffer is smaller than the value; the needed length was returned. */
  STORE_ERR_TRUNCATED = -4,
  /** store_init: the processes passed different configurations. */
  STORE_ERR_CONFIG_MISMATCH = -5,
  /** store_init: MPI is not initialised with MPI_THREAD_MULTIPLE on every process. */
  STORE_ERR_THREAD_LEVEL = -6,
  /** MPI is not initialised, or already finalized (or being finalized). */
  STORE_ERR_MPI_STATE = -7,
  /** An MPI call failed for a reason other than a process failure. */
  STORE_ERR_MPI = -8,
  /** Memory for a slot or internal state could not be allocated, here or at a holder of the
   *  key. This includes running out of window regions: MPI limits the memory regions one process
   *  attaches to a window (Open MPI: MCA parameter osc_rdma_max_attach, default 64). Regions
   *  double in size as the store grows (up to 16 GiB each), so the limit is reached only after
   *  hundreds of GiB per process; then puts that need a new slot there return this status (at
   *  once, never waiting), while keys whose slots are big enough can still be put. */
  STORE_ERR_NO_MEMORY = -9,
  /** The value is larger than STORE_MAX_VALUE_SIZE. */
  STORE_ERR_TOO_LARGE = -10,
  /** The header the caller was compiled with is incompatible with this library. */
  STORE_ERR_VERSION = -11,
  /** store_init or store_recover: the call failed on another process (it rejected its
   *  arguments, or hit an error such as STORE_ERR_NO_MEMORY or STORE_ERR_MPI; see its own
   *  status). */
  STORE_ERR_PEER = -12,
  /** An internal invariant was violated; please report it. */
  STORE_ERR_INTERNAL = -13,
  /** A process of the store failed, or another process started store_recover. The call may
   *  have been partly done; every surviving process must now call store_recover. */
  STORE_ERR_PROC_FAILED = -14,
  /** store_recover: another process failed during the recovery. Call store_recover again. */
  STORE_ERR_RECOVER_AGAIN = -15,
  /** Every copy of this key was lost to failures. A new put stores the key again. */
  STORE_ERR_DATA_LOST = -16,
  /** Not allowed in the store's current mode (see store_mode_t): after store_recover, puts
   *  must be inside a transaction until store_back_to_normal. */
  STORE_ERR_MODE = -17,
  /** store_tx_*: no transaction is open, or one is open already. */
  STORE_ERR_TX_STATE = -18,
  /** store_snapshot, or store_init with restore: the file system refused (a full disk, a missing
   *  or read-only directory, ...). Nothing in memory is lost, and a snapshot that failed is never
   *  loaded. The process whose file system refused prints the file and the reason on standard
   *  error. */
  STORE_ERR_IO = -19,
  /** store_init with restore: snapshot_dir holds a snapshot of a format this library cannot
   *  read (a newer one). */
  STORE_ERR_SNAPSHOT_FORMAT = -20,
  /** store_snapshot, or store_init with restore: snapshot_dir holds snapshots of another data
   *  set (their snapshot_name differs). Nothing is written, removed or loaded. */
  STORE_ERR_SNAPSHOT_OTHER = -21
} store_status_t;

/** Lowest status value, for iterating over all of them. */
#define STORE_STATUS_MIN STORE_ERR_SNAPSHOT_OTHER

/** How a store learns that a process failed (store_config_t::detector). */
typedef enum store_detector {
  /** Default. The helper thread keeps a receive from any process posted on a private
   *  communicator; ULFM completes it with an error when a process fails. Every call checks
   *  the resulting failure set locally, with no communication. */
  STORE_DETECTOR_NOTIFY = 0,
  /** The paper's workaround, for comparison: like NOTIFY, plus a message ("ping") to every
   *  target before each RMA operation, which fails at once if the target is known dead. */
  STORE_DETECTOR_PING = 1,
  /** No detection: a call aimed at a dead process may wait forever. For measuring the cost of
   *  detection only. */
  STORE_DETECTOR_OFF = 2
} store_detector_t;

/** How the store handles process failures (store_config_t::recovery; docs/failures.md). */
typedef enum store_recovery_kind {
  /** Default. A failure stops the store: every survivor calls store_recover, which rebuilds it.
   *  Puts to one key from different processes must not overlap (store_put). Transaction mode
   *  after recovery (store_mode_t). A repeat put whose value fits its granted slots is purely
   *  one-sided. */
  STORE_RECOVERY_GLOBAL = 0,
  /** No global stop. Every put takes a lock on each copy's slot (a word in window memory, set by
   *  the holder's threads), so puts to one key may overlap; a lock held by a failed process is
   *  broken by a repair that rolls the value back or forward. Puts and gets use the surviving
   *  copies; the repair thread of each process re-creates lost copies in the background. A
   *  process's first put of a key costs a lock round trip more than in the global variant; it
   *  keeps the locks, so its repeat puts are one-sided until another process locks the key
   *  (docs/localized.md). Needs a failure detector (not STORE_DETECTOR_OFF). */
  STORE_RECOVERY_LOCALIZED = 1
} store_recovery_kind_t;

/** Largest value the store accepts, in bytes (4 GiB - 1). */
#define STORE_MAX_VALUE_SIZE ((size_t)0xFFFFFFFFu)

/**
 * Configuration for store_init. Always initialise it with store_config_init(), then change the
 * fields you need: new fields are added at the end with defaults, so code written against an older
 * header keeps working.
 *
 * Every field except node_id must be equal on all processes. A struct_size larger than this
 * library's store_config_t (a config from a newer header) gives STORE_ERR_ARG.
 */
typedef struct store_config {
  /** Set by store_config_init to sizeof(store_config_t); lets the library know which fields the
   *  caller's header had. Do not change it. */
  size_t struct_size;
  /** Number of copies of each value, 1 <= replicas <= number of processes. Default 2. */
  int replicas;
  /** Capacity of a key's slot when it is first created, in bytes; larger values get a larger
   *  slot. Rounded up to a power of two, at least 8. Default 64. */
  size_t initial_slot_size;
  /** Expected bytes of values held per process; sizes the first memory region attached to the
   *  window. Only a hint: the store grows as needed. At most 1 TiB. Default 1 MiB. */
  size_t capacity_hint;
  /** Node of this process, for placing copies on distinct nodes. -1 (default): group processes
   *  by MPI_Comm_split_type(MPI_COMM_TYPE_SHARED). A value >= 0 overrides the grouping, e.g. to
   *  simulate several nodes on one machine; its value differs across processes, but either all
   *  processes pass -1 or all pass a value >= 0. */
  int node_id;
  /** Longest time in microseconds the helper thread sleeps when nothing happens. Processes on
   *  the same node wake it when they need it; processes on other nodes wait up to this long for
   *  it to serve a slot request (and, over TCP, a put, while the application thread computes).
   *  Lower values cost CPU: ~3 % of a core at 1000 (docs/benchmarks.md). 0 means "never
   *  sleep" (a full core per process). Default 1000. */
  int helper_max_sleep_us;
  /** Failure detector, a store_detector_t. Default STORE_DETECTOR_NOTIFY. */
  int detector;
  /** Recovery variant, a store_recovery_kind_t. Default STORE_RECOVERY_GLOBAL. */
  int recovery;
  /** Directory of the durable tier: store_snapshot writes snapshots there, and store_init with
   *  `restore` reads the newest complete one. Visible to every process under the same name (a
   *  shared file system). NULL (default): no snapshots. The same string on every process. */
  const char *snapshot_dir;
  /** Complete snapshots kept in snapshot_dir: older ones are removed once a newer one is
   *  complete. At least 1. Default 2. */
  int snapshot_keep;
  /** Nonzero: store_init loads the newest complete snapshot in snapshot_dir (see store_snapshot),
   *  whatever the number of processes that wrote it. Default 0. */
  int restore;
  /** The name of the data set, written into every snapshot: store_snapshot and restore refuse
   *  a snapshot_dir that holds complete snapshots of another name (STORE_ERR_SNAPSHOT_OTHER),
   *  so that two applications that share a directory never load or remove each other's.
   *  1-64 characters of [A-Za-z0-9._-], the first a letter or digit; NULL or "" (default): no
   *  name, which matches only snapshots without one. The same string on every process. */
  const char *snapshot_name;
  /** A second, faster level below snapshot_dir, as SCR's cache: a directory on each node's own
   *  storage (a local disk, /dev/shm). store_snapshot then writes the parts there, and a thread
   *  of each process copies its part to snapshot_dir in the background (the flush); the
   *  snapshot can be restored only once its flush is complete (store_snapshot_flush_wait).
   *  "%h" is replaced by the host's name, so that simulated hosts, or a shared path, get a
   *  directory per node. It must exist, and must be neither snapshot_dir nor another store's
   *  local level. Each process keeps its part of the newest flushed snapshot there, and removes
   *  older ones when a call waits for a newer flush (store_finalize does not). NULL (default):
   *  one level, snapshot_dir. The same string on every process; needs snapshot_dir
   *  (STORE_ERR_ARG otherwise, or if the two strings are equal). */
  const char *snapshot_local_dir;
} store_config_t;

/** Fills *config with defaults. Local. Returns STORE_ERR_ARG if config is NULL. */
store_status_t store_config_init(store_config_t *config) RMASTORE_NAME(store_config_init);

/** A static message for every status, never NULL. Unknown values give "unknown status". Local. */
const char *store_strerror(store_status_t status) RMASTORE_NAME(store_strerror);

/**
 * Creates a store over `comm`. Collective over comm.
 *
 * The store duplicates comm, so the caller may free comm afterwards. `config` may be NULL for
 * defaults; every field but node_id must be equal on all processes.
 *
 * Errors are reported on every process: if any process passes a bad replica count, a
 * mismatching configuration, or runs with a thread level below MPI_THREAD_MULTIPLE, all
 * processes return an error (the process at fault its own reason, the others STORE_ERR_PEER or
 * the shared reason) and *store is set to NULL. Exceptions, because they cannot be collective:
 * STORE_ERR_ARG for store == NULL or comm == MPI_COMM_NULL, STORE_ERR_MPI_STATE when MPI is not
 * initialised, and STORE_ERR_VERSION.
 *
 * With config->restore, the store is filled from the newest complete snapshot in
 * config->snapshot_dir (see store_snapshot), whatever the number of processes that wrote it;
 * incomplete or damaged snapshots are skipped and counted in store_info_t::snapshots_skipped.
 * STORE_ERR_IO (the directory cannot be read), STORE_ERR_SNAPSHOT_FORMAT (a newer format) and
 * STORE_ERR_SNAPSHOT_OTHER (the newest complete snapshot has another snapshot_name) are then
 * returned on every process alike, and no store is created.
 *
 * Side effect: if SIGPIPE is at its default action, store_init sets it to ignored. Open MPI's
 * TCP transport writes to the connection of a process that died without suppressing SIGPIPE,
 * which would end the survivor (docs/operations.md). A handler the application installed is
 * left alone; it must return for the process to survive a host failure.
 */
store_status_t store_init_version(MPI_Comm comm, const store_config_t *config, store_t *store, int api_major,
                                  int api_minor) RMASTORE_NAME(store_init_version);

/** store_init_version with the version of the header the caller compiles against. */
static inline store_status_t store_init(MPI_Comm comm, const store_config_t *config, store_t *store) {
  return store_init_version(comm, config, store, STORE_API_VERSION_MAJOR, STORE_API_VERSION_MINOR);
}

/**
 * Stores `len` bytes from `buf` under `key`, replacing any previous value. Local.
 *
 * Returns only when every copy is written in the memory of its holder (remote completion), so a
 * value whose put returned STORE_OK is readable by any process. (MPI promises only local
 * completion of a request-based put; rmastore relies on Open MPI's osc/rdma, which completes
 * one when the target acknowledged it: docs/design.md.) len may be 0 (buf may then be
 * NULL). The value may grow or shrink from one put to the next.
 *
 * Global variant: no other process may put the same key at the same time; puts to one key from
 * different processes must be ordered by the application (e.g. by a barrier or a message). After
 * a failure it returns STORE_ERR_PROC_FAILED until store_recover.
 *
 * Localized variant: puts to one key may overlap; they are serialised by the slot locks, and the
 * key ends with one of the values. When a process fails, a put goes to the key's surviving and
 * new holders and returns STORE_OK once they are written (a holder that fails during the put is
 * left to the background repair). It returns STORE_ERR_PROC_FAILED only once another process
 * started store_recover, or after retrying for 30 s without this process learning of a new
 * failure.
 */
store_status_t store_put(store_t store, store_key_t key, const void *buf, size_t len) RMASTORE_NAME(store_put);

/**
 * Copies the latest complete value of `key` into buf. Local.
 *
 * On STORE_OK, *len is the value's length. If the value is longer than `capacity`, returns
 * STORE_ERR_TRUNCATED, sets *len to the needed length and leaves buf unspecified; capacity 0
 * with buf NULL queries the length this way. On any status but STORE_OK the contents of buf are
 * unspecified: a value is read straight into it and checked there. STORE_ERR_NOT_FOUND if the key was never put,
 * STORE_ERR_DATA_LOST if every copy was lost to failures. Reads the cheapest copy to reach (a
 * local one if there is one). Never returns a torn value: a get that races with a put returns
 * either the old or the new value. Localized variant: reads a surviving copy when a holder
 * failed; returns STORE_ERR_PROC_FAILED only as store_put does.
 */
store_status_t store_get(store_t store, store_key_t key, void *buf, size_t capacity, size_t *len)
    RMASTORE_NAME(store_get);

/**
 * Deletes `key`: removes every copy, in every process's memory. Local.
 *
 * Returns STORE_OK once no copy of the key can be read any more: a store_get anywhere then
 * returns STORE_ERR_NOT_FOUND (not STORE_ERR_DATA_LOST), until a later store_put stores the key
 * again. Deleting a key that does not exist, or whose every copy was lost, returns STORE_OK (a
 * lost key then reads as not found). The memory of the key's copies is reused by later puts.
 *
 * It is a write: in the global variant it must not overlap a put or delete of the same key from
 * another process (as for store_put), and in transaction mode it must be inside a transaction
 * (STORE_ERR_MODE otherwise). Inside a transaction it is part of the transaction: the key is
 * deleted at the commit, all or nothing with the transaction's puts, and a store_get of it on
 * this process meanwhile returns STORE_ERR_NOT_FOUND.
 *
 * Under failures it behaves like store_put: it never waits on a dead process. If it returns
 * STORE_ERR_PROC_FAILED (global variant: every call does until store_recover), the key ends up
 * either deleted or with its old value. A delete that returned STORE_OK is never undone by a
 * recovery or repair: no stale copy brings the key back.
 */
store_status_t store_delete(store_t store, store_key_t key) RMASTORE_NAME(store_delete);

/**
 * Puts `count` values at once: keys[i] gets lens[i] bytes from bufs[i]. Local.
 *
 * The same as `count` calls of store_put (each value written at every copy before the call
 * returns, the same rules for overlapping writers and modes, inside a transaction part of it),
 * with their round trips overlapped: write grants or locks are asked for all keys in one round,
 * every value is written before any write is waited for, and first puts record their keys in one
 * round. The keys must be distinct (STORE_ERR_ARG otherwise, before anything is written);
 * bufs[i] may be NULL when lens[i] is 0. count 0 does nothing.
 *
 * Returns STORE_OK when every value was put. On an error (STORE_ERR_PROC_FAILED,
 * STORE_ERR_NO_MEMORY, ...) each key holds either its old or its new value, as after a store_put
 * that returned that error.
 */
store_status_t store_put_many(store_t store, size_t count, const store_key_t *keys, const void *const *bufs,
                              const size_t *lens) RMASTORE_NAME(store_put_many);

/**
 * Gets `count` values at once. Local. For each i, the same as
 * statuses[i] = store_get(store, keys[i], bufs[i], capacities[i], &lens[i]), with the round trips
 * of all the keys overlapped (lookups in one round, then every first read before any is waited
 * for). Keys may repeat.
 *
 * Returns STORE_OK when every key was read; statuses[i] then says what store_get would have
 * returned for it (STORE_OK, STORE_ERR_NOT_FOUND, STORE_ERR_DATA_LOST, STORE_ERR_TRUNCATED). An
 * error of the call itself (STORE_ERR_PROC_FAILED in the global variant, ...) leaves statuses,
 * lens and the buffers unspecified.
 */
store_status_t store_get_many(store_t store, size_t count, const store_key_t *keys, void *const *bufs,
                              const size_t *capacities, size_t *lens, store_status_t *statuses)
    RMASTORE_NAME(store_get_many);

/**
 * Lists keys the store holds in [first, last], smallest first. Local.
 *
 * Fills keys[0..*count) with at most `capacity` keys, ascending and distinct: every key in the
 * range that has a value or whose every copy was lost (store_get returns STORE_OK, or
 * STORE_ERR_DATA_LOST), never a deleted one. *more is 1 when keys above keys[*count - 1] may
 * remain in the range: call again with first = keys[*count - 1] + 1. So a survivor finds the keys
 * of a dead worker whose names it does not know, if the application gave them a range.
 *
 * Cost: a message to every process of the store per call (not O(replicas) like the other
 * calls), each answering with at most `capacity` keys (at most 4096 per call are listed). It is
 * no snapshot: keys put or deleted meanwhile may or may not be listed. Global variant: returns
 * STORE_ERR_PROC_FAILED after a failure, as store_get does; localized: asks the survivors.
 * STORE_ERR_ARG if keys, count or more is NULL, capacity is 0, or first > last.
 */
store_status_t store_list(store_t store, store_key_t first, store_key_t last, store_key_t *keys, size_t capacity,
                          size_t *count, int *more) RMASTORE_NAME(store_list);

/** A nonblocking put in progress (store_put_nb). */
typedef struct store_request *store_request_t;

/**
 * Starts a put of `len` bytes from `buf` under `key` and returns at once. Local.
 *
 * The put runs in the background, on a thread of the store, or at the latest inside the next
 * call on the same handle: calls on one handle take effect in the order they were made, so a
 * store_get or store_put of the key afterwards sees this put done. Puts started one after the
 * other run as batches (store_put_many). `buf` must stay valid and unchanged until the put is
 * complete. *request receives a handle that store_test or store_wait completes and frees.
 *
 * The put itself has store_put's contract and statuses, which store_test or store_wait return.
 * store_put_nb returns STORE_ERR_ARG, STORE_ERR_TOO_LARGE, STORE_ERR_HANDLE or
 * STORE_ERR_MPI_STATE at once; a put still queued when the store is finalized runs first, one
 * queued when MPI_Finalize stops the store completes with STORE_ERR_MPI_STATE.
 */
store_status_t store_put_nb(store_t store, store_key_t key, const void *buf, size_t len, store_request_t *request)
    RMASTORE_NAME(store_put_nb);

/**
 * Whether the put of *request is complete. Local, never waits. If it is not, sets *done to 0 and
 * returns STORE_OK. If it is, sets *done to 1, frees the request, sets *request to NULL and
 * returns the put's status (what store_put would have returned).
 */
store_status_t store_test(store_request_t *request, int *done) RMASTORE_NAME(store_test);

/**
 * Waits until the put of *request is complete, frees the request, sets *request to NULL and
 * returns the put's status. Local; it waits as long as store_put would (bounded under failures).
 */
store_status_t store_wait(store_request_t *request) RMASTORE_NAME(store_wait);

/**
 * Frees the store and everything it holds. Collective over the store's communicator (its
 * surviving processes, in the localized variant). Sets *store to NULL. A NULL *store gives
 * STORE_ERR_HANDLE. It returns STORE_ERR_PROC_FAILED in the global variant after a process
 * failure that store_recover has not handled or when a process dies during the call, in both
 * variants after another process started store_recover; the handle is dead then. After failures, what cannot be freed
 * without the failed processes (the window and the memory attached to it) is left to
 * MPI_Finalize.
 *
 * MPI_Finalize with stores still open (a forgotten store_finalize, an application leaving
 * through an error path) is allowed: at its start, each open store is finalized as
 * store_finalize would, newest store first. Like MPI_Finalize itself, that is collective: the
 * store keeps serving the other processes until each has reached MPI_Finalize or
 * store_finalize for it, so their calls still in flight complete. Failures are handled as in
 * store_finalize. From then on every call on the store returns STORE_ERR_MPI_STATE;
 * store_finalize sets *store to NULL and returns STORE_ERR_MPI_STATE. As for any collective
 * call, the order must match: a process that calls store_finalize for some stores and leaves
 * others to MPI_Finalize must do so in an order that the other processes follow too (simplest:
 * finalize explicitly either every store or none), and MPI_Finalize waits for every process
 * of each such store, as it would for the processes of the job.
 *
 * Memory: a store_init/store_finalize cycle keeps 64 bytes, the dead handle (so that stale
 * copies of it get STORE_ERR_HANDLE). Under `mpirun --with-ft ulfm`, Open MPI 5.0.7 itself keeps
 * about 2.2 KB more per window created (one per store_init, one per store_recover that lost a
 * process): it warns that osc/rdma is untested after failures, and its help-message delivery
 * never frees two PMIx arrays (docs/api.md).
 */
store_status_t store_finalize(store_t *store) RMASTORE_NAME(store_finalize);

/**
 * Rebuilds the store on the surviving processes after a failure. Collective over the survivors
 * of the store's communicator: every one of them must call it.
 *
 * Steps: revoke the store's communicators, shrink them, agree on the survivors (repeating while
 * further processes fail), retire the old window without flushing, unlocking or freeing it (an
 * Open MPI defect, docs/failures.md), create a new window on the survivors and attach each
 * survivor's slot memory again (a call that lost no process keeps its window), then
 * re-replicate:
 * every key whose copies were on failed processes gets new copies from a surviving one, so
 * that it has `replicas` copies again. Only lost copies move.
 *
 * On STORE_OK, *new_comm (if not NULL) receives a new communicator over the survivors, in the
 * same order as before, for the application to use; the caller frees it. new_comm must be NULL
 * on every survivor or on none: making the communicator is collective. store_last_recovery
 * describes what happened, including the keys of which every copy was lost.
 *
 * STORE_ERR_RECOVER_AGAIN: another process failed meanwhile, at any step; call store_recover
 * again (on every survivor). Once the survivors have shrunk the store's communicator, every one
 * of them gets the same status: all end the attempt in one agreement. A death during the shrink
 * is handled inside it (shrink and agreement repeat), unless MPIX_Comm_shrink itself returns an
 * error: the survivors it returned that error to get STORE_ERR_RECOVER_AGAIN. Any number of
 * further failures is handled this way; what was already restored stays restored. Nothing is
 * lost as long as each key kept at least one copy. Until a store_recover returns STORE_OK,
 * store_put, store_get, store_tx_begin, store_tx_commit and store_finalize return
 * STORE_ERR_PROC_FAILED.
 *
 * Another error (STORE_ERR_NO_MEMORY, STORE_ERR_MPI, ...) on one survivor: that survivor returns
 * it and every other survivor STORE_ERR_PEER. The store can then only be finalized.
 *
 * Survivors that do not see the same set of survivors (MPIX_Comm_shrink gave them different
 * communicators) are never rebuilt on: each of them gets STORE_ERR_MPI, from this and every later
 * call, and store_finalize abandons the store (docs/failures.md).
 *
 * Data that a process wrote before it failed, and that is still in flight, never lands in
 * memory that recovery reused: slots a failed process could write are retired, not reused.
 *
 * Localized variant: optional, never needed for correctness. It compacts: the survivors first
 * meet in a barrier (point to point among the processes not known to have failed, so that none
 * is left inside a put), then the steps above run, which also finish every background repair.
 * The store stays in normal mode.
 */
store_status_t store_recover(store_t store, MPI_Comm *new_comm) RMASTORE_NAME(store_recover);

/**
 * Writes a snapshot of every value in the store to the configuration's snapshot_dir, for a
 * later job to restore (store_config_t::restore), and returns its number in *snapshot (may be
 * NULL). Collective over the store's processes; it returns when the snapshot is complete, with
 * the same status on every process.
 *
 * The snapshot holds every put and delete that returned on any process before that process
 * called store_snapshot, and no later one: between the calls no process may put or delete (the
 * calls are collective, so an application thread that calls it does neither). Each value is
 * written once, by the first of its holders, with a checksum; the snapshot counts only once
 * every process's part is on disk (fsync) and the manifest that names them is renamed into
 * place. Older snapshots are removed once this one is complete, keeping snapshot_keep.
 *
 * STORE_ERR_ARG: no snapshot_dir was configured, or a snapshot started with
 * store_snapshot_start is in flight. STORE_ERR_TX_STATE: a transaction is open.
 * STORE_ERR_SNAPSHOT_OTHER: snapshot_dir holds a complete snapshot of another snapshot_name;
 * STORE_ERR_SNAPSHOT_FORMAT: one of a format this library cannot read. Then nothing is written
 * or removed.
 * STORE_ERR_IO: a process could not write its part (a full disk, a read-only or missing
 * directory); the snapshot is not complete and never loaded, and nothing in memory is lost.
 * STORE_ERR_PROC_FAILED: a process failed before or during the call (localized variant too: a
 * snapshot needs every key's first holder); the snapshot is not complete unless its manifest
 * was written, and every survivor must call store_recover before the next one.
 */
store_status_t store_snapshot(store_t store, uint64_t *snapshot) RMASTORE_NAME(store_snapshot);

/**
 * store_snapshot in two halves, so that puts and gets go on while the files are written.
 * store_snapshot_start takes the cut and returns: every process copies the values it will write
 * into memory (as much memory again as its share of the store), and no process returns before
 * every one has, so the snapshot holds exactly what store_snapshot would. A thread of each
 * process then writes and syncs its part. store_snapshot_wait waits for the parts and writes the
 * manifest; the snapshot counts only once it returns STORE_OK. Both collective, with the same
 * status on every process; *snapshot (may be NULL) gets the snapshot's number.
 *
 * Between the two calls the application may put, get, delete and use transactions; another
 * store_snapshot or store_snapshot_start is refused (STORE_ERR_ARG), as is store_snapshot_wait
 * without a start. store_recover and store_finalize abandon a snapshot in flight (it is never
 * loaded; the next snapshot removes its files). store_snapshot_start returns the statuses of
 * store_snapshot but STORE_ERR_IO for writing, which store_snapshot_wait returns (and
 * STORE_ERR_PROC_FAILED if a process failed meanwhile: call store_recover, then start again).
 */
store_status_t store_snapshot_start(store_t store, uint64_t *snapshot) RMASTORE_NAME(store_snapshot_start);
store_status_t store_snapshot_wait(store_t store) RMASTORE_NAME(store_snapshot_wait);

/**
 * With snapshot_local_dir (two levels): store_snapshot and store_snapshot_wait return once every
 * part is durable in the local level, and the snapshot is not yet in snapshot_dir: a thread of
 * each process copies its part there (a temporary name, fsync, rename), and rank 0's thread
 * writes the manifest once it sees every part. A whole job killed before then restarts from the
 * previous complete snapshot; a flush that completes needs no further call.
 *
 * store_snapshot_flush_wait waits until the flush in flight, if any, is complete, and sets
 * *snapshot (may be NULL) to the newest snapshot this store completed in snapshot_dir (0: none).
 * With one level it returns at once, once this process has removed its share of the files of the
 * snapshots the last one dropped (snapshot_keep). Collective, with the same status on every
 * process. The next store_snapshot or store_snapshot_start, and store_restore_lost, wait for the
 * flush the same way first. store_finalize lets it end without a collective: the snapshot is
 * complete if rank 0 then sees every part. store_recover abandons it (complete only if every part
 * had arrived).
 *
 * STORE_ERR_IO: a process could not copy its part (that process prints why on standard error);
 * the snapshot is not complete in snapshot_dir and stays in the local level (only if the final
 * sync of the directory failed after every part was in place may it be complete). The next
 * store_snapshot or store_snapshot_start returns this status in its place, without taking a
 * snapshot; store_restore_lost and store_finalize go on (the failing process prints why).
 * STORE_ERR_PROC_FAILED: a process failed. STORE_ERR_ARG: no snapshot_dir.
 */
store_status_t store_snapshot_flush_wait(store_t store, uint64_t *snapshot) RMASTORE_NAME(store_snapshot_flush_wait);

/**
 * Brings back, from the newest complete snapshot in snapshot_dir, the keys whose every copy was
 * lost in this job (more failures at once than copies). Collective over the store's processes,
 * with the same status on every process; call it when no failure is pending (after
 * store_recover returned STORE_OK, as for store_snapshot). It is allowed in the global variant's
 * transaction mode: each key either keeps its state or gets the snapshot's value, so a call cut
 * short by a failure leaves nothing half done, and the next call (after store_recover) finishes.
 *
 * A key comes back if some process's store_last_recovery lists it as lost, it still reads as
 * lost (STORE_ERR_DATA_LOST) when this call looks, and the snapshot holds it. Its value is then
 * the snapshot's, older than the one that was lost: the call says which snapshot (*snapshot, 0
 * when nothing was lost or there is no snapshot) and which keys. A key put or deleted since its
 * loss is left alone, a key deleted before its loss is not lost and never comes back, and a lost
 * key the snapshot does not hold (first put after it) stays lost.
 *
 * keys[0 .. min(*count, capacity)) receives the keys brought back, ascending, and *count their
 * number: the same on every process (keys may be NULL when capacity is 0; snapshot may be NULL).
 *
 * STORE_ERR_ARG: no snapshot_dir, or count NULL, or keys NULL with capacity > 0.
 * STORE_ERR_TX_STATE: a transaction is open. STORE_ERR_PROC_FAILED: a process failed before or
 * during the call: call store_recover, then this again. STORE_ERR_IO, STORE_ERR_SNAPSHOT_FORMAT,
 * STORE_ERR_SNAPSHOT_OTHER: as for store_init with restore; nothing was put.
 */
store_status_t store_restore_lost(store_t store, uint64_t *snapshot, store_key_t *keys, size_t capacity, size_t *count)
    RMASTORE_NAME(store_restore_lost);

/**
 * Modes of a store. The paper this design follows keeps the application's own recovery
 * procedure, which runs after store_recover, from leaving the store half-updated if another
 * failure strikes meanwhile:
 *   STORE_MODE_NORMAL: puts, gets and transactions.
 *   STORE_MODE_TRANSACTION: gets and transactions; a put outside a transaction returns
 *     STORE_ERR_MODE. store_recover enters this mode; store_back_to_normal leaves it.
 * The localized variant has no modes: it is always in STORE_MODE_NORMAL, and
 * store_back_to_normal is local there: it only returns STORE_ERR_TX_STATE if this process has a
 * transaction open.
 */
typedef enum store_mode { STORE_MODE_NORMAL = 0, STORE_MODE_TRANSACTION = 1 } store_mode_t;

/** The store's mode on this process. Local. */
store_status_t store_get_mode(store_t store, store_mode_t *mode) RMASTORE_NAME(store_get_mode);

/** Leaves transaction mode. Global variant: collective over the store's communicator; if any
 *  process has a transaction open, every process returns STORE_ERR_TX_STATE and nothing
 *  changes; STORE_ERR_PROC_FAILED if the collective meets a failure (possibly on some processes
 *  only). Localized variant: local; STORE_ERR_TX_STATE only if this process has a transaction
 *  open. */
store_status_t store_back_to_normal(store_t store) RMASTORE_NAME(store_back_to_normal);

/**
 * Transactions: all or nothing, across process failures. Local (no matching calls elsewhere);
 * one open transaction per process and store.
 *
 * Between store_tx_begin and store_tx_commit, store_put only records the value in the
 * transaction (it is copied; the caller's buffer may be reused); store_get of such a key on this
 * process returns the recorded value, other processes still see the old one.
 *
 * store_tx_commit makes all of the transaction's values visible at every copy, or none of them:
 * if the committing process, or holders of some copies, fail at any point of the commit, the
 * next store_recover completes the transaction (rolls it forward) if it had reached its commit
 * point, and discards it (rolls back) otherwise; store_last_recovery says how many values went
 * each way. store_tx_commit returns STORE_OK (committed), or STORE_ERR_PROC_FAILED (a process
 * failed; the outcome is decided by store_recover). Either way the transaction is closed.
 * store_tx_abort discards an open transaction.
 *
 * Localized variant: the commit holds the locks of all its keys from before the first value is
 * written until the last is, so concurrent puts of those keys come before or after it. Holders
 * that fail during the commit do not stop it (it returns STORE_OK). If the committer fails, the
 * background repair of each key rolls the transaction forward or back, deciding once, from the
 * committer's decision record.
 *
 * Concurrent readers of the transaction's keys on other processes may see some new values
 * before the commit returns: the guarantee is atomicity across failures, not isolation.
 */
store_status_t store_tx_begin(store_t store) RMASTORE_NAME(store_tx_begin);
store_status_t store_tx_commit(store_t store) RMASTORE_NAME(store_tx_commit);
store_status_t store_tx_abort(store_t store) RMASTORE_NAME(store_tx_abort);

/** What the last store_recover that returned STORE_OK did (an attempt that returned anything
 *  else changes nothing here). Fill with store_recovery_init before store_last_recovery. */
typedef struct store_recovery {
  size_t struct_size;
  /** Processes after the recovery, and processes lost since store_init or the recovery before
   *  (over all its attempts). */
  int survivors, failed;
  /** Keys the store knows, and keys of which some copy was re-created. */
  uint64_t keys, keys_repaired;
  /** Bytes of copies that were on failed processes (or damaged), and bytes sent to re-create
   *  them. */
  uint64_t bytes_lost, bytes_moved;
  /** Keys of which every copy was lost: their number, and the keys in ascending order (owned
   *  by the store; do not read lost_keys when lost_count is 0, it may be NULL).
   *  Global variant: every key that had no copy left at the end of that recovery, including
   *  keys lost earlier and not put since; the same on every survivor. The array stays valid
   *  until the next store_recover that returns STORE_OK, or store_finalize on this handle.
   *  Localized variant: every store_last_recovery call rebuilds the array, so it stays valid
   *  only until the next store_last_recovery (from any thread), store_recover or
   *  store_finalize on this handle. Copy it to keep it. */
  uint64_t lost_count;
  const store_key_t *lost_keys;
  /** Seconds the successful attempt spent in: revoke, shrink and agreement; freeing and
   *  creating the window; re-replication. Then seconds from the start of the first attempt to
   *  the end of the successful one. */
  double shrink_seconds, window_seconds, rereplicate_seconds, total_seconds;
  /** Number of store_recover calls it took (more than 1 if processes failed during it). */
  int attempts;
  /** Values of interrupted transactions completed (committed, rolled forward) and discarded
   *  (not committed, rolled back), counted per key. */
  uint64_t tx_rolled_forward, tx_rolled_back;
  /** Bytes copied within survivors out of the slots a failed process held a write grant or
   *  lock for (it may have had a put in flight): each such copy moves to fresh memory, and the
   *  old memory is never reused. Since the previous successful store_recover (or store_init):
   *  in the localized variant this includes the repairs done in the background. Not part of
   *  bytes_moved. */
  uint64_t bytes_quarantined;
} store_recovery_t;

/** Zeroes the first `size` bytes of *report and sets struct_size = size (at least
 *  sizeof(size_t), at most the library's sizeof(store_recovery_t): else STORE_ERR_ARG). Local.
 *  Code without this header (dlsym, Fortran's bind(C)) calls rmastore_store_recovery_init_size
 *  with the size of its own declaration of the struct. */
store_status_t store_recovery_init_size(store_recovery_t *report, size_t size) RMASTORE_NAME(store_recovery_init_size);

/** Fills *report with zeros and the struct_size of the header the caller compiles against.
 *  Inline, so that a program built against an older header, with a shorter struct, never has
 *  the library write past its end. Local. */
static inline store_status_t store_recovery_init(store_recovery_t *report) {
  return store_recovery_init_size(report, sizeof *report);
}

/** Describes the last successful store_recover on this process. Local.
 *  Localized variant: what store_recover did if it was called, else zeros; lost_count and
 *  lost_keys then list the keys the last store_recover found lost, plus the keys the
 *  background repair reported lost and those a get on this process found lost, until this
 *  process puts or deletes them (a put by another process does not take a key off this
 *  process's list, and a repair's notice that arrives after this process's put may list the key
 *  again). The list may differ between processes, but it holds every key for which a store_get
 *  or store_get_many on this process returned STORE_ERR_DATA_LOST. */
store_status_t store_last_recovery(store_t store, store_recovery_t *report) RMASTORE_NAME(store_last_recovery);

/** Runtime information about a store. Fill with store_info_init before store_get_info. */
typedef struct store_info {
  size_t struct_size;
  /** Number of processes and this process's rank in the store's communicator. */
  int size, rank;
  int replicas;
  /** Number of distinct nodes the store sees (after node_id overrides). */
  int nodes;
  /** Copies held by this process, and the bytes of values in them. */
  uint64_t local_copies, local_bytes;
  /** Bytes of memory attached to the window by this process, and number of regions (at most
   *  the MPI library's limit, see STORE_ERR_NO_MEMORY). */
  uint64_t attached_bytes;
  int attached_regions;
  /** CPU seconds used by this process's helper thread so far. */
  double helper_cpu_seconds;
  /** Slots this process allocated or enlarged (moved) for writers, its own puts included. */
  uint64_t enlargements_served;
  /** Requests this process sent to other processes' helpers and waited for (slot requests,
   *  lookups, locks, witness records, lists); those it answered itself are not counted. A put whose
   *  value fits the slots it was granted before sends none. */
  uint64_t requests_sent;
  /** Processes of the store this process knows to have failed (since the last store_recover). */
  int failed_processes;
  /** Localized variant: slots this process's repair thread still has to bring back to their
   *  full number of copies (0 when it is idle), slots it repaired and bytes it wrote doing so,
   *  since store_init or the last successful store_recover. */
  uint64_t repair_backlog, repaired_slots, repaired_bytes;
  /** The durable tier: the number of the last snapshot this store took (0: none; with two
   *  levels, in the local level: flushed_snapshot says when it is in snapshot_dir); the
   *  snapshot store_init loaded (0: none, or no restore) and the values this process put back
   *  from it; and the newer snapshots store_init skipped because they were incomplete or damaged
   *  (the reasons are printed on standard error). */
  uint64_t last_snapshot, restored_snapshot, restored_keys;
  int snapshots_skipped;
  /** Two levels: the newest snapshot this process knows complete in snapshot_dir (as
   *  store_snapshot_flush_wait sets it); one level: last_snapshot. */
  uint64_t flushed_snapshot;
  /** Two levels: the parts store_init's restore read from snapshot_local_dir (found there whole)
   *  rather than from snapshot_dir. */
  int restored_local_parts;
} store_info_t;

/** Fills *info with its struct_size. Local. */
store_status_t store_info_init(store_info_t *info) RMASTORE_NAME(store_info_init);

/** Fills *info for this process. Local. It does not delay the helper thread, so calling it often
 *  does not slow down other processes' requests. local_copies and local_bytes are counted while
 *  puts may land: they are exact when no put or move of a copy held here is under way, and may
 *  be off by the copies in flight otherwise. */
store_status_t store_get_info(store_t store, store_info_t *info) RMASTORE_NAME(store_get_info);

#ifdef __cplusplus
}
#endif

#endif /* RMASTORE_STORE_H */
