// store_restore_lost: keys whose every copy died come back from the newest snapshot, reported,
// and nothing else changes.
//
// 5 processes, 2 copies. Keys 1..kOld are put (version 1) and snapshot 1 taken. Then, in memory
// only: keys k % 5 == 0 of them are updated (version 2), keys k % 7 == 0 deleted, and keys
// kOld+1..kAll put (version 1). Ranks 1 and 3 die at once, so the keys with both copies on them
// are lost. After store_recover (premise: some lost key the snapshot holds, and some it does
// not), one lost key is put again and one deleted; then store_restore_lost must bring back
// exactly the other lost keys the snapshot holds, with the snapshot's value (version 1 even where
// version 2 was lost), say snapshot 1, leave the lost keys it does not hold lost, and leave every
// other key as it was: the keys deleted after the snapshot stay deleted.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"

using namespace rmastore::test;

namespace {

constexpr store_key_t kOld = 200; // in the snapshot
constexpr store_key_t kAll = 240; // kOld+1..kAll: put after it
constexpr std::size_t kLen = 300;

// The version a key holds before the failure, 0 if none.
std::uint64_t before_failure(store_key_t k) {
  if (k > kOld) return 1;
  if (k % 7 == 0) return 0;
  return k % 5 == 0 ? 2 : 1;
}

// The key's state as a version: 0 not found, kLost lost, else the version read.
constexpr std::uint64_t kLost = ~std::uint64_t{0};
std::uint64_t state(store_t s, store_key_t k) {
  std::vector<std::byte> buf(kLen);
  std::size_t len = 0;
  const store_status_t st = store_get(s, k, buf.data(), buf.size(), &len);
  if (st == STORE_ERR_NOT_FOUND) return 0;
  if (st == STORE_ERR_DATA_LOST) return kLost;
  std::uint64_t v = 0;
  if (st != STORE_OK || len != kLen || !check_value(k, buf.data(), len, &v)) return kLost - 1; // never expected
  return v;
}

} // namespace

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int rank = world_rank(), size = world_size();
  CHECK(size == 5, "needs 5 processes");
  if (rank == 0) expect_deaths({"own-hand@1", "own-hand@3"});

  // A fresh directory, named by rank 0.
  char dir[256] = {};
  if (rank == 0) {
    std::snprintf(dir, sizeof dir, "%s/rmastore-restore-lost.XXXXXX",
                  std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
    if (::mkdtemp(dir) == nullptr) dir[0] = '\0';
  }
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  CHECK(dir[0] != '\0', "mkdtemp");

  store_config_t cfg;
  store_config_init(&cfg);
  cfg.replicas = 2;
  cfg.recovery = test_recovery();
  cfg.snapshot_dir = dir;
  // RMASTORE_TEST_SNAPSHOT_LOCAL: two levels, the local one in DIR/local. The restore then reads
  // the dead processes' parts there too (one host), after the flush store_restore_lost waits for.
  const std::string local = std::string(dir) + "/local";
  if (std::getenv("RMASTORE_TEST_SNAPSHOT_LOCAL") != nullptr) {
    if (rank == 0) CHECK(::mkdir(local.c_str(), 0755) == 0, "mkdir %s", local.c_str());
    MPI_Barrier(MPI_COMM_WORLD);
    cfg.snapshot_local_dir = local.c_str();
  }
  store_t s = nullptr;
  CHECK(store_init(MPI_COMM_WORLD, &cfg, &s) == STORE_OK, "store_init");
  if (s == nullptr) {
    write_verdict(false);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  const auto mine = [&](store_key_t k) { return static_cast<int>(k % static_cast<store_key_t>(size)) == rank; };
  const auto put = [&](store_key_t k, std::uint64_t v) {
    const std::vector<std::byte> value = make_value(k, v, kLen);
    return store_put(s, k, value.data(), value.size());
  };
  for (store_key_t k = 1; k <= kOld; ++k) {
    if (mine(k)) CHECK(put(k, 1) == STORE_OK, "put of key %llu", (unsigned long long)k);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  std::uint64_t snap = 0;
  CHECK(store_snapshot(s, &snap) == STORE_OK && snap == 1, "store_snapshot: snapshot %llu", (unsigned long long)snap);
  // Nothing to bring back yet: the call reads no snapshot.
  std::size_t count = 99;
  std::uint64_t from = 99;
  CHECK(store_restore_lost(s, &from, nullptr, 0, &count) == STORE_OK && count == 0 && from == 0,
        "store_restore_lost with nothing lost: %zu keys from snapshot %llu", count, (unsigned long long)from);
  if (cfg.snapshot_local_dir != nullptr) {
    // That call waited for the flush: the snapshot is in both levels.
    struct stat st {};
    const std::string part = local + "/snap-0000000001/part-" + std::to_string(rank);
    CHECK(::stat(part.c_str(), &st) == 0, "%s is missing", part.c_str());
    const std::string manifest = std::string(dir) + "/snap-0000000001/MANIFEST";
    CHECK(::stat(manifest.c_str(), &st) == 0, "%s is missing", manifest.c_str());
  }
  for (store_key_t k = 1; k <= kAll; ++k) {
    if (!mine(k)) continue;
    const std::uint64_t v = before_failure(k);
    if (k <= kOld && v == 1) continue;
    CHECK((v == 0 ? store_delete(s, k) : put(k, v)) == STORE_OK, "change of key %llu", (unsigned long long)k);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 1 || rank == 3) die_by_own_hand("two deaths at once: the keys with both copies on them are lost");

  // Until the deaths are known: the global variant's operations report them; the localized
  // variant carries on through them.
  const auto deadline = std::chrono::steady_clock::now() + scaled(20000);
  bool known = false;
  while (!known && std::chrono::steady_clock::now() < deadline) {
    store_info_t info;
    store_info_init(&info);
    known = store_get_info(s, &info) == STORE_OK && info.failed_processes >= 2;
    if (!known) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(known, "the deaths were not reported within the bound");
  store_status_t rs;
  MPI_Comm comm = MPI_COMM_NULL;
  while ((rs = store_recover(s, &comm)) == STORE_ERR_RECOVER_AGAIN) {
  }
  CHECK(rs == STORE_OK, "store_recover: %s", store_strerror(rs));

  // The lost keys, every survivor's list (the localized variant's lists may differ).
  store_recovery_t rep;
  store_recovery_init(&rep);
  CHECK(store_last_recovery(s, &rep) == STORE_OK, "store_last_recovery");
  std::vector<store_key_t> listed(rep.lost_keys, rep.lost_keys + rep.lost_count);
  int n = static_cast<int>(listed.size()), survivors = 0;
  MPI_Comm_size(comm, &survivors);
  std::vector<int> counts(static_cast<std::size_t>(survivors)), displs(counts.size());
  MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, comm);
  for (std::size_t i = 1; i < counts.size(); ++i) displs[i] = displs[i - 1] + counts[i - 1];
  std::vector<store_key_t> all(static_cast<std::size_t>(displs.back() + counts.back()));
  MPI_Allgatherv(listed.data(), n, MPI_UINT64_T, all.data(), counts.data(), displs.data(), MPI_UINT64_T, comm);
  const std::set<store_key_t> lost(all.begin(), all.end());
  std::vector<store_key_t> held, unheld;
  for (store_key_t k : lost) (k <= kOld ? held : unheld).push_back(k);
  CHECK(held.size() >= 3, "premise: %zu lost keys the snapshot holds, 3 needed", held.size());
  CHECK(!unheld.empty(), "premise: no lost key is newer than the snapshot");
  bool lost_v2 = false;
  for (store_key_t k : held) lost_v2 = lost_v2 || before_failure(k) == 2;
  CHECK(lost_v2, "premise: no lost key had a value newer than the snapshot's");
  if (held.size() < 3) {
    write_verdict(false);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  // Since the loss, one lost key is put again and one deleted: both stay as they are.
  const store_key_t reput = held[0], deleted = held[1];
  // (In the global variant's transaction mode after store_recover, inside a transaction.)
  store_mode_t mode = STORE_MODE_NORMAL;
  CHECK(store_get_mode(s, &mode) == STORE_OK, "store_get_mode");
  if (rank == 0) {
    if (mode == STORE_MODE_TRANSACTION) CHECK(store_tx_begin(s) == STORE_OK, "store_tx_begin");
    CHECK(put(reput, 9) == STORE_OK, "put of lost key %llu", (unsigned long long)reput);
    CHECK(store_delete(s, deleted) == STORE_OK, "delete of lost key %llu", (unsigned long long)deleted);
    if (mode == STORE_MODE_TRANSACTION) CHECK(store_tx_commit(s) == STORE_OK, "store_tx_commit");
  }
  MPI_Barrier(comm);

  std::vector<store_key_t> back(kAll);
  count = 0;
  from = 0;
  const store_status_t st = store_restore_lost(s, &from, back.data(), back.size(), &count);
  CHECK(st == STORE_OK, "store_restore_lost: %s", store_strerror(st));
  back.resize(std::min(count, back.size()));
  const std::vector<store_key_t> want(held.begin() + 2, held.end());
  std::vector<store_key_t> sorted_want = want;
  std::sort(sorted_want.begin(), sorted_want.end());
  CHECK(from == 1, "store_restore_lost read snapshot %llu, not 1", (unsigned long long)from);
  CHECK(back == sorted_want, "store_restore_lost brought back %zu keys, expected %zu", back.size(), sorted_want.size());

  // Every key, on every survivor: restored ones hold the snapshot's version; lost keys the
  // snapshot does not hold are still lost; the rest as before the failure.
  const std::set<store_key_t> restored(back.begin(), back.end());
  int wrong = 0;
  for (store_key_t k = 1; k <= kAll; ++k) {
    std::uint64_t expect = before_failure(k);
    if (k == reput)
      expect = 9;
    else if (k == deleted)
      expect = 0;
    else if (restored.count(k) > 0)
      expect = 1;
    else if (lost.count(k) > 0)
      expect = kLost;
    const std::uint64_t got = state(s, k);
    if (got != expect && wrong++ < 10) {
      CHECK(false, "key %llu: state %llu, expected %llu (0 absent, %llu lost)", (unsigned long long)k,
            (unsigned long long)got, (unsigned long long)expect, (unsigned long long)kLost);
    }
  }
  CHECK(wrong == 0, "%d keys wrong", wrong);
  std::printf("rank %d: %zu keys lost, %zu brought back from snapshot %llu, %zu newer than it still lost\n", rank,
              lost.size(), back.size(), (unsigned long long)from, unheld.size());
  std::fflush(stdout);
  CHECK(store_finalize(&s) == STORE_OK, "store_finalize");
  MPI_Barrier(comm);
  if (rank == 0) {
    const std::string rm = std::string("rm -rf '") + dir + "'";
    CHECK(std::system(rm.c_str()) == 0, "removing %s", dir);
  }
  write_verdict(check_failures == 0);
  MPI_Finalize();
  return check_failures == 0 ? 0 : 1;
}
