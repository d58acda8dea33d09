// Fault-injection scenarios: processes are killed with SIGKILL, the survivors must get a
// failure status (never hang), recover, and find every key at its latest committed value with
// its full number of copies; then the store must work on.
//
//   test_failure --replicas R --victims a,b [--killers a] [--kill-at N] [--keys K] [--rounds N]
//                [--tx 1]
//
// With --tx 1, each round of a rank writes all its keys in one transaction, and survivors also
// check atomicity: all keys of a rank must hold the same version.
//
// Victims die either at a library fault point (RMASTORE_FAULT, set by the test registration),
// or, with --kill-at N, by raising SIGKILL themselves before their N-th operation. Every rank
// records in node-shared memory, for each of its keys, the last version whose put returned
// STORE_OK and the version of a put under way, so that survivors can check even a dead
// writer's keys exactly: after recovery a key holds either of the two.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "capi_internal.hpp"
#include "test_util.hpp"

using namespace rmastore::test;
using Clock = std::chrono::steady_clock;

namespace {

int failures = 0;
#define CHECK(cond, ...)                                                                                               \
  do {                                                                                                                 \
    if (!(cond)) {                                                                                                     \
      std::fprintf(stderr, "[rank %d] %s:%d: check failed: %s ", world_rank(), __FILE__, __LINE__, #cond);             \
      std::fprintf(stderr, __VA_ARGS__);                                                                               \
      std::fprintf(stderr, "\n");                                                                                      \
      ++failures;                                                                                                      \
    }                                                                                                                  \
  } while (0)

struct Options {
  int replicas = 2;
  std::vector<int> victims; // every rank that dies in the scenario
  std::vector<int> killers; // those that kill themselves at --kill-at (default: all victims)
  int kill_at = -1;         // op count at which killers die; -1: library fault points do it
  int keys = 12;            // per rank
  int rounds = 6;
  bool tx = false;
};

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--replicas") o.replicas = std::atoi(v.c_str());
    if (a == "--kill-at") o.kill_at = std::atoi(v.c_str());
    if (a == "--keys") o.keys = std::atoi(v.c_str());
    if (a == "--rounds") o.rounds = std::atoi(v.c_str());
    if (a == "--tx") o.tx = std::atoi(v.c_str()) != 0;
    if (a == "--victims" || a == "--killers") {
      std::vector<int> &list = a == "--victims" ? o.victims : o.killers;
      for (std::size_t p = 0; p < v.size();) {
        list.push_back(std::atoi(v.c_str() + p));
        p = v.find(',', p);
        if (p == std::string::npos) break;
        ++p;
      }
    }
  }
  if (o.killers.empty()) o.killers = o.victims;
  return o;
}

// What every rank knows about its own keys, visible to all ranks of the node.
struct KeyRecord {
  std::atomic<std::uint64_t> committed; // last version whose put returned STORE_OK
  std::atomic<std::uint64_t> inflight;  // version of a put under way, 0 if none
};

KeyRecord *shared_records(int ranks, int keys) {
  long id = static_cast<long>(getpid());
  MPI_Bcast(&id, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  const std::string name = "/rmastore-test-failure-" + std::to_string(id);
  const std::size_t bytes = sizeof(KeyRecord) * static_cast<std::size_t>(ranks * keys);
  if (world_rank() == 0) {
    int fd = shm_open(name.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) return nullptr;
    close(fd);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) return nullptr;
  void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) shm_unlink(name.c_str());
  return p == MAP_FAILED ? nullptr : static_cast<KeyRecord *>(p);
}

store_key_t key_of(int rank, int k) {
  return static_cast<store_key_t>(1000000 + rank * 1000 + k);
}

// Value sizes cover both protocols: in place (<= 16 KiB) and double-buffered.
std::size_t length_of(store_key_t key, std::uint64_t version) {
  const std::uint64_t h = key * 2654435761u + version * 40503u;
  switch (h % 4) {
  case 0:
    return 16 + h % 200;
  case 1:
    return 2000 + h % 6000;
  case 2:
    return 20000 + h % 50000;
  default:
    return 100000 + h % 200000;
  }
}

