/*
 * rmastore test hooks: what benchmarks and tests need to see inside a store.
 *
 * NOT PART OF THE STABLE API. These calls may change or disappear in any release, without a
 * change of STORE_API_VERSION_MAJOR; applications do not need them (store_put and store_get pick
 * the processes themselves). They are in the installed library so that benchmarks measure the
 * library users link, not a build of their own: store_bench picks keys whose copies all sit on
 * other processes, and aims its raw MPI baseline at the same processes.
 *
 * The conventions of store.h hold: every call returns a store_status_t, never aborts, throws or
 * lets an MPI error escape, and calls on one handle are serialised.
 */
#ifndef RMASTORE_STORE_HOOKS_H
#define RMASTORE_STORE_HOOKS_H

#include <rmastore/store.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Bumped whenever a declaration of this header changes. */
#define STORE_HOOKS_VERSION 3

/**
 * The processes that hold the copies of `key`, as this process sees them. Local: no
 * communication, no message to the helper thread; the key need not have been put (placement
 * is a function of the key and of the store's processes).
 *
 * On STORE_OK, *count is the number of holders and ranks[0..*count) their ranks in the store's
 * communicator (the one given to store_init; after a store_recover that returned STORE_OK, the
 * one it returned), distinct, in placement order (best first; the order every process uses).
 * With no failure known, *count is min(replicas, processes in the store), and every process
 * gets the same list.
 *
 * After a process failure:
 *   Global variant: until store_recover returns STORE_OK on this process, the holders from
 *     before the failure, failed processes included (puts and gets return
 *     STORE_ERR_PROC_FAILED meanwhile). Afterwards, the holders among the survivors, where
 *     store_recover put the copies back.
 *   Localized variant: the processes this process knows to have failed (as counted by
 *     store_info_t::failed_processes) are left out, and the next processes in the key's ranking
 *     take their place: where puts write and the repair thread restores the lost copies. *count
 *     is then min(replicas, live processes). Processes that have not learnt of the same failures
 *     yet may answer differently.
 * It never returns STORE_ERR_PROC_FAILED.
 *
 * Statuses: STORE_ERR_ARG if count is NULL, capacity is negative, or ranks is NULL with capacity
 * above 0. STORE_ERR_TRUNCATED if capacity < *count: *count is set to the number of holders,
 * and ranks[0..capacity) receives the first of them (capacity 0 with ranks NULL queries the
 * number). STORE_ERR_HANDLE and STORE_ERR_MPI_STATE as for every call.
 */
store_status_t store_key_holders(store_t store, store_key_t key, int *ranks, int capacity, int *count)
    RMASTORE_NAME(store_key_holders);

/**
 * The processes that keep something of `key`: its holders, then its witnesses (the processes
 * that record that it exists, docs/failures.md), 2 x replicas of them or as many as there are
 * processes. Local, like store_key_holders, with the same statuses and the same view of
 * failures; the first entries are those store_key_holders returns.
 */
store_status_t store_key_keepers(store_t store, store_key_t key, int *ranks, int capacity, int *count)
    RMASTORE_NAME(store_key_keepers);

#ifdef __cplusplus
}
#endif

#endif /* RMASTORE_STORE_HOOKS_H */
