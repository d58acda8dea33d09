// The stale-write fence: a put that a failed process issued lands after the recovery.
//
// Rank 1 dies inside a put of key K at fault point put.stale, after it has the addresses of
// K's copies and before any byte is sent. The test build saves what the put would have
// written (the verdict directory, stale.<holder id>: address, length, bytes). The survivors recover
// and a survivor writes K anew. Then each holder applies the saved write to its own memory,
// as a delayed RMA put of the dead process would land, and everybody reads K: it must hold the
// survivor's value. Recovery moves the slots a failed process could write into to fresh memory
// and retires the old ones; without that, the stale write overwrites the new value.
//
//   test_recover_stale [--localized 0|1]    (3 processes; RMASTORE_FAULT=put.stale@1#2)
#include <getopt.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "capi/test_access.hpp"
#include "test_util.hpp"

using namespace rmastore::test;

namespace {

constexpr std::size_t kLen = 48;

// Applies the write the dead process saved for this holder; returns whether there was one.
bool apply_stale_write(int my_id) {
  const char *dir = std::getenv("RMASTORE_TEST_VERDICT_DIR");
  if (dir == nullptr) return false;
  const std::string path = std::string(dir) + "/stale." + std::to_string(my_id);
  FILE *f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  std::uint64_t address = 0, bytes = 0;
  bool ok = std::fread(&address, sizeof address, 1, f) == 1 && std::fread(&bytes, sizeof bytes, 1, f) == 1;
  std::vector<std::byte> data(ok ? bytes : 0);
  ok = ok && std::fread(data.data(), 1, data.size(), f) == data.size();
  std::fclose(f);
  if (!ok) return false;
  // The holder's own slot memory: attached to the window, never unmapped while the store lives.
  std::memcpy(reinterpret_cast<void *>(address), data.data(), data.size());
  return true;
}

} // namespace

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  bool localized = false;
  static const option options[] = {
      {"localized", required_argument, nullptr, 'l'}, {"help", no_argument, nullptr, 'h'}, {nullptr, 0, nullptr, 0}};
  const Cli cli{"test_recover_stale [--localized 0|1]"};
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":h", options, nullptr)) != -1;) {
    if (c == 'l') {
      localized = cli.integer("--localized", optarg, 0, 1) != 0;
    } else if (c == 'h') {
      cli.help();
    } else {
      cli.bad_option(c, argv);
    }
  }
  cli.no_operands(argc, argv);
  const int me = world_rank();
  CHECK(world_size() == 3, "needs 3 processes");
  store_t s = make_store(2, 64, localized ? STORE_RECOVERY_LOCALIZED : STORE_RECOVERY_GLOBAL);
  CHECK(s != nullptr, "store_init");
  if (s == nullptr || world_size() != 3) {
    write_verdict(false);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  // A key whose copies are both on survivors (ranks 0 and 2), written by rank 1.
  store_key_t key = 1;
  for (;; ++key) {
    const std::vector<int> h = rmastore::internal::impl(s)->holders(key);
    if (h.size() == 2 && h[0] != 1 && h[1] != 1) break;
  }
  if (me == 1) {
    const auto v1 = make_value(key, 1, kLen);
    CHECK(store_put(s, key, v1.data(), v1.size()) == STORE_OK, "put v1");
    // Dies inside this put (put.stale, 2nd time reached), leaving its write behind.
    const auto v2 = make_value(key, 2, kLen);
    store_put(s, key, v2.data(), v2.size());
    std::fprintf(stderr, "[rank 1] the put.stale fault point did not fire\n");
    write_verdict(false);
    raise(SIGKILL);
  }
  // Survivors: wait for the failure, then recover around it.
  const auto deadline = std::chrono::steady_clock::now() + scaled(20000);
  bool failed = false;
  std::vector<std::byte> buf(kLen + 64);
  while (!failed && std::chrono::steady_clock::now() < deadline) {
    size_t len = 0;
    const store_status_t st = store_get(s, key, buf.data(), buf.size(), &len);
    store_info_t info;
    store_info_init(&info);
    store_get_info(s, &info);
    failed = st == STORE_ERR_PROC_FAILED || info.failed_processes > 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(failed, "rank 1's death was not reported");
  MPI_Comm comm = MPI_COMM_NULL;
  store_status_t rs = STORE_ERR_RECOVER_AGAIN;
  for (int attempt = 0; attempt < 10 && rs == STORE_ERR_RECOVER_AGAIN; ++attempt) rs = store_recover(s, &comm);
  CHECK(rs == STORE_OK, "store_recover: %s", store_strerror(rs));
  if (rs != STORE_OK) {
    write_verdict(false);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  // Both holders moved K's copy (header and value) out of the memory rank 1 could still write
  // into, and the report counts it (in the localized variant, also if the background repair
  // did it before store_recover).
  store_recovery_t report;
  store_recovery_init(&report);
  CHECK(store_last_recovery(s, &report) == STORE_OK, "store_last_recovery");
  CHECK(report.bytes_quarantined >= 2 * kLen, "bytes_quarantined %llu, at least %zu expected",
        static_cast<unsigned long long>(report.bytes_quarantined), 2 * kLen);
  CHECK(store_back_to_normal(s) == STORE_OK, "store_back_to_normal");
  // A survivor takes the key over and writes it anew.
  if (me == 0) {
    const auto v3 = make_value(key, 3, kLen);
    CHECK(store_put(s, key, v3.data(), v3.size()) == STORE_OK, "put v3");
  }
  MPI_Barrier(comm);
  // The dead process's write lands now.
  const int applied = apply_stale_write(rmastore::internal::impl(s)->stable_id()) ? 1 : 0;
  int total = 0;
  MPI_Allreduce(&applied, &total, 1, MPI_INT, MPI_SUM, comm);
  CHECK(total == 2, "the premise failed: %d of 2 holders got the dead process's write", total);
  MPI_Barrier(comm);
  size_t len = 0;
  const store_status_t gs = store_get(s, key, buf.data(), buf.size(), &len);
  std::uint64_t version = 0;
  CHECK(gs == STORE_OK && check_value(key, buf.data(), len, &version) && version == 3,
        "after the stale write: %s, version %llu (3 expected; 2 is the dead process's write)", store_strerror(gs),
        static_cast<unsigned long long>(version));
  MPI_Barrier(comm);
  CHECK(store_finalize(&s) == STORE_OK, "store_finalize");
  MPI_Comm_free(&comm);
  write_verdict(check_failures == 0);
  MPI_Finalize();
  return check_failures == 0 ? 0 : 1;
}
