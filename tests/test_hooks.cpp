// store_key_holders (include/rmastore/store_hooks.h), the hook through which benchmarks aim at
// the processes that hold a key's copies.
//
// Checked with 1 to 3 copies: its argument checks; that the list has min(replicas, processes)
// distinct ranks of the store's communicator, in placement order (before any failure, ranks are
// placement's process ids), and is the same on every process; and that the copies are where it
// says: after every key was put, each process holds (store_get_info's local_copies) exactly the
// keys whose list names it.
//
// With 3 processes or more, rank 1 then dies (registered with KILLED 1), and:
//   global variant: until store_recover, the list of a key it held still names it; afterwards
//     the lists are in ranks of the communicator store_recover returned (rank 2 is now 1);
//   localized variant: once this process knows of the death, no list names rank 1; after
//     store_recover (a compaction), ranks of the returned communicator;
// and in both, after store_recover, the checks above hold again over the survivors.
//
// The variant comes from RMASTORE_TEST_RECOVERY, as for the other tests.
#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "capi/test_access.hpp"
#include "common/placement.hpp"
#include "rmastore/store_hooks.h"
#include "test_util.hpp"

using namespace rmastore::test;

namespace {

constexpr int kKeys = 48;
constexpr int kCapacity = 8;

// The holders of `key`, or an empty list (and a failed check) if the call fails.
std::vector<int> holders(store_t s, store_key_t key) {
  int ranks[kCapacity];
  int count = -1;
  const store_status_t st = store_key_holders(s, key, ranks, kCapacity, &count);
  CHECK(st == STORE_OK && count >= 0 && count <= kCapacity, "store_key_holders(%llu): %s, count %d",
        (unsigned long long)key, store_strerror(st), count);
  if (st != STORE_OK || count < 0 || count > kCapacity) return {};
  return std::vector<int>(ranks, ranks + count);
}

// Every key's list: min(replicas, size) distinct ranks of comm, the same on every process of comm.
void check_lists(store_t s, MPI_Comm comm, int replicas, const char *when) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  const int want = std::min(replicas, size);
  std::vector<int> mine(static_cast<std::size_t>(kKeys) * kCapacity, -1);
  for (int k = 0; k < kKeys; ++k) {
    const std::vector<int> h = holders(s, static_cast<store_key_t>(k));
    CHECK(static_cast<int>(h.size()) == want, "%s: key %d has %zu holders, expected %d", when, k, h.size(), want);
    std::vector<int> sorted = h;
    std::sort(sorted.begin(), sorted.end());
    CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(), "%s: key %d lists a holder twice", when, k);
    for (int r : h) CHECK(r >= 0 && r < size, "%s: key %d names rank %d of %d", when, k, r, size);
    std::copy(h.begin(), h.end(), mine.begin() + static_cast<std::ptrdiff_t>(k) * kCapacity);
  }
  std::vector<int> all(mine.size() * static_cast<std::size_t>(size));
  CHECK(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_INT, all.data(), static_cast<int>(mine.size()),
                      MPI_INT, comm) == MPI_SUCCESS,
        "%s: MPI_Allgather", when);
  for (int p = 0; p < size; ++p) {
    CHECK(std::equal(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(p) * mine.size()),
          "%s: the lists of rank %d differ from this rank's", when, p);
  }
}

// Every key was put and no put is under way: this process holds exactly the keys whose list
// names it (its rank in the store's current communicator).
void check_copies(store_t s, int me, const char *when) {
  int listed = 0;
  for (int k = 0; k < kKeys; ++k) {
    const std::vector<int> h = holders(s, static_cast<store_key_t>(k));
    if (std::find(h.begin(), h.end(), me) != h.end()) ++listed;
  }
  store_info_t info;
  store_info_init(&info);
  CHECK(store_get_info(s, &info) == STORE_OK, "%s: store_get_info", when);
  CHECK(info.local_copies == static_cast<std::uint64_t>(listed), "%s: %llu copies here, %d keys list rank %d", when,
        (unsigned long long)info.local_copies, listed, me);
}

// Each key is put by one process, then all meet.
void put_keys(store_t s, int rank, int np) {
  for (int k = 0; k < kKeys; ++k) {
    if (k % np != rank) continue;
    const std::vector<std::byte> v = make_value(static_cast<std::uint64_t>(k), 1, 100);
    CHECK(store_put(s, static_cast<store_key_t>(k), v.data(), v.size()) == STORE_OK, "put %d", k);
  }
  CHECK(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS, "MPI_Barrier");
}

void check_arguments(int np) {
  const int r = std::min(2, np);
  store_t s = make_store(r);
  CHECK(s != nullptr, "store_init");
  if (s == nullptr) return;
  int ranks[kCapacity], count = -1;
  CHECK(store_key_holders(nullptr, 1, ranks, kCapacity, &count) == STORE_ERR_HANDLE, "NULL store");
  CHECK(store_key_holders(s, 1, ranks, kCapacity, nullptr) == STORE_ERR_ARG, "NULL count");
  CHECK(store_key_holders(s, 1, ranks, -1, &count) == STORE_ERR_ARG, "negative capacity");
  CHECK(store_key_holders(s, 1, nullptr, 1, &count) == STORE_ERR_ARG, "NULL ranks with capacity 1");
  // Capacity 0 queries the number.
  count = -1;
  CHECK(store_key_holders(s, 1, nullptr, 0, &count) == STORE_ERR_TRUNCATED && count == r,
        "query: count %d, expected %d", count, r);
  const std::vector<int> full = holders(s, 1);
  if (r >= 2 && full.size() == static_cast<std::size_t>(r)) {
    // Too small: the first holders, and the number needed.
    ranks[0] = ranks[1] = -7;
    count = -1;
    CHECK(store_key_holders(s, 1, ranks, 1, &count) == STORE_ERR_TRUNCATED && count == r, "capacity 1: count %d",
          count);
    CHECK(ranks[0] == full[0] && ranks[1] == -7, "capacity 1 wrote %d, %d (first holder %d)", ranks[0], ranks[1],
          full[0]);
    CHECK(store_key_holders(s, 1, ranks, r, &count) == STORE_OK && count == r, "capacity %d: count %d", r, count);
  }
  // Keys never put have holders too.
  CHECK(holders(s, 0xfedcba9876543210ULL).size() == static_cast<std::size_t>(r), "a key never put");
  store_t stale = s;
  CHECK(store_finalize(&s) == STORE_OK, "store_finalize");
  CHECK(store_key_holders(stale, 1, ranks, kCapacity, &count) == STORE_ERR_HANDLE, "finalized store");
}

