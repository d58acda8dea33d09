// store_bench: latency and bandwidth of store_put / store_get against a raw MPI baseline measured
// in the same run (the same bytes to the same targets with MPI_Put / MPI_Get + MPI_Win_flush_all
// on a plain dynamic window, no store logic).
//
// Rank 0 is the client; it uses keys whose copies all sit on other ranks, so every copy crosses
// the network path. The other ranks are targets:
//   idle - the targets wait inside MPI (MPI_Barrier), so their progress engine runs;
//   busy - the targets' application threads compute without calling MPI; only the helper
//          thread can serve the puts.
// Output: one JSON object per line (stdout), then a table (stderr).
//
//   mpirun -n 3 store_bench [--op put,get,cpu,detectors,variants,tx,recover-memory,pause,failure]
//                           [--sizes 8,4096,1M] [--replicas 1,2] [--scenario idle,busy] [--reps N]
//                           [--max-sleep-us N] [--detector off,notify,ping] [--mib N]
//                           [--recovery global|localized] [--host-loss 0|1] [--help]
//
// It links the installed library (the one applications link, without fault points) and uses
// only its installed headers: where a key's copies are comes from the test hook
// store_key_holders (rmastore/store_hooks.h). benchmarks/run_matrix.sh builds it against an
// install (docs/benchmarks.md).
//
// --recovery applies to --op pause (the first named) and --op tx (each named); the other ops use
// the global variant (--op variants measures both).
//
// --detector: put/get (and cpu) rows for each failure detector; rows other than "off" also give
//   their median as a ratio to the detection-off store measured in the same run (vs_off).
// --op detectors: the three detectors' put latency, interleaved repetition by repetition, in an
//   order that rotates with each repetition.
// --op variants: put latency of the global and the localized variant (slot locks), interleaved
//   repetition by repetition (rotating), with the raw baseline.
// --op tx: store_tx_commit of 1, 2 and 4 keys against as many store_put of the same keys in the
//   same store, in alternating blocks; commit_vs_puts is the ratio of the medians.
// --op pause (must come last, it kills a process; --recovery global or localized): survivors
//   put in a loop while the last rank dies, half of them to keys it held a copy of (affected),
//   half to keys it did not (bystanders). Each reports its pause, the longest gap between two
//   successful puts after the death, and first_put: from the death to the end of its first
//   successful put begun after it (which may come before the death is noticed). The excess is
//   what the death added: each rank's pause less its own longest gap in the 1.5 s before it.
// --op failure (must come last, it kills a process): every rank stores N MiB (values of 1 MiB),
//   the last rank dies at a time all ranks agreed on, every survivor measures how long until a
//   call reports the failure, then all recover. Reported with the goal 2 x (detection + shrink
//   + lost bytes at the raw put bandwidth, measured in the same run). With --host-loss 1 every rank
//   of the last rank's host dies (across hosts, scripts/multihost.sh): the lowest kills the host's
//   Open MPI daemon (prted) at the agreed time, the others die once it is gone.
// --op recover-memory: heap bytes a store_recover with no failure keeps per call, both
//   variants, against a raw recovery's communicator calls (dup, revoke, shrink, agree, free);
//   --reps rounds (default 200).
// --op key-memory (at least 3 ranks): what a new key costs each process in memory. Rank 0 puts
//   --reps new keys (default 50000) of the first --sizes bytes, each with its one copy on rank
//   1 (--replicas is 1 here); ranks 2.. hold none of them. Reports the heap growth (malloc's
//   bytes in use) per key of the writer, of the holder and of a bystander, the holder's
//   bookkeeping per copy beyond a bystander's, and its window memory per copy, for each
//   --recovery.
#include <getopt.h>
#include <malloc.h>
#include <mpi.h>
// after mpi.h, on purpose: Open MPI's ULFM extensions (MPIX_Comm_revoke, ...)
#include <mpi-ext.h>
#include <sys/resource.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "rmastore/store.h"
#include "rmastore/store_hooks.h"

