// A live process that MPI declares failed (issue 23: a survivor left out of the others'
// recovery). ULFM's heartbeat detector (on in this test's registration, 2 s timeout) declares
// the last rank failed while it is stopped (SIGSTOP, not killed). The others must notice,
// recover without it with no key lost, and go on working after it runs again and its late
// messages arrive on the communicators the recovery replaced; it must not hang, and must not
// take a survivor down. The runner checks that the stop happened (stopped@<rank>); each survivor
// checks that the process was still alive, and stopped, when its recovery completed.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "test_util.hpp"

using namespace rmastore::test;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kKeys = 4;
constexpr std::size_t kLen = 256;

store_key_t key_of(int rank, int i) {
  return static_cast<store_key_t>(rank * 100 + i);
}

// The state letter of /proc/<pid>/stat ('T': stopped), or '?' if the process is gone.
char state_of(const std::string &pid) {
  std::ifstream f("/proc/" + pid + "/stat");
  std::string line;
  if (!std::getline(f, line)) return '?';
  const auto paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() ? line[paren + 2] : '?';
}

bool failure_known(store_t s, store_key_t key, const std::vector<std::byte> &value) {
  if (test_recovery() == STORE_RECOVERY_LOCALIZED) {
    store_info_t info;
    store_info_init(&info);
    return store_get_info(s, &info) == STORE_OK && info.failed_processes > 0;
  }
  return store_put(s, key, value.data(), value.size()) == STORE_ERR_PROC_FAILED;
}

} // namespace

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int rank = world_rank(), size = world_size();
  CHECK(size >= 4, "needs 4 processes or more");
  const int suspect = size - 1;
  const std::vector<std::string> pids = all_strings(std::to_string(getpid()));
  if (rank == 0) expect_deaths({"stopped@" + std::to_string(suspect)});
  store_t s = make_store(2);
  if (s == nullptr) {
    write_verdict(false);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  std::vector<std::uint64_t> version(kKeys, 1);
  for (int i = 0; i < kKeys; ++i) {
    const std::vector<std::byte> v = make_value(key_of(rank, i), 1, kLen);
    CHECK(store_put(s, key_of(rank, i), v.data(), v.size()) == STORE_OK, "store_put of key %d", i);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const auto stop_length = scaled(10000);
  const auto t_stop = Clock::now();

  if (rank == suspect) {
    stop_for(stop_length, "ULFM's heartbeat detector is to declare it failed while it is alive");
    // Running again: Open MPI aborts it ("I have been reported dead by someone else") as soon as
    // it learns that it was declared failed; until then it gets statuses, not a hang. It writes
    // no verdict (the runner counts it among the gone) unless it recovers on its own.
    const std::vector<std::byte> v = make_value(key_of(rank, 0), 2, kLen);
    const store_status_t st = store_put(s, key_of(rank, 0), v.data(), v.size());
    std::fprintf(stderr, "[rank %d] runs again: store_put returned %s\n", rank, store_strerror(st));
    std::fflush(stderr);
    MPI_Comm ignored = MPI_COMM_NULL;
    const store_status_t rs = store_recover(s, &ignored);
    std::fprintf(stderr, "[rank %d] runs again: store_recover returned %s\n", rank, store_strerror(rs));
    std::fflush(stderr);
    // A recovery of its own, without the others, would split the store.
    if (rs == STORE_OK) write_verdict(false);
    _exit(0);
  }

  // The suspect holds copies: a put of the global variant waits on it until MPI declares it
  // failed; the localized variant's puts go on and its info counts the failure.
  const std::vector<std::byte> probe = make_value(key_of(rank, 0), 1, kLen);
  bool known = false;
  while (!known && Clock::now() < t_stop + stop_length) {
    known = failure_known(s, key_of(rank, 0), probe);
    if (!known) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(known, "no failure reported while the suspect was stopped");
  store_status_t rs = STORE_ERR_RECOVER_AGAIN;
  MPI_Comm comm = MPI_COMM_NULL;
  for (int attempt = 0; attempt < 5 && rs == STORE_ERR_RECOVER_AGAIN; ++attempt) rs = store_recover(s, &comm);
  CHECK(rs == STORE_OK, "store_recover: %s", store_strerror(rs));
  const double recovered_at = std::chrono::duration<double>(Clock::now() - t_stop).count();
  // The premise: the process left out was alive, and stopped, when the recovery ended.
  const char state = state_of(pids[static_cast<std::size_t>(suspect)]);
  CHECK(state == 'T', "the suspect's state is '%c' after the recovery, not 'T' (stopped)", state);
  store_recovery_t report;
  store_recovery_init(&report);
  CHECK(store_last_recovery(s, &report) == STORE_OK, "store_last_recovery");
  CHECK(report.survivors == size - 1 && report.failed == 1 && report.lost_count == 0,
        "recovery: %d survivors, %d failed, %zu keys lost", report.survivors, report.failed, report.lost_count);
  // The global variant's recovery leaves the store in transaction mode (collective: every
  // survivor calls it; local in the localized variant).
  CHECK(rs == STORE_OK && store_back_to_normal(s) == STORE_OK, "store_back_to_normal");
  if (check_failures != 0) {
    write_verdict(false);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  // Work on until well after the suspect ran again, so that its late messages arrive meanwhile.
  const auto work_until = t_stop + stop_length + scaled(4000);
  long ops = 0;
  for (int i = 0; Clock::now() < work_until; ++i) {
    const int k = i % kKeys;
    const std::vector<std::byte> v = make_value(key_of(rank, k), version[k] + 1, kLen);
    const store_status_t st = store_put(s, key_of(rank, k), v.data(), v.size());
    CHECK(st == STORE_OK, "store_put after the recovery: %s", store_strerror(st));
    if (st != STORE_OK) break;
    ++version[k];
    const int other = (rank + 1 + i) % size;
    CHECK(version_of(s, key_of(other, k), kLen) != 0, "store_get of key %llu",
          static_cast<unsigned long long>(key_of(other, k)));
    ++ops;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const char after = state_of(pids[static_cast<std::size_t>(suspect)]);
  CHECK(after != 'T', "the suspect was never resumed");

  // Every key whole: the survivors' at their last versions, the suspect's at its first. The
  // survivors keep their order in comm, and the suspect is the last rank.
  std::vector<std::uint64_t> all(static_cast<std::size_t>(kKeys * (size - 1)));
  CHECK(MPI_Allgather(version.data(), kKeys, MPI_UINT64_T, all.data(), kKeys, MPI_UINT64_T, comm) == MPI_SUCCESS,
        "MPI_Allgather on the survivors' communicator");
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i < kKeys; ++i) {
      const std::uint64_t want = r == suspect ? 1 : all[static_cast<std::size_t>(r * kKeys + i)];
      const std::uint64_t got = version_of(s, key_of(r, i), kLen);
      CHECK(got == want, "key %llu: version %llu, not %llu", static_cast<unsigned long long>(key_of(r, i)),
            static_cast<unsigned long long>(got), static_cast<unsigned long long>(want));
    }
  }
  std::printf("rank %d: recovered %.2f s after the stop, suspect '%c' then; %ld operations until the suspect's "
              "state was '%c'\n",
              rank, recovered_at, state, ops, after);
  std::fflush(stdout);
  CHECK(store_finalize(&s) == STORE_OK, "store_finalize");
  MPI_Comm_free(&comm);
  write_verdict(check_failures == 0);
  MPI_Finalize();
  return check_failures == 0 ? 0 : 1;
}
