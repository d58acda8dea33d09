// Localized variant: ranks that never touch the dead process's keys do not stall.
//
// The last rank dies at an instant all ranks agreed on (one node: one CLOCK_MONOTONIC). Every
// survivor keeps putting and reading its own keys meanwhile: even ranks ("bystanders") only keys
// of which the dead process held no copy, odd ranks keys of which it held one. The background
// repair is stretched (RMASTORE_DELAY=repair.slot:<us>, set by the test registration) so that
// it runs for seconds.
//
// Checked, on every survivor: every call returned STORE_OK, every get returned the value last
// put, the failure became known in the first half of the measurement and the repair settled.
// Checked over all survivors: some repair was under way while they put. Checked on bystanders
// only: no gap between two successful puts after the death was longer than the bound (500 ms
// times RMASTORE_TEST_TIME_SCALE, like the stretched repair and the measurement), which is
// shorter than the stretched repair and is where the global variant's survivors wait until all
// of them called store_recover. The bound leaves room for a 2-core machine that runs three threads per
// rank.
//
//   test_unaffected [--mib N] [--seconds S]
#include <getopt.h>
#include <signal.h>

#include <algorithm>
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

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

} // namespace

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int mib = 2;
  double seconds = 2.0;
  enum { kMib = 256, kSeconds };
  static const option options[] = {{"mib", required_argument, nullptr, kMib},
                                   {"seconds", required_argument, nullptr, kSeconds},
                                   {"help", no_argument, nullptr, 'h'},
                                   {nullptr, 0, nullptr, 0}};
  const Cli cli{"test_unaffected [--mib N] [--seconds S]"};
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":h", options, nullptr)) != -1;) {
    if (c == kMib) {
      mib = static_cast<int>(cli.integer("--mib", optarg, 1, 4096));
    } else if (c == kSeconds) {
      seconds = cli.number("--seconds", optarg, 0.1, 3600);
    } else if (c == 'h') {
      cli.help();
    } else {
      cli.bad_option(c, argv);
    }
  }
  cli.no_operands(argc, argv);
  // The stall bound, and the measurement that must be long enough for it, scale with
  // RMASTORE_TEST_TIME_SCALE; so does the stretched repair (RMASTORE_DELAY), which must stay
  // longer than the bound for the bound to mean anything.
  const double bound_ms = 500 * time_scale();
  seconds *= time_scale();
  const int rank = world_rank(), np = world_size(), victim = np - 1;
  MPI_Comm peers = MPI_COMM_NULL; // survivors report here, point to point
  MPI_Comm_dup(MPI_COMM_WORLD, &peers);
  MPI_Comm_set_errhandler(peers, MPI_ERRORS_RETURN);

  store_config_t cfg;
  store_config_init(&cfg);
  cfg.replicas = 2;
  cfg.recovery = STORE_RECOVERY_LOCALIZED;
  store_t s = nullptr;
  CHECK(store_init(MPI_COMM_WORLD, &cfg, &s) == STORE_OK, "store_init");
  if (s == nullptr) MPI_Abort(MPI_COMM_WORLD, 2);
  auto *impl = rmastore::internal::impl(s);

  // Bulk data on every rank, so that the death leaves copies to repair.
  const std::vector<std::byte> bulk = make_value(1, 1, 1 << 20);
  for (int i = 0; i < mib; ++i) {
    const store_key_t key = static_cast<store_key_t>(rank) * 1000 + static_cast<store_key_t>(i);
    CHECK(store_put(s, key, bulk.data(), bulk.size()) == STORE_OK, "bulk put");
  }
  // Four keys of this rank's kind.
  const bool bystander = rank % 2 == 0;
  std::vector<store_key_t> keys;
  for (store_key_t k = static_cast<store_key_t>(rank) * 1000 + 500; keys.size() < 4; ++k) {
    const std::vector<int> h = impl->holders(k);
    if ((std::find(h.begin(), h.end(), victim) == h.end()) == bystander) keys.push_back(k);
  }
  constexpr std::size_t kLen = 4096;
  std::vector<std::uint64_t> version(keys.size(), 1);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto v = make_value(keys[i], 1, kLen);
    CHECK(store_put(s, keys[i], v.data(), v.size()) == STORE_OK, "first put");
  }

  double kill_at = now_ms() + 200;
  MPI_Bcast(&kill_at, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) expect_deaths({"own-hand@" + std::to_string(victim)});
  if (rank == victim) {
    while (now_ms() < kill_at) {
    }
    die_by_own_hand("at the agreed instant");
  }

  double last_ok = 0, worst_gap = 0, noticed_at = 0, settled_at = 0;
  bool repairing_seen = false; // this process's repair had work while it put
  store_info_t info;
  store_info_init(&info);
  long puts_after = 0;
  std::vector<std::byte> got(kLen);
  for (std::size_t n = 0; now_ms() < kill_at + seconds * 1000; ++n) {
    const std::size_t i = n % keys.size();
    const auto v = make_value(keys[i], version[i] + 1, kLen);
    const store_status_t st = store_put(s, keys[i], v.data(), v.size());
    const double t = now_ms();
    CHECK(st == STORE_OK, "put of key %llu returned %s", (unsigned long long)keys[i], store_strerror(st));
    if (st != STORE_OK) break;
    ++version[i];
    if (t >= kill_at) {
      if (last_ok > 0) worst_gap = std::max(worst_gap, t - last_ok);
      ++puts_after;
    }
    last_ok = t;
    if (t >= kill_at && settled_at == 0) {
      store_get_info(s, &info);
      if (info.failed_processes == 1 && noticed_at == 0) noticed_at = t;
      repairing_seen = repairing_seen || info.repair_backlog > 0;
      if (info.failed_processes == 1 && info.repair_backlog == 0) settled_at = t;
    }
    std::size_t len = 0;
    const store_status_t gs = store_get(s, keys[i], got.data(), got.size(), &len);
    CHECK(gs == STORE_OK && len == kLen && std::memcmp(got.data(), v.data(), kLen) == 0,
          "get of key %llu after its put: %s, %zu B", (unsigned long long)keys[i], store_strerror(gs), len);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  // The failure was handled meanwhile, in the background.
  const double settle_by = now_ms() + 30000 * time_scale();
  do {
    store_get_info(s, &info);
    if (info.failed_processes == 1 && info.repair_backlog == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  } while (now_ms() < settle_by);
  CHECK(info.failed_processes == 1, "%llu failed processes known", (unsigned long long)info.failed_processes);
  CHECK(info.repair_backlog == 0, "repair backlog %llu after %.0f s", (unsigned long long)info.repair_backlog,
        30 * time_scale());
  CHECK(puts_after > 0, "no put after the death");
  // Otherwise the gaps measured below could all come from before the failure was handled.
  CHECK(noticed_at > 0 &&
                noticed_at -
                    kill_at<seconds * 1000 - 2 * bound_ms,
                            "the death was not known early enough in the measurement (%.0f ms after it)", noticed_at> 0
            ? noticed_at - kill_at
            : -1.0);
  if (bystander) {
    CHECK(worst_gap < bound_ms, "a bystander stalled %.1f ms (bound %.0f ms)", worst_gap, bound_ms);
  }
  if (settled_at == 0) settled_at = now_ms();
  std::printf("[rank %d] %s: %ld puts after the death, longest gap %.1f ms; its repair settled %.0f ms after the "
              "death\n",
              rank, bystander ? "bystander" : "affected", puts_after, worst_gap, settled_at - kill_at);
  std::fflush(stdout);

  // Every survivor's keys and versions, and whether its repair had work while it put.
  const int survivors = np - 1;
  constexpr int kRecord = 9;
  std::vector<std::uint64_t> mine(kRecord, 0), all(static_cast<std::size_t>(survivors) * kRecord);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    mine[2 * i] = keys[i];
    mine[2 * i + 1] = version[i];
  }
  mine[kRecord - 1] = repairing_seen ? 1 : 0;
  if (rank != 0) {
    MPI_Send(mine.data(), kRecord, MPI_UINT64_T, 0, 1, peers);
    MPI_Recv(all.data(), survivors * kRecord, MPI_UINT64_T, 0, 1, peers, MPI_STATUS_IGNORE);
  } else {
    std::copy(mine.begin(), mine.end(), all.begin());
    for (int r = 1; r < survivors; ++r)
      MPI_Recv(all.data() + r * kRecord, kRecord, MPI_UINT64_T, r, 1, peers, MPI_STATUS_IGNORE);
    for (int r = 1; r < survivors; ++r) MPI_Send(all.data(), survivors * kRecord, MPI_UINT64_T, r, 1, peers);
  }
  bool repairing = false;
  for (std::size_t r = 0; r < all.size(); r += kRecord) {
    repairing = repairing || all[r + kRecord - 1] != 0;
    // Everyone still sees every value: the survivors read each other's keys.
    for (std::size_t j = r; j < r + kRecord - 1; j += 2) {
      const auto want = make_value(all[j], all[j + 1], kLen);
      std::size_t len = 0;
      const store_status_t gs = store_get(s, all[j], got.data(), got.size(), &len);
      CHECK(gs == STORE_OK && len == kLen && std::memcmp(got.data(), want.data(), kLen) == 0,
            "key %llu does not hold version %llu: %s", (unsigned long long)all[j], (unsigned long long)all[j + 1],
            store_strerror(gs));
    }
  }
  CHECK(repairing, "no survivor's repair had work while the survivors put: the stall bound tested nothing");
  for (int i = 0; i < mib; ++i) {
    for (int r = 0; r < np; ++r) {
      const store_key_t key = static_cast<store_key_t>(r) * 1000 + static_cast<store_key_t>(i);
      std::vector<std::byte> b(bulk.size());
      std::size_t len = 0;
      const store_status_t gs = store_get(s, key, b.data(), b.size(), &len);
      CHECK(gs == STORE_OK && b == bulk, "bulk key %llu: %s", (unsigned long long)key, store_strerror(gs));
    }
  }
  CHECK(store_finalize(&s) == STORE_OK, "store_finalize");
  write_verdict(check_failures == 0);
  MPI_Comm_free(&peers);
  MPI_Finalize();
  return check_failures == 0 ? 0 : 1;
}