namespace {

using namespace rmastore::bench;

struct Options {
  std::vector<std::string> ops = {"put", "get", "cpu"};
  std::vector<std::size_t> sizes = {8, 64, 512, 4096, 65536, 1 << 20, 16 << 20, 64 << 20};
  std::vector<int> replicas = {1, 2, 3, 6};
  std::vector<std::string> scenarios = {"idle", "busy"};
  int reps = 0; // 0: chosen per size
  int max_sleep_us = -1;
  std::vector<int> detectors = {STORE_DETECTOR_NOTIFY};
  int mib = 16;
  std::vector<int> recoveries = {STORE_RECOVERY_GLOBAL};
  bool host_loss = false; // --op failure: the last rank's whole host dies, daemon first
};

const char *detector_name(int d) {
  return d == STORE_DETECTOR_OFF ? "off" : d == STORE_DETECTOR_PING ? "ping" : "notify";
}

constexpr const char *kUsage =
    "usage: store_bench [--op put,get,cpu,detectors,variants,tx,recover-memory,key-memory,pause,failure]\n"
    "                   [--sizes 8,4K,1M] [--replicas 1,2] [--scenario idle,busy] [--reps N]\n"
    "                   [--max-sleep-us N] [--detector off,notify,ping] [--mib N]\n"
    "                   [--recovery global|localized] [--host-loss 0|1] [--help]\n";

// Every rank parses the same arguments; only rank 0 (`talk`) prints. Returns -1 to run, or the
// status to exit with: 0 after --help, 2 for arguments it refuses (after the usage).
int parse(int argc, char **argv, bool talk, Options &o) {
  enum { kOp = 256, kSizes, kReplicas, kScenario, kReps, kMaxSleep, kDetector, kMib, kHostLoss, kRecovery };
  static const option longopts[] = {{"op", required_argument, nullptr, kOp},
                                    {"sizes", required_argument, nullptr, kSizes},
                                    {"replicas", required_argument, nullptr, kReplicas},
                                    {"scenario", required_argument, nullptr, kScenario},
                                    {"reps", required_argument, nullptr, kReps},
                                    {"max-sleep-us", required_argument, nullptr, kMaxSleep},
                                    {"detector", required_argument, nullptr, kDetector},
                                    {"mib", required_argument, nullptr, kMib},
                                    {"host-loss", required_argument, nullptr, kHostLoss},
                                    {"recovery", required_argument, nullptr, kRecovery},
                                    {"help", no_argument, nullptr, 'h'},
                                    {nullptr, 0, nullptr, 0}};
  const auto refuse = [&](const char *what, const char *value) {
    if (talk) std::fprintf(stderr, "store_bench: %s: '%s'\n%s", what, value, kUsage);
    return 2;
  };
  opterr = talk ? 1 : 0; // getopt_long's own message for unknown options and missing values
  int c = 0;
  while ((c = getopt_long(argc, argv, "h", longopts, nullptr)) != -1) {
    const std::string v = optarg != nullptr ? optarg : "";
    switch (c) {
    case kOp:
      o.ops = split(v);
      if (!all_of_names(o.ops, {"put", "get", "cpu", "detectors", "variants", "tx", "recover-memory", "key-memory",
                                "pause", "failure"}))
        return refuse("--op takes put, get, cpu, detectors, variants, tx, recover-memory, key-memory, pause or failure",
                      optarg);
      break;
    case kSizes:
      o.sizes.clear();
      for (const std::string &x : split(v)) {
        std::size_t n = 0;
        if (!parse_size(x, n)) return refuse("--sizes takes sizes such as 8,4K,1M", optarg);
        o.sizes.push_back(n);
      }
      if (o.sizes.empty()) return refuse("--sizes takes sizes such as 8,4K,1M", optarg);
      break;
    case kReplicas:
      o.replicas.clear();
      for (const std::string &x : split(v)) {
        int n = 0;
        if (!parse_int(x, n, 1)) return refuse("--replicas takes copy counts of at least 1", optarg);
        o.replicas.push_back(n);
      }
      if (o.replicas.empty()) return refuse("--replicas takes copy counts of at least 1", optarg);
      break;
    case kScenario:
      o.scenarios = split(v);
      if (!all_of_names(o.scenarios, {"idle", "busy"})) return refuse("--scenario takes idle, busy", optarg);
      break;
    case kReps:
      if (!parse_int(v, o.reps, 0)) return refuse("--reps takes a count (0: chosen per size)", optarg);
      break;
    case kMaxSleep:
      if (!parse_int(v, o.max_sleep_us, 0)) return refuse("--max-sleep-us takes microseconds", optarg);
      break;
    case kDetector: {
      const std::vector<std::string> names = split(v);
      if (!all_of_names(names, {"off", "notify", "ping"})) return refuse("--detector takes off, notify, ping", optarg);
      o.detectors.clear();
      for (const std::string &d : names) {
        o.detectors.push_back(d == "off"    ? STORE_DETECTOR_OFF
                              : d == "ping" ? STORE_DETECTOR_PING
                                            : STORE_DETECTOR_NOTIFY);
      }
      break;
    }
    case kMib:
      if (!parse_int(v, o.mib, 0)) return refuse("--mib takes a number of MiB", optarg);
      break;
    case kHostLoss: {
      int n = 0;
      if (!parse_int(v, n)) return refuse("--host-loss takes 0 or 1", optarg);
      o.host_loss = n != 0;
      break;
    }
    case kRecovery: {
      const std::vector<std::string> names = split(v);
      if (!all_of_names(names, {"global", "localized"})) return refuse("--recovery takes global, localized", optarg);
      o.recoveries.clear();
      for (const std::string &r : names)
        o.recoveries.push_back(r == "localized" ? STORE_RECOVERY_LOCALIZED : STORE_RECOVERY_GLOBAL);
      break;
    }
    case 'h':
      if (talk) std::fputs(kUsage, stdout);
      return 0;
    default: // getopt_long printed what is wrong
      if (talk) std::fputs(kUsage, stderr);
      return 2;
    }
  }
  if (optind < argc) return refuse("unexpected argument", argv[optind]);
  return -1;
}

int reps_for(const Options &o, std::size_t size) {
  if (o.reps > 0) return o.reps;
  if (size <= 4096) return 2000;
  if (size <= 65536) return 500;
  if (size <= (1 << 20)) return 100;
  if (size <= (16 << 20)) return 20;
  return 8;
}

// Computes without MPI for `ms` milliseconds: the busy target.
void compute_for(double ms) {
  const double until = now_us() + ms * 1000;
  volatile double x = 1.0;
  while (now_us() < until) {
    for (int i = 0; i < 1000; ++i) x = x * 1.0000001 + 1e-9;
  }
}

struct Row {
  std::string op, scenario;
  std::size_t size;
  int replicas, np, reps;
  Stats store, raw;
  double idle_median = 0; // busy rows: the idle-target store median of the same point
  int detector = STORE_DETECTOR_NOTIFY;
  double off_median = 0; // the same point with detection off, if measured
  const char *recovery = "global";
  double global_median = 0; // localized rows of --op variants: the global store's median
  Stats pingpong{};         // idle put/get rows: a message round trip to the first holder
  Stats raw_uncached{};     // idle put/get rows: raw MPI without the region-table cache
};

void emit(const Row &r) {
  const double ratio = r.raw.median > 0 ? r.store.median / r.raw.median : 0;
  // A put moves one copy per replica, a get one copy.
  const double mb = static_cast<double>(r.size) / (1 << 20) * (r.op == "put" ? r.replicas : 1);
  std::printf("{\"op\":\"%s\",\"size\":%zu,\"replicas\":%d,\"np\":%d,\"scenario\":\"%s\",\"reps\":%d,"
              "\"median_us\":%.3f,\"p99_us\":%.3f,\"raw_median_us\":%.3f,\"raw_p99_us\":%.3f,\"ratio\":%.3f,"
              "\"bw_MiBps\":%.1f,\"raw_bw_MiBps\":%.1f,\"bw_ratio\":%.3f",
              r.op.c_str(), r.size, r.replicas, r.np, r.scenario.c_str(), r.reps, r.store.median, r.store.p99,
              r.raw.median, r.raw.p99, ratio, mb / (r.store.median * 1e-6), mb / (r.raw.median * 1e-6),
              ratio > 0 ? 1.0 / ratio : 0.0);
  if (r.pingpong.median > 0)
    std::printf(",\"pingpong_us\":%.3f,\"vs_pingpong\":%.3f,\"raw_vs_pingpong\":%.3f,\"raw_uncached_us\":%.3f,"
                "\"raw_uncached_vs_pingpong\":%.3f",
                r.pingpong.median, r.store.median / r.pingpong.median, r.raw.median / r.pingpong.median,
                r.raw_uncached.median, r.raw_uncached.median / r.pingpong.median);
  if (r.scenario == "busy")
    std::printf(",\"idle_median_us\":%.3f,\"busy_vs_idle\":%.3f", r.idle_median, r.store.median / r.idle_median);
  std::printf(",\"detector\":\"%s\"", detector_name(r.detector));
  if (r.off_median > 0)
    std::printf(",\"off_median_us\":%.3f,\"vs_off\":%.3f", r.off_median, r.store.median / r.off_median);
  std::printf(",\"recovery\":\"%s\"", r.recovery);
  if (r.global_median > 0)
    std::printf(",\"global_median_us\":%.3f,\"vs_global\":%.3f", r.global_median, r.store.median / r.global_median);
  std::printf("}\n");
  std::fflush(stdout);
}

// A key whose `r` holders are all ranks other than 0, if there are enough ranks.
store_key_t remote_key(store_t s, std::uint64_t salt) {
  const store_info_t info = info_of(s);
  for (store_key_t k = salt * 1000003;; ++k) {
    const std::vector<int> h = key_holders(s, k);
    if (std::find(h.begin(), h.end(), 0) == h.end() || info.replicas >= info.size) return k;
  }
}

// Stores opt.mib MiB per rank, kills the last rank, measures detection on every survivor and
// the recovery. The last rank never returns from here.
void run_failure(const Options &opt, RawWindow &raw, int rank, int np) {
  constexpr std::size_t kValue = 1 << 20;
  std::vector<char> value(kValue, 7);
  // Raw put bandwidth of this machine, measured now: 1 MiB puts from rank 0 to rank 1.
  double raw_bw = 0;
  if (rank == 0 && np > 1) {
    std::vector<double> t;
    for (int i = 0; i < 20; ++i) {
      const double t0 = now_us();
      raw.put({1}, value.data(), kValue);
      t.push_back(now_us() - t0);
    }
    raw_bw = static_cast<double>(kValue) / (1 << 20) / (stats(t).median * 1e-6);
  }
  MPI_Bcast(&raw_bw, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);

  store_config_t cfg;
  store_config_init(&cfg);
  cfg.replicas = std::min(opt.replicas.front(), np - 1);
  cfg.detector = opt.detectors.front();
  store_t s = nullptr;
  if (store_init(MPI_COMM_WORLD, &cfg, &s) != STORE_OK) MPI_Abort(MPI_COMM_WORLD, 3);
  for (int i = 0; i < opt.mib; ++i) {
    if (store_put(s, static_cast<store_key_t>(rank) * 100000 + static_cast<store_key_t>(i), value.data(), kValue) !=
        STORE_OK) {
      MPI_Abort(MPI_COMM_WORLD, 4);
    }
  }
  // Survivors will keep putting a key that the dying process holds a copy of: the kill catches
  // puts in flight, and the time to the first STORE_ERR_PROC_FAILED is the bound a caller sees.
  // Its slots are created now.
  store_key_t aimed = static_cast<store_key_t>(rank) * 100000 + 90000;
  for (;; ++aimed) {
    const std::vector<int> h = key_holders(s, aimed);
    if (std::find(h.begin(), h.end(), np - 1) != h.end()) break;
  }
  std::vector<char> aimed_value(64 * 1024, 3);
  if (rank != np - 1 && store_put(s, aimed, aimed_value.data(), aimed_value.size()) != STORE_OK) {
    MPI_Abort(MPI_COMM_WORLD, 6);
  }
  // The victims: the last rank, or with --host-loss every rank on its host.
  std::vector<char> names(static_cast<std::size_t>(np) * MPI_MAX_PROCESSOR_NAME, 0);
  {
    char me[MPI_MAX_PROCESSOR_NAME] = "";
    int len = 0;
    MPI_Get_processor_name(me, &len);
    MPI_Allgather(me, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD);
  }
  const auto host = [&](int r) { return std::string(&names[static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME]); };
  int first_victim = np - 1, dead = 1;
  if (opt.host_loss) {
    for (int r = np - 1; r >= 0 && host(r) == host(np - 1); --r) first_victim = r;
    dead = np - first_victim;
    // Killing anything but the host's daemon (mpirun itself, on one host) would measure something else.
    char comm[64] = "";
    if (FILE *f = std::fopen(("/proc/" + std::to_string(getppid()) + "/comm").c_str(), "r")) {
      if (std::fgets(comm, sizeof comm, f) == nullptr) comm[0] = '\0';
      std::fclose(f);
    }
    int bad = first_victim == 0 || (rank >= first_victim && std::strncmp(comm, "prted", 5) != 0) ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (bad) {
      if (rank == 0) std::fprintf(stderr, "store_bench: --host-loss needs several hosts, the last one under a prted\n");
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  // Every process of one machine reads the same CLOCK_MONOTONIC (simulated hosts included): the
  // death happens at an agreed instant, and each survivor times its own detection from it.
  double kill_at = now_us() + 30000;
  MPI_Bcast(&kill_at, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank >= first_victim) {
    while (now_us() < kill_at) {
    }
    if (opt.host_loss) {
      const pid_t daemon = getppid();
      if (rank == first_victim) {
        kill(daemon, SIGKILL);
      } else {
        while (getppid() == daemon && now_us() < kill_at + 5e6)
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    raise(SIGKILL);
  }
  double detected = 0;
  for (;;) {
    const store_status_t st = store_put(s, aimed, aimed_value.data(), aimed_value.size());
    if (st == STORE_ERR_PROC_FAILED) {
      detected = now_us();
      break;
    }
    if (now_us() > kill_at + 30e6) MPI_Abort(MPI_COMM_WORLD, 5); // a hang would be a bug
    // An application checks between pieces of work; a tight spin would only starve the helper
    // threads and the runtime's daemon of the cores they need to notice the death.
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  const double detect_ms = (detected - kill_at) * 1e-3;
  MPI_Comm comm = MPI_COMM_NULL;
  store_status_t rs;
  do {
    rs = store_recover(s, &comm);
  } while (rs == STORE_ERR_RECOVER_AGAIN);
  const double recovered = now_us();
  store_recovery_t rep;
  store_recovery_init(&rep);
  store_last_recovery(s, &rep);
  int survivors = 0, me = 0;
  MPI_Comm_size(comm, &survivors);
  MPI_Comm_rank(comm, &me);
  std::vector<double> all(static_cast<std::size_t>(survivors));
  MPI_Gather(&detect_ms, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, 0, comm);
  double total_ms = (recovered - kill_at) * 1e-3, worst_total = 0;
  MPI_Reduce(&total_ms, &worst_total, 1, MPI_DOUBLE, MPI_MAX, 0, comm);
  if (me == 0) {
    std::sort(all.begin(), all.end());
    const double detect_max = all.back(), detect_med = all[all.size() / 2];
    const double lost_ms = static_cast<double>(rep.bytes_lost) / (1 << 20) / raw_bw * 1e3;
    const double goal_ms = 2 * (detect_max + rep.shrink_seconds * 1e3 + lost_ms);
    std::printf("{\"op\":\"failure\",\"np\":%d,\"dead\":%d,\"host_loss\":%s,\"replicas\":%d,\"detector\":\"%s\",\"mib_"
                "per_rank\":%d,"
                "\"detect_ms_median\":%.2f,\"detect_ms_max\":%.2f,\"recover_ms\":%.2f,\"shrink_ms\":%.2f,"
                "\"window_ms\":%.2f,\"rereplicate_ms\":%.2f,\"kill_to_recovered_ms\":%.2f,\"bytes_lost\":%llu,"
                "\"bytes_moved\":%llu,\"bytes_quarantined\":%llu,\"keys_repaired\":%llu,\"keys\":%llu,"
                "\"raw_bw_MiBps\":%.0f,"
                "\"lost_at_raw_bw_ms\":%.2f,\"goal_ms\":%.2f,\"within_goal\":%s}\n",
                np, dead, opt.host_loss ? "true" : "false", cfg.replicas, detector_name(cfg.detector), opt.mib,
                detect_med, detect_max, rep.total_seconds * 1e3, rep.shrink_seconds * 1e3, rep.window_seconds * 1e3,
                rep.rereplicate_seconds * 1e3, worst_total, (unsigned long long)rep.bytes_lost,
                (unsigned long long)rep.bytes_moved, (unsigned long long)rep.bytes_quarantined,
                (unsigned long long)rep.keys_repaired, (unsigned long long)rep.keys, raw_bw, lost_ms, goal_ms,
                worst_total <= goal_ms ? "true" : "false");
    std::fflush(stdout);
  }
  store_finalize(&s);
  MPI_Comm_free(&comm);
}

// What a new key costs each process in memory (see the header).
void run_key_memory(const Options &opt, int rank, int np) {
  if (np < 3) {
    if (rank == 0) std::fprintf(stderr, "store_bench: --op key-memory needs at least 3 ranks\n");
    return;
  }
  const int keys = opt.reps > 0 ? opt.reps : 50000;
  const std::size_t size = opt.sizes.front();
  std::vector<char> value(size, 'k');
  for (int rec : opt.recoveries) {
    store_config_t cfg;
    store_config_init(&cfg);
    cfg.replicas = 1;
    cfg.recovery = rec;
    store_t s = nullptr;
    if (store_init(MPI_COMM_WORLD, &cfg, &s) != STORE_OK) MPI_Abort(MPI_COMM_WORLD, 9);
    std::vector<store_key_t> mine; // rank 0: keys whose copy is on rank 1
    if (rank == 0) {
      for (store_key_t k = 1; static_cast<int>(mine.size()) < keys; ++k) {
        if (key_holders(s, k) == std::vector<int>{1}) mine.push_back(k);
      }
    }
    // Warm-up: the first keys also pay for one-off growth (window regions, MPI's request pools).
    for (store_key_t k = 0; rank == 0 && k < 64; ++k) store_put(s, (store_key_t{1} << 62) + k, value.data(), size);
    MPI_Barrier(MPI_COMM_WORLD);
    const store_info_t before = info_of(s);
    const double heap_before = static_cast<double>(mallinfo2().uordblks);
    MPI_Barrier(MPI_COMM_WORLD);
    for (store_key_t k : mine) {
      if (store_put(s, k, value.data(), size) != STORE_OK) MPI_Abort(MPI_COMM_WORLD, 10);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const store_info_t after = info_of(s);
    const double mine_grew[3] = {static_cast<double>(mallinfo2().uordblks) - heap_before,
                                 static_cast<double>(after.local_copies - before.local_copies),
                                 static_cast<double>(after.attached_bytes - before.attached_bytes)};
    std::vector<double> all(3 * static_cast<std::size_t>(np));
    MPI_Gather(mine_grew, 3, MPI_DOUBLE, all.data(), 3, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      double bystander = 0;
      for (int r = 2; r < np; ++r) bystander += all[3 * static_cast<std::size_t>(r)];
      bystander /= np - 2;
      const double k = keys;
      std::printf("{\"op\":\"key_memory\",\"np\":%d,\"recovery\":\"%s\",\"keys\":%d,\"size\":%zu,"
                  "\"writer_heap_per_key\":%.1f,\"holder_heap_per_key\":%.1f,\"bystander_heap_per_key\":%.1f,"
                  "\"holder_copies\":%.0f,\"holder_bookkeeping_per_copy\":%.1f,\"holder_window_per_copy\":%.1f}\n",
                  np, rec == STORE_RECOVERY_GLOBAL ? "global" : "localized", keys, size, all[0] / k, all[3] / k,
                  bystander / k, all[4], (all[3] - bystander) / k, all[5] / k);
      std::fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    store_finalize(&s);
  }
}

// The recovery pause each survivor sees (see the header). The last rank dies; survivors report
// to rank 0 over point-to-point messages, on a communicator made while all were alive.
void run_pause(const Options &opt, int rank, int np) {
  if (np < 3) {
    if (rank == 0) std::fprintf(stderr, "store_bench: --op pause needs at least 3 ranks\n");
    return;
  }
  const int recovery = opt.recoveries.front();
  const std::size_t size = opt.sizes.front();
  MPI_Comm peers = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &peers);
  MPI_Comm_set_errhandler(peers, MPI_ERRORS_RETURN);
  store_config_t cfg;
  store_config_init(&cfg);
  cfg.replicas = std::min(opt.replicas.front(), np - 1);
  cfg.detector = opt.detectors.front();
  cfg.recovery = recovery;
  store_t s = nullptr;
  if (store_init(MPI_COMM_WORLD, &cfg, &s) != STORE_OK) MPI_Abort(MPI_COMM_WORLD, 3);
  constexpr std::size_t kBulk = 1 << 20; // what the death leaves to repair
  std::vector<char> bulk(kBulk, 5), value(size, 9);
  for (int i = 0; i < opt.mib; ++i) {
    if (store_put(s, static_cast<store_key_t>(rank) * 100000 + static_cast<store_key_t>(i), bulk.data(), kBulk) !=
        STORE_OK)
      MPI_Abort(MPI_COMM_WORLD, 4);
  }
  const int victim = np - 1;
  const bool affected = rank % 2 == 1;
  store_key_t key = static_cast<store_key_t>(rank) * 100000 + 50000;
  for (;; ++key) {
    const std::vector<int> h = key_holders(s, key);
    if ((std::find(h.begin(), h.end(), victim) != h.end()) == affected) break;
  }
  if (rank != victim && store_put(s, key, value.data(), size) != STORE_OK) MPI_Abort(MPI_COMM_WORLD, 6);
  // As long before the death as after it: the longest gap before it is this machine's noise.
  double kill_at = now_us() + 1.5e6;
  MPI_Bcast(&kill_at, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == victim) {
    while (now_us() < kill_at) {
    }
    raise(SIGKILL);
  }
  // [first put after the death, longest gap after it (the pause), longest gap before it, puts]
  double result[4] = {0, 0, 0, 0};
  double first_ok = 0, last_ok = 0;
  MPI_Comm shrunk = MPI_COMM_NULL;
  for (;;) {
    const double t0 = now_us();
    const store_status_t st = store_put(s, key, value.data(), size);
    const double t1 = now_us();
    if (st == STORE_OK) {
      if (t0 >= kill_at && first_ok == 0) first_ok = t1;
      if (last_ok > 0) {
        double &gap = t1 >= kill_at ? result[1] : result[2];
        gap = std::max(gap, t1 - last_ok);
      }
      last_ok = t1;
      result[3] += 1;
    } else if (st == STORE_ERR_PROC_FAILED && recovery == STORE_RECOVERY_GLOBAL) {
      store_status_t rs;
      do {
        rs = store_recover(s, &shrunk);
      } while (rs == STORE_ERR_RECOVER_AGAIN);
      // The shortest path back to plain puts: no application recovery in between.
      if (rs != STORE_OK || store_back_to_normal(s) != STORE_OK) MPI_Abort(MPI_COMM_WORLD, 9);
    } else {
      std::fprintf(stderr, "store_bench: put during the pause: %s\n", store_strerror(st));
      MPI_Abort(MPI_COMM_WORLD, 10);
    }
    if (first_ok > 0 && t1 > kill_at + 1.5e6) break;
    if (t1 > kill_at + 60e6) MPI_Abort(MPI_COMM_WORLD, 5); // a hang would be a bug
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  result[0] = first_ok - kill_at;
  if (rank != 0) {
    MPI_Send(result, 4, MPI_DOUBLE, 0, 0, peers);
  } else {
    std::vector<double> first_put[2], pause[2], excess[2];
    double before = 0, puts = 0;
    for (int r = 0; r < victim; ++r) {
      double got[4];
      if (r == 0) {
        std::copy(result, result + 4, got);
      } else if (MPI_Recv(got, 4, MPI_DOUBLE, r, 0, peers, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        MPI_Abort(MPI_COMM_WORLD, 11);
      }
      first_put[r % 2].push_back(got[0] * 1e-3);
      pause[r % 2].push_back(got[1] * 1e-3);
      // What the death added: the rank's longest gap after it over its own longest gap before.
      excess[r % 2].push_back(std::max(0.0, got[1] - got[2]) * 1e-3);
      before = std::max(before, got[2] * 1e-3);
      puts += got[3];
    }
    std::printf("{\"op\":\"pause\",\"recovery\":\"%s\",\"np\":%d,\"replicas\":%d,\"detector\":\"%s\","
                "\"size\":%zu,\"mib_per_rank\":%d,\"puts\":%.0f,\"pause_before_kill_ms_max\":%.2f",
                recovery == STORE_RECOVERY_LOCALIZED ? "localized" : "global", np, cfg.replicas,
                detector_name(cfg.detector), size, opt.mib, puts, before);
    const char *names[2] = {"bystander", "affected"};
    for (int g = 0; g < 2; ++g) {
      std::sort(first_put[g].begin(), first_put[g].end());
      std::sort(pause[g].begin(), pause[g].end());
      std::sort(excess[g].begin(), excess[g].end());
      std::printf(",\"%s\":{\"ranks\":%zu,\"first_put_ms_median\":%.2f,\"first_put_ms_max\":%.2f,"
                  "\"pause_ms_median\":%.2f,\"pause_ms_max\":%.2f,\"excess_ms_median\":%.2f,\"excess_ms_max\":%.2f}",
                  names[g], first_put[g].size(), first_put[g][first_put[g].size() / 2], first_put[g].back(),
                  pause[g][pause[g].size() / 2], pause[g].back(), excess[g][excess[g].size() / 2], excess[g].back());
    }
    std::printf("}\n");
    std::fflush(stdout);
  }
  store_finalize(&s);
  if (shrunk != MPI_COMM_NULL) MPI_Comm_free(&shrunk);
  MPI_Comm_free(&peers);
}
} // namespace

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, np = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  Options opt;
  if (const int status = parse(argc, argv, rank == 0, opt); status >= 0) {
    MPI_Finalize();
    return status;
  }
  std::size_t max_size = 0;
  for (std::size_t s : opt.sizes) max_size = std::max(max_size, s);
  std::vector<Row> rows;
  std::vector<char> buf(max_size), rbuf(max_size);
  for (std::size_t i = 0; i < max_size; ++i) buf[i] = static_cast<char>(i * 131);
  auto raw_window = std::make_unique<RawWindow>(max_size); // freed before MPI_Finalize
  RawWindow &raw = *raw_window;
  const bool want = [&] {
    for (auto &o : opt.ops)
      if (o == "put" || o == "get") return true;
    return false;
  }();
  // Raw MPI as Open MPI does it by default, re-reading the target's region table before every
  // operation (scripts/openmpi-patches/0011): what the region cache saves, in the same run.
  std::unique_ptr<RawWindow> uncached;
  if (want) uncached = std::make_unique<RawWindow>(max_size, false);

  for (int r : opt.replicas) {
    for (int det : opt.detectors) {
      if (!want) break;
      if (r > np || (r == np && np > 1)) continue; // rank 0 must not hold a copy
      store_config_t cfg;
      store_config_init(&cfg);
      cfg.replicas = r;
      cfg.detector = det;
      if (opt.max_sleep_us >= 0) cfg.helper_max_sleep_us = opt.max_sleep_us;
      store_t s = nullptr;
      if (store_init(MPI_COMM_WORLD, &cfg, &s) != STORE_OK) {
        if (rank == 0) std::fprintf(stderr, "store_bench: store_init failed for r=%d\n", r);
        continue;
      }
      for (const std::string &op : opt.ops) {
        if (op != "put" && op != "get") continue;
        for (std::size_t size : opt.sizes) {
          const store_key_t key = remote_key(s, size + 7 * static_cast<std::size_t>(r));
          const std::vector<int> targets = key_holders(s, key);
          const int reps = reps_for(opt, size);
          // Creates the slots (and, for gets, the read grant): not part of the measurement.
          if (rank == 0) {
            store_put(s, key, buf.data(), size);
            std::size_t len = 0;
            store_get(s, key, rbuf.data(), rbuf.size(), &len);
          }
          // One timed operation; a failed one would time an error path, so it ends the run.
          const auto once = [&] {
            std::size_t len = 0;
            const store_status_t st =
                op == "put" ? store_put(s, key, buf.data(), size) : store_get(s, key, rbuf.data(), rbuf.size(), &len);
            if (st != STORE_OK) {
              std::fprintf(stderr, "store_bench: %s of %zu B: %s\n", op.c_str(), size, store_strerror(st));
              MPI_Abort(MPI_COMM_WORLD, 8);
            }
          };
          double idle_median = 0;
          for (const std::string &scenario : opt.scenarios) {
            Row row{op, scenario, size, r, np, reps, {}, {}, 0, det, 0};
            std::vector<double> ts, tr, tp, tu;
            if (scenario == "idle") {
              MPI_Barrier(MPI_COMM_WORLD);
              if (rank == 0) {
                for (int pass = 0; pass < 2; ++pass) { // pass 0 warms up
                  ts.clear();
                  tr.clear();
                  tu.clear();
                  for (int i = 0; i < reps; ++i) {
                    double t0 = now_us();
                    once();
                    double t1 = now_us();
                    if (op == "put")
                      raw.put(targets, buf.data(), size);
                    else
                      raw.get(targets[0], rbuf.data(), size);
                    double t2 = now_us();
                    if (op == "put")
                      uncached->put(targets, buf.data(), size);
                    else
                      uncached->get(targets[0], rbuf.data(), size);
                    ts.push_back(t1 - t0);
                    tr.push_back(t2 - t1);
                    tu.push_back(now_us() - t2);
                  }
                }
              }
              // The physical floor: one message round trip to the first holder, carrying the
              // value one way (a put sends it, a get receives it) and an empty message back.
              MPI_Barrier(MPI_COMM_WORLD);
              const int peer = targets[0];
              if (rank == 0 || rank == peer) {
                const bool to_peer = op == "put";
                for (int pass = 0; pass < 2; ++pass) {
                  tp.clear();
                  for (int i = 0; i < reps; ++i) {
                    const double t0 = now_us();
                    if (rank == 0) {
                      RawWindow::ok(
                          MPI_Send(buf.data(), to_peer ? static_cast<int>(size) : 0, MPI_BYTE, peer, 7, MPI_COMM_WORLD),
                          "MPI_Send");
                      RawWindow::ok(MPI_Recv(rbuf.data(), static_cast<int>(rbuf.size()), MPI_BYTE, peer, 7,
                                             MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                                    "MPI_Recv");
                    } else {
                      RawWindow::ok(MPI_Recv(rbuf.data(), static_cast<int>(rbuf.size()), MPI_BYTE, 0, 7, MPI_COMM_WORLD,
                                             MPI_STATUS_IGNORE),
                                    "MPI_Recv");
                      RawWindow::ok(
                          MPI_Send(buf.data(), to_peer ? 0 : static_cast<int>(size), MPI_BYTE, 0, 7, MPI_COMM_WORLD),
                          "MPI_Send");
                    }
                    tp.push_back(now_us() - t0);
                  }
                }
              }
              MPI_Barrier(MPI_COMM_WORLD);
            } else {
              // Targets compute without MPI long enough for rank 0 to finish all repetitions.
              double budget_ms = 0;
              if (rank == 0) budget_ms = std::max(300.0, 4 * idle_median * reps / 1000 + 100);
              MPI_Bcast(&budget_ms, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
              MPI_Barrier(MPI_COMM_WORLD);
              if (rank == 0) {
                // Give the targets' helpers time to cool down to their idle sleep first.
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
                const double until = now_us() + (budget_ms - 40) * 1000;
                for (int i = 0; i < reps && now_us() < until; ++i) {
                  double t0 = now_us();
                  once();
                  ts.push_back(now_us() - t0);
                }
              } else {
                compute_for(budget_ms);
              }
              MPI_Barrier(MPI_COMM_WORLD);
            }
            if (rank == 0) {
              row.store = stats(ts);
              if (scenario == "idle") {
                row.raw = stats(tr);
                row.pingpong = stats(tp);
                row.raw_uncached = stats(tu);
                idle_median = row.store.median;
              } else {
                // The raw baseline of a busy target waits for the whole compute phase (no helper);
                // the busy row is compared with the idle raw baseline and the idle store run.
                for (const Row &prev : rows) {
                  if (prev.op == op && prev.size == size && prev.replicas == r && prev.scenario == "idle")
                    row.raw = prev.raw;
                }
                row.idle_median = idle_median;
              }
              row.reps = static_cast<int>(ts.size());
              for (const Row &prev : rows) {
                if (prev.op == op && prev.size == size && prev.replicas == r && prev.scenario == scenario &&
                    prev.detector == STORE_DETECTOR_OFF && det != STORE_DETECTOR_OFF) {
                  row.off_median = prev.store.median;
                }
              }
              rows.push_back(row);
              emit(row);
            }
          }
        }
      }
      MPI_Barrier(MPI_COMM_WORLD);
      store_finalize(&s);
    }
  }

  // Detector cost: one store per detector, all alive at once, and every repetition puts through
  // each of them and the raw baseline in turn, so that drift hits all alike.
  if (std::find(opt.ops.begin(), opt.ops.end(), "detectors") != opt.ops.end()) {
    const int dets[] = {STORE_DETECTOR_OFF, STORE_DETECTOR_NOTIFY, STORE_DETECTOR_PING};
    store_t st[3] = {};
    const int r = std::min(opt.replicas.front(), np - 1 > 0 ? np - 1 : 1);
    for (int i = 0; i < 3; ++i) {
      store_config_t cfg;
      store_config_init(&cfg);
      cfg.replicas = r;
      cfg.detector = dets[i];
      if (store_init(MPI_COMM_WORLD, &cfg, &st[i]) != STORE_OK) MPI_Abort(MPI_COMM_WORLD, 7);
    }
    for (std::size_t size : opt.sizes) {
      const store_key_t key = remote_key(st[0], size + 11); // same placement in every store
      const std::vector<int> targets = key_holders(st[0], key);
      const int reps = reps_for(opt, size);
      std::vector<double> t[4];
      if (rank == 0) {
        for (store_t x : st) store_put(x, key, buf.data(), size);
        for (int pass = 0; pass < 2; ++pass) {
          for (auto &v : t) v.clear();
          for (int i = 0; i < reps; ++i) {
            // The order rotates: whoever goes first after the raw put finds the targets' caches
            // and helpers in another state than whoever goes last.
            for (int k = 0; k < 4; ++k) {
              const int d = (i + k) % 4;
              const double t0 = now_us();
              if (d < 3)
                store_put(st[d], key, buf.data(), size);
              else
                raw.put(targets, buf.data(), size);
              t[d].push_back(now_us() - t0);
            }
          }
        }
      }
      MPI_Barrier(MPI_COMM_WORLD);
      if (rank == 0) {
        for (int d = 0; d < 3; ++d) {
          Row row{"put", "idle", size, r, np, reps, stats(t[d]), stats(t[3]), 0, dets[d], 0};
          if (d > 0) row.off_median = stats(t[0]).median;
          rows.push_back(row);
          emit(row);
        }
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (store_t &x : st) store_finalize(&x);
  }

  // Cost of the slot locks: a global and a localized store side by side, every repetition
  // puts through both and the raw baseline in turn.
  if (std::find(opt.ops.begin(), opt.ops.end(), "variants") != opt.ops.end()) {
    const int recs[] = {STORE_RECOVERY_GLOBAL, STORE_RECOVERY_LOCALIZED};
    store_t st[2] = {};
    const int r = std::min(opt.replicas.front(), np - 1 > 0 ? np - 1 : 1);
    for (int i = 0; i < 2; ++i) {
      store_config_t cfg;
      store_config_init(&cfg);
      cfg.replicas = r;
      cfg.recovery = recs[i];
      if (opt.max_sleep_us >= 0) cfg.helper_max_sleep_us = opt.max_sleep_us;
      if (store_init(MPI_COMM_WORLD, &cfg, &st[i]) != STORE_OK) MPI_Abort(MPI_COMM_WORLD, 7);
    }
    for (std::size_t size : opt.sizes) {
      const store_key_t key = remote_key(st[0], size + 13); // same placement in both stores
      const std::vector<int> targets = key_holders(st[0], key);
      const int reps = reps_for(opt, size);
      std::vector<double> t[3];
      if (rank == 0) {
        for (store_t x : st) {
          if (store_put(x, key, buf.data(), size) != STORE_OK) MPI_Abort(MPI_COMM_WORLD, 8);
        }
        for (int pass = 0; pass < 2; ++pass) {
          for (auto &v : t) v.clear();
          for (int i = 0; i < reps; ++i) {
            for (int k = 0; k < 3; ++k) { // rotating, as for the detectors
              const int d = (i + k) % 3;
              const double t0 = now_us();
              if (d < 2) {
                if (store_put(st[d], key, buf.data(), size) != STORE_OK) MPI_Abort(MPI_COMM_WORLD, 8);
              } else {
                raw.put(targets, buf.data(), size);
              }
              t[d].push_back(now_us() - t0);
            }
          }
        }
      }
      MPI_Barrier(MPI_COMM_WORLD);
      if (rank == 0) {
        for (int d = 0; d < 2; ++d) {
          Row row{"put", "idle", size, r, np, reps, stats(t[d]), stats(t[2]), 0, STORE_DETECTOR_NOTIFY, 0};
          row.recovery = d == 0 ? "global" : "localized";
          if (d == 1) row.global_median = stats(t[0]).median;
          rows.push_back(row);
          emit(row);
        }
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (store_t &x : st) store_finalize(&x);
  }

  // Transactions: a commit of k keys against k single puts of the same keys, in one store, in
  // alternating blocks.
  if (std::find(opt.ops.begin(), opt.ops.end(), "tx") != opt.ops.end()) {
    for (int rec : opt.recoveries) {
      store_config_t cfg;
      store_config_init(&cfg);
      cfg.replicas = std::min(opt.replicas.front(), np - 1 > 0 ? np - 1 : 1);
      cfg.recovery = rec;
      if (opt.max_sleep_us >= 0) cfg.helper_max_sleep_us = opt.max_sleep_us;
      store_t s = nullptr;
      if (store_init(MPI_COMM_WORLD, &cfg, &s) != STORE_OK) MPI_Abort(MPI_COMM_WORLD, 7);
      for (std::size_t size : opt.sizes) {
        for (int k : {1, 2, 4}) {
          std::vector<store_key_t> keys;
          for (int i = 0; i < k; ++i) keys.push_back(remote_key(s, size * 8 + static_cast<std::size_t>(k * 4 + i)));
          const int reps = reps_for(opt, size);
          const auto commit = [&] {
            if (store_tx_begin(s) != STORE_OK) MPI_Abort(MPI_COMM_WORLD, 8);
            for (store_key_t key : keys) {
              if (store_put(s, key, buf.data(), size) != STORE_OK) MPI_Abort(MPI_COMM_WORLD, 8);
            }
            if (store_tx_commit(s) != STORE_OK) MPI_Abort(MPI_COMM_WORLD, 8);
          };
          const auto puts = [&] {
            for (store_key_t key : keys) {
              if (store_put(s, key, buf.data(), size) != STORE_OK) MPI_Abort(MPI_COMM_WORLD, 8);
            }
          };
          std::vector<double> t[2];
          if (rank == 0) {
            // In blocks: a commit and a put of the same key one after the other would each undo
            // what the other cached (localized: the commit gives the put's cached locks back).
            // Block 0 of each kind warms up.
            for (int block = 0; block < 6; ++block) {
              const int d = block % 2;
              if (block == 2) {
                for (auto &v : t) v.clear();
              }
              for (int i = 0; i < std::max(reps / 4, 1); ++i) {
                const double t0 = now_us();
                if (d == 0)
                  commit();
                else
                  puts();
                t[d].push_back(now_us() - t0);
              }
            }
            const Stats c = stats(t[0]), p = stats(t[1]);
            std::printf("{\"op\":\"tx\",\"recovery\":\"%s\",\"np\":%d,\"replicas\":%d,\"size\":%zu,\"keys\":%d,"
                        "\"reps\":%d,\"commit_us_median\":%.3f,\"commit_us_p99\":%.3f,\"puts_us_median\":%.3f,"
                        "\"puts_us_p99\":%.3f,\"commit_vs_puts\":%.3f}\n",
                        rec == STORE_RECOVERY_LOCALIZED ? "localized" : "global", np, cfg.replicas, size, k, reps,
                        c.median, c.p99, p.median, p.p99, c.median / p.median);
            std::fflush(stdout);
          }
          MPI_Barrier(MPI_COMM_WORLD);
        }
      }
      store_finalize(&s);
    }
  }

  // Helper CPU cost: every rank keeps a store, makes no calls for 2 s, and reports how much CPU
  // its helper thread used meanwhile.
  for (int det : opt.detectors) {
    if (std::find(opt.ops.begin(), opt.ops.end(), "cpu") == opt.ops.end()) break;
    store_config_t cfg;
    store_config_init(&cfg);
    cfg.replicas = 1;
    cfg.detector = det;
    if (opt.max_sleep_us >= 0) cfg.helper_max_sleep_us = opt.max_sleep_us;
    store_t s = nullptr;
    if (store_init(MPI_COMM_WORLD, &cfg, &s) == STORE_OK) {
      store_info_t a, b;
      store_info_init(&a);
      store_info_init(&b);
      MPI_Barrier(MPI_COMM_WORLD);
      std::this_thread::sleep_for(std::chrono::milliseconds(100)); // past the hot window
      store_get_info(s, &a);
      const double t0 = now_us();
      std::this_thread::sleep_for(std::chrono::seconds(2));
      store_get_info(s, &b);
      const double pct = 100.0 * (b.helper_cpu_seconds - a.helper_cpu_seconds) / ((now_us() - t0) * 1e-6);
      double sum = 0, mx = 0;
      MPI_Reduce(&pct, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
      MPI_Reduce(&pct, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      if (rank == 0) {
        std::printf("{\"op\":\"helper_cpu\",\"np\":%d,\"scenario\":\"idle\",\"max_sleep_us\":%d,"
                    "\"detector\":\"%s\",\"mean_pct_of_core\":%.2f,\"max_pct_of_core\":%.2f}\n",
                    np, cfg.helper_max_sleep_us, detector_name(det), sum / np, mx);
        std::fflush(stdout);
      }
      MPI_Barrier(MPI_COMM_WORLD);
      store_finalize(&s);
    }
  }

  // Memory a store_recover with no failure keeps, per call, against the communicator work of a
  // recovery done with raw ULFM calls in the same run (duplicate, revoke, shrink, agree, free).
  if (std::find(opt.ops.begin(), opt.ops.end(), "recover-memory") != opt.ops.end()) {
    const int rounds = opt.reps > 0 ? opt.reps : 200;
    constexpr int kWarmup = 10;
    const auto per_call = [&](auto &&round) {
      std::size_t before = 0;
      std::vector<double> t;
      for (int i = 0; i < kWarmup + rounds; ++i) {
        if (i == kWarmup) before = mallinfo2().uordblks;
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = now_us();
        round();
        if (i >= kWarmup) t.push_back(now_us() - t0);
      }
      const double bytes = (static_cast<double>(mallinfo2().uordblks) - static_cast<double>(before)) / rounds;
      double worst = 0;
      MPI_Allreduce(&bytes, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      return std::make_pair(worst, stats(t).median);
    };
    MPI_Comm base = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &base);
    MPI_Comm_set_errhandler(base, MPI_ERRORS_RETURN);
    const auto raw_cost = per_call([&] {
      MPI_Comm dup = MPI_COMM_NULL, shrunk = MPI_COMM_NULL;
      MPI_Comm_dup(base, &dup);
      MPIX_Comm_revoke(dup);
      MPIX_Comm_shrink(dup, &shrunk);
      int flag = 1;
      MPIX_Comm_agree(shrunk, &flag);
      MPI_Comm_free(&dup);
      MPI_Comm_free(&shrunk);
    });
    MPI_Comm_free(&base);
    for (int rec : {STORE_RECOVERY_GLOBAL, STORE_RECOVERY_LOCALIZED}) {
      store_config_t cfg;
      store_config_init(&cfg);
      cfg.replicas = std::min(2, np);
      cfg.recovery = rec;
      store_t s = nullptr;
      if (store_init(MPI_COMM_WORLD, &cfg, &s) != STORE_OK) MPI_Abort(MPI_COMM_WORLD, 9);
      for (int k = 0; k < 64; ++k) store_put(s, static_cast<store_key_t>(rank * 1000 + k), buf.data(), 64);
      const auto cost = per_call([&] {
        MPI_Comm c = MPI_COMM_NULL;
        if (store_recover(s, &c) != STORE_OK) MPI_Abort(MPI_COMM_WORLD, 9);
        MPI_Comm_free(&c);
        store_back_to_normal(s);
      });
      if (rank == 0) {
        std::printf("{\"op\":\"recover_memory\",\"np\":%d,\"recovery\":\"%s\",\"rounds\":%d,"
                    "\"bytes_per_call\":%.0f,\"raw_bytes_per_call\":%.0f,\"median_us\":%.1f,\"raw_median_us\":%.1f,"
                    "\"ratio\":%.2f}\n",
                    np, rec == STORE_RECOVERY_GLOBAL ? "global" : "localized", rounds, cost.first, raw_cost.first,
                    cost.second, raw_cost.second, cost.second / raw_cost.second);
        std::fflush(stdout);
      }
      MPI_Barrier(MPI_COMM_WORLD);
      store_finalize(&s);
    }
  }

  uncached.reset();
  if (std::find(opt.ops.begin(), opt.ops.end(), "key-memory") != opt.ops.end()) run_key_memory(opt, rank, np);

  if (std::find(opt.ops.begin(), opt.ops.end(), "pause") != opt.ops.end()) {
    run_pause(opt, rank, np);
    (void)raw_window.release(); // it spans the dead process: left to MPI_Finalize
  } else if (std::find(opt.ops.begin(), opt.ops.end(), "failure") != opt.ops.end()) {
    run_failure(opt, raw, rank, np);
    (void)raw_window.release(); // it spans the dead process: left to MPI_Finalize
  }

  if (rank == 0 && !rows.empty()) {
    std::fprintf(stderr, "\n%-4s %-5s %10s %3s %3s %10s %10s %10s %7s %9s\n", "op", "scen", "size", "r", "np",
                 "median_us", "p99_us", "raw_med_us", "ratio", "MiB/s");
    for (const Row &r : rows) {
      std::fprintf(stderr, "%-4s %-5s %10zu %3d %3d %10.2f %10.2f %10.2f %7.2f %9.0f\n", r.op.c_str(),
                   r.scenario.c_str(), r.size, r.replicas, r.np, r.store.median, r.store.p99, r.raw.median,
                   r.raw.median > 0 ? r.store.median / r.raw.median : 0,
                   static_cast<double>(r.size) * (r.op == "put" ? r.replicas : 1) / (1 << 20) /
                       (r.store.median * 1e-6));
    }
  }
  raw_window.reset();
  MPI_Finalize();
  return 0;
}