void check_failure(int rank, int np) {
  const bool localized = test_recovery() == STORE_RECOVERY_LOCALIZED;
  constexpr int kReplicas = 2;
  constexpr int victim = 1;
  store_t s = make_store(kReplicas);
  CHECK(s != nullptr, "store_init");
  if (s == nullptr) MPI_Abort(MPI_COMM_WORLD, 2);
  put_keys(s, rank, np);
  // A key the victim holds a copy of.
  int aimed = -1;
  for (int k = 0; k < kKeys && aimed < 0; ++k) {
    const std::vector<int> h = holders(s, static_cast<store_key_t>(k));
    if (std::find(h.begin(), h.end(), victim) != h.end()) aimed = k;
  }
  CHECK(aimed >= 0, "no key has a copy on rank %d", victim);
  if (rank == 0) expect_deaths({"own-hand@" + std::to_string(victim)});
  CHECK(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS, "MPI_Barrier");
  if (rank == victim) die_by_own_hand("after the keys were put");

  const auto deadline = std::chrono::steady_clock::now() + scaled(30000);
  if (!localized) {
    // Wait until a get reports the death (every survivor reads the same key: gets may overlap,
    // puts to one key may not), then the list still names the dead process.
    std::vector<std::byte> buf(200);
    store_status_t st = STORE_OK;
    while (std::chrono::steady_clock::now() < deadline) {
      std::size_t len = 0;
      st = store_get(s, static_cast<store_key_t>(aimed), buf.data(), buf.size(), &len);
      if (st != STORE_OK) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHECK(st == STORE_ERR_PROC_FAILED, "a get after the death returned %s", store_strerror(st));
    const std::vector<int> h = holders(s, static_cast<store_key_t>(aimed));
    CHECK(std::find(h.begin(), h.end(), victim) != h.end(), "before store_recover the list left the dead rank out");
  } else {
    store_info_t info;
    store_info_init(&info);
    while (std::chrono::steady_clock::now() < deadline) {
      store_get_info(s, &info);
      if (info.failed_processes > 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHECK(info.failed_processes == 1, "%d failed processes known", info.failed_processes);
    for (int k = 0; k < kKeys; ++k) {
      const std::vector<int> h = holders(s, static_cast<store_key_t>(k));
      CHECK(static_cast<int>(h.size()) == std::min(kReplicas, np - 1), "key %d: %zu holders after the death", k,
            h.size());
      CHECK(std::find(h.begin(), h.end(), victim) == h.end(), "key %d still lists the dead rank", k);
      for (int r : h) CHECK(r >= 0 && r < np, "key %d names rank %d", k, r);
    }
  }

  MPI_Comm comm = MPI_COMM_NULL;
  store_status_t rs;
  do {
    rs = store_recover(s, &comm);
  } while (rs == STORE_ERR_RECOVER_AGAIN);
  CHECK(rs == STORE_OK, "store_recover: %s", store_strerror(rs));
  if (rs != STORE_OK) MPI_Abort(MPI_COMM_WORLD, 3);
  int me = -1;
  MPI_Comm_rank(comm, &me);
  CHECK(me == (rank > victim ? rank - 1 : rank), "rank %d after the recovery, was %d", me, rank);
  check_lists(s, comm, kReplicas, "after store_recover");
  check_copies(s, me, "after store_recover");
  MPI_Barrier(comm);
  CHECK(store_finalize(&s) == STORE_OK, "store_finalize");
  MPI_Comm_free(&comm);
}

} // namespace

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int rank = world_rank(), np = world_size();

  check_arguments(np);
  for (int r = 1; r <= std::min(3, np); ++r) {
    store_t s = make_store(r);
    CHECK(s != nullptr, "store_init with %d copies", r);
    if (s == nullptr) MPI_Abort(MPI_COMM_WORLD, 2);
    const std::string when = std::to_string(r) + " copies";
    check_lists(s, MPI_COMM_WORLD, r, when.c_str());
    // Placement order: with no failure, process ids are ranks.
    const auto placement = rmastore::internal::impl(s)->placement();
    for (int k = 0; k < kKeys; ++k) {
      std::vector<int> ids(static_cast<std::size_t>(placement->replicas()));
      placement->holders(static_cast<std::uint64_t>(k), ids);
      CHECK(holders(s, static_cast<store_key_t>(k)) == ids, "%s: key %d is not listed in placement order", when.c_str(),
            k);
    }
    put_keys(s, rank, np);
    check_copies(s, rank, when.c_str());
    CHECK(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS, "MPI_Barrier");
    CHECK(store_finalize(&s) == STORE_OK, "store_finalize");
  }
  if (np >= 3) check_failure(rank, np);

  write_verdict(check_failures == 0);
  MPI_Finalize();
  return check_failures == 0 ? 0 : 1;
}