bool in(const std::vector<int> &list, int rank) {
  return std::find(list.begin(), list.end(), rank) != list.end();
}

} // namespace

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const Options opt = parse(argc, argv);
  const int me = world_rank(), p = world_size();
  const auto t_start = Clock::now();
  KeyRecord *rec = shared_records(p, opt.keys);
  CHECK(rec != nullptr, "no shared memory");
  store_t s = make_store(opt.replicas);
  CHECK(s != nullptr, "store_init failed");
  if (rec == nullptr || s == nullptr) {
    write_verdict(false);
    MPI_Finalize();
    return 1;
  }
  auto record = [&](int rank, int k) -> KeyRecord & { return rec[rank * opt.keys + k]; };

  bool failed = false;
  int ops = 0;
  std::vector<std::byte> buf(1 << 20);
  Clock::time_point t_failure{};
  // A process that is to die with others dies as soon as it sees the first failure, so that
  // the failures are (nearly) simultaneous.
  const auto saw_failure = [&] {
    failed = true;
    t_failure = Clock::now();
    if (opt.kill_at >= 0 && in(opt.killers, me)) raise(SIGKILL);
  };

  // Phase 1: every key gets a first value (fault points may already fire here).
  for (int k = 0; k < opt.keys && !failed; ++k) {
    const store_key_t key = key_of(me, k);
    const auto v = make_value(key, 1, length_of(key, 1));
    record(me, k).inflight = 1;
    const store_status_t st = store_put(s, key, v.data(), v.size());
    if (st == STORE_OK) {
      record(me, k).committed = 1;
      record(me, k).inflight = 0;
    } else {
      CHECK(st == STORE_ERR_PROC_FAILED, "first put returned %s", store_strerror(st));
      saw_failure();
    }
  }
  if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS && !failed) saw_failure();

  // Phase 2: overwrite own keys and read other ranks' keys until a failure is reported.
  for (int round = 2; round < 2 + opt.rounds && !failed && opt.tx; ++round) {
    // All keys of this rank in one transaction: after recovery, all or none are new.
    if (opt.kill_at >= 0 && ops == opt.kill_at && in(opt.killers, me)) raise(SIGKILL);
    ++ops;
    const auto version = static_cast<std::uint64_t>(round);
    CHECK(store_tx_begin(s) == STORE_OK, "tx_begin");
    for (int k = 0; k < opt.keys; ++k) {
      const store_key_t key = key_of(me, k);
      const auto v = make_value(key, version, length_of(key, version));
      CHECK(store_put(s, key, v.data(), v.size()) == STORE_OK, "put in a transaction");
      record(me, k).inflight = version;
    }
    const store_status_t st = store_tx_commit(s);
    if (st == STORE_OK) {
      for (int k = 0; k < opt.keys; ++k) {
        record(me, k).committed = version;
        record(me, k).inflight = 0;
      }
    } else {
      CHECK(st == STORE_ERR_PROC_FAILED, "commit returned %s", store_strerror(st));
      saw_failure();
    }
  }
  for (int round = 2; round < 2 + opt.rounds && !failed && !opt.tx; ++round) {
    for (int k = 0; k < opt.keys && !failed; ++k) {
      if (opt.kill_at >= 0 && ops == opt.kill_at && in(opt.killers, me)) raise(SIGKILL);
      ++ops;
      const store_key_t key = key_of(me, k);
      const auto version = static_cast<std::uint64_t>(round);
      const auto v = make_value(key, version, length_of(key, version));
      record(me, k).inflight = version;
      const store_status_t st = store_put(s, key, v.data(), v.size());
      if (st == STORE_OK) {
        record(me, k).committed = version;
        record(me, k).inflight = 0;
      } else {
        CHECK(st == STORE_ERR_PROC_FAILED, "put returned %s", store_strerror(st));
        saw_failure();
        break;
      }
      // A read of another rank's key: any committed or in-flight version of it.
      const int other = (me + round + k) % p;
      size_t len = 0;
      const store_status_t gs = store_get(s, key_of(other, k), buf.data(), buf.size(), &len);
      if (gs == STORE_ERR_PROC_FAILED) {
        saw_failure();
      } else if (gs == STORE_ERR_NOT_FOUND) {
        // Only if its first put never completed.
        CHECK(record(other, k).committed == 0, "get: not found");
      } else {
        std::uint64_t got = 0;
        CHECK(gs == STORE_OK && check_value(key_of(other, k), buf.data(), len, &got), "get: %s", store_strerror(gs));
      }
    }
  }
  // Survivors that finished without noticing the failure keep asking until they do. A call
  // must never hang: the bound here is generous, the measured detection time is milliseconds.
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!failed && Clock::now() < deadline) {
    size_t len = 0;
    const store_status_t gs = store_get(s, key_of(me, 0), buf.data(), buf.size(), &len);
    if (gs == STORE_ERR_PROC_FAILED) saw_failure();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(failed, "no failure was reported within 20 s");

  // Phase 3: recover, again as long as processes fail meanwhile.
  MPI_Comm comm = MPI_COMM_NULL;
  store_status_t rs = STORE_ERR_RECOVER_AGAIN;
  int attempts = 0;
  while (rs == STORE_ERR_RECOVER_AGAIN && attempts < 10) {
    rs = store_recover(s, &comm);
    ++attempts;
  }
  CHECK(rs == STORE_OK, "store_recover: %s after %d attempts", store_strerror(rs), attempts);
  if (rs != STORE_OK) {
    write_verdict(false);
    return 1; // without MPI_Finalize: the others cannot finish with us anyway
  }
  store_recovery_t report;
  store_recovery_init(&report);
  CHECK(store_last_recovery(s, &report) == STORE_OK, "store_last_recovery");
  int survivors = 0;
  MPI_Comm_size(comm, &survivors);
  CHECK(survivors == p - static_cast<int>(opt.victims.size()), "%d survivors", survivors);
  CHECK(report.lost_count == 0, "%llu keys lost with at most r-1 failures", (unsigned long long)report.lost_count);

  // Phase 4: every key of every rank, the victims' included, holds its committed value or the
  // one that was being put, and has its full number of copies on the survivors.
  auto *impl = rmastore::internal::impl(s);
  std::uint64_t held = 0, total_keys = 0;
  for (int rank = 0; rank < p; ++rank) {
    std::uint64_t rank_version = 0; // with --tx, all keys of a rank must agree
    bool mixed = false;
    for (int k = 0; k < opt.keys; ++k) {
      const store_key_t key = key_of(rank, k);
      const std::uint64_t committed = record(rank, k).committed, inflight = record(rank, k).inflight;
      size_t len = 0;
      const store_status_t gs = store_get(s, key, buf.data(), buf.size(), &len);
      std::uint64_t got = 0;
      if (gs == STORE_ERR_NOT_FOUND && committed == 0) continue; // its first put never returned
      const bool good = gs == STORE_OK && check_value(key, buf.data(), len, &got);
      CHECK(good, "key %llu of rank %d: %s", (unsigned long long)key, rank, store_strerror(gs));
      if (good) {
        if (k > 0 && got != rank_version) mixed = true;
        rank_version = got;
        CHECK(got == committed || (inflight != 0 && got == inflight),
              "key %llu of rank %d has version %llu, committed %llu, in flight %llu", (unsigned long long)key, rank,
              (unsigned long long)got, (unsigned long long)committed, (unsigned long long)inflight);
        CHECK(len == length_of(key, got), "length");
      }
      ++total_keys;
      rmastore::internal::SlotHeader h;
      std::vector<std::byte> copy;
      const std::vector<int> holders = impl->holders(key);
      const bool mine = std::find(holders.begin(), holders.end(), impl->rank()) != holders.end();
      if (mine) {
        CHECK(impl->read_local_copy(key, h, copy), "no valid local copy of %llu", (unsigned long long)key);
        ++held;
      }
    }
    CHECK(!opt.tx || !mixed, "the keys of rank %d hold different versions: a transaction was applied in part", rank);
  }
  std::uint64_t copies = 0;
  MPI_Allreduce(&held, &copies, 1, MPI_UINT64_T, MPI_SUM, comm);
  const int r = std::min(opt.replicas, survivors);
  CHECK(copies == total_keys * static_cast<std::uint64_t>(r), "%llu copies for %llu keys", (unsigned long long)copies,
        (unsigned long long)total_keys);
  store_info_t info;
  store_info_init(&info);
  store_get_info(s, &info);
  std::uint64_t local = info.local_copies, all = 0;
  MPI_Allreduce(&local, &all, 1, MPI_UINT64_T, MPI_SUM, comm);
  CHECK(all == total_keys * static_cast<std::uint64_t>(r), "store_info counts %llu copies", (unsigned long long)all);

  // After recovery the store is in transaction mode until every survivor agrees to leave it.
  store_mode_t mode = STORE_MODE_NORMAL;
  CHECK(store_get_mode(s, &mode) == STORE_OK && mode == STORE_MODE_TRANSACTION, "not in transaction mode");
  {
    const auto v = make_value(key_of(me, 0), 99, 10);
    CHECK(store_put(s, key_of(me, 0), v.data(), v.size()) == STORE_ERR_MODE, "a plain put in transaction mode");
  }
  CHECK(store_back_to_normal(s) == STORE_OK, "store_back_to_normal");
  CHECK(store_get_mode(s, &mode) == STORE_OK && mode == STORE_MODE_NORMAL, "still in transaction mode");

  // Phase 5: the store works on: survivors take over the victims' keys and write everything.
  MPI_Barrier(comm);
  int new_rank = 0;
  MPI_Comm_rank(comm, &new_rank);
  for (int rank = 0; rank < p; ++rank) {
    if (rank != me && !(in(opt.victims, rank) && new_rank == rank % survivors)) continue;
    for (int k = 0; k < opt.keys; ++k) {
      const store_key_t key = key_of(rank, k);
      const auto v = make_value(key, 100, length_of(key, 100));
      CHECK(store_put(s, key, v.data(), v.size()) == STORE_OK, "put after recovery");
    }
  }
  MPI_Barrier(comm);
  for (int rank = 0; rank < p; ++rank) {
    for (int k = 0; k < opt.keys; ++k) {
      const store_key_t key = key_of(rank, k);
      size_t len = 0;
      std::uint64_t got = 0;
      const store_status_t gs = store_get(s, key, buf.data(), buf.size(), &len);
      CHECK(gs == STORE_OK && check_value(key, buf.data(), len, &got) && got == 100, "after recovery: %s",
            store_strerror(gs));
    }
  }
  MPI_Barrier(comm);
  CHECK(store_finalize(&s) == STORE_OK, "store_finalize");
  const double detect_ms =
      failed ? std::chrono::duration<double, std::milli>(t_failure - t_start).count() : -1.0; // upper bound
  const double total_s = std::chrono::duration<double>(Clock::now() - t_start).count();
  CHECK(total_s < 60, "the scenario took %.1f s", total_s);
  if (new_rank == 0) {
    std::printf("scenario done in %.2f s (failure seen after %.0f ms); recovery %d attempt(s), %.1f ms, %llu B lost, "
                "%llu B moved, %llu keys repaired of %llu, transactions: %llu keys forward, %llu back\n",
                total_s, detect_ms, report.attempts, report.total_seconds * 1e3, (unsigned long long)report.bytes_lost,
                (unsigned long long)report.bytes_moved, (unsigned long long)report.keys_repaired,
                (unsigned long long)report.keys, (unsigned long long)report.tx_rolled_forward,
                (unsigned long long)report.tx_rolled_back);
  }
  write_verdict(failures == 0);
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
