// snapshot_bench: what the durable tier costs (issue 26), each figure against a raw baseline
// measured in the same run on the same directory.
//
//   mpirun -n 4 snapshot_bench --dir DIR [--mib 16,64] [--value-size B] [--replicas R] [--reps N]
//
// Every process puts --mib MiB of values (--value-size bytes each, default 64 KiB). Then, --reps
// times, alternated:
//   snapshot - store_snapshot, timed from a barrier to the slowest process's return. Bandwidth
//              per process: the bytes of its own part over that time.
//   raw      - every process writes the same number of bytes to a new file of its own in DIR
//              (1 MiB writes, then fsync), timed the same way: the sequential write bandwidth of
//              the directory with fsync, the goal's baseline (snapshot at least 0.8x raw). The
//              file before it is removed untimed, as store_snapshot removes the parts of the
//              snapshots it drops in the background.
//   restart  - store_finalize, then store_init with restore, timed: the whole restart (read
//              the parts, check them, put every value back with its copies), against raw: every
//              process reads its raw file back. Both read what was just written (the page cache
//              holds it; a cold cache would slow both). Also the time of a store_init that
//              restores nothing, the floor of any restart.
//   put during - store_put latency (repeat puts of one key of --put-size bytes, each process its
//              own) while a snapshot runs in the background (store_snapshot_start, then puts
//              for 80% of the blocking snapshot's time, then store_snapshot_wait), against the
//              same loop with no snapshot right before it: the slowest process's median each.
// With --local-dir L (a node-local directory, e.g. /dev/shm), a second store has two levels
// (snapshot_local_dir L, snapshot_dir DIR/two-levels), holds the same values, and after the
// one-level snapshots, --reps times:
//   two_levels - its store_snapshot (the parts written to L), against the one-level
//              store_snapshot of the same rep; then store_snapshot_flush_wait (the flush to
//              DIR); and raw writes of the same bytes to L.
//   restart_two_levels - its restart (the parts read from L), against the one-level restart.
// Output: one JSON object per line.
#include <fcntl.h>
#include <getopt.h>
#include <mpi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "rmastore/store.h"

namespace {

using namespace rmastore::bench;

struct Options {
  std::string dir;
  std::vector<std::size_t> mib = {16, 64};
  std::size_t value_size = 64 * 1024;
  int replicas = 2;
  int reps = 3;
  std::size_t put_size = 4096;
  std::string local_dir;
};

constexpr const char *kUsage =
    "usage: snapshot_bench --dir DIR [--mib 16,64] [--value-size B] [--replicas R] [--reps N] [--put-size B] "
    "[--local-dir L] [--help]\n";

int parse(int argc, char **argv, bool talk, Options &o) {
  enum { kDir = 256, kMib, kValueSize, kReplicas, kReps, kPutSize, kLocalDir, kHelp };
  static const option longopts[] = {{"dir", required_argument, nullptr, kDir},
                                    {"mib", required_argument, nullptr, kMib},
                                    {"value-size", required_argument, nullptr, kValueSize},
                                    {"replicas", required_argument, nullptr, kReplicas},
                                    {"reps", required_argument, nullptr, kReps},
                                    {"put-size", required_argument, nullptr, kPutSize},
                                    {"local-dir", required_argument, nullptr, kLocalDir},
                                    {"help", no_argument, nullptr, kHelp},
                                    {nullptr, 0, nullptr, 0}};
  const auto bad = [&](const char *what) {
    if (talk) std::fprintf(stderr, "snapshot_bench: %s\n%s", what, kUsage);
    return 2;
  };
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, "", longopts, nullptr)) != -1;) {
    switch (c) {
    case kDir:
      o.dir = optarg;
      break;
    case kMib: {
      o.mib.clear();
      for (const std::string &s : split(optarg)) {
        std::size_t v = 0;
        if (!parse_size(s, v) || v == 0) return bad("--mib takes positive sizes in MiB");
        o.mib.push_back(v);
      }
      break;
    }
    case kValueSize:
      if (!parse_size(optarg, o.value_size) || o.value_size == 0) return bad("--value-size must be positive");
      break;
    case kReplicas:
      if (!parse_int(optarg, o.replicas, 1)) return bad("--replicas must be at least 1");
      break;
    case kReps:
      if (!parse_int(optarg, o.reps, 1)) return bad("--reps must be at least 1");
      break;
    case kPutSize:
      if (!parse_size(optarg, o.put_size)) return bad("--put-size must be a size");
      break;
    case kLocalDir:
      o.local_dir = optarg;
      break;
    case kHelp:
      if (talk) std::printf("%s", kUsage);
      return 1;
    default:
      return bad("unknown option");
    }
  }
  if (o.dir.empty()) return bad("--dir is required");
  return 0;
}

void check(store_status_t st, const char *what) {
  if (st == STORE_OK) return;
  std::fprintf(stderr, "snapshot_bench: %s: %s\n", what, store_strerror(st));
  MPI_Abort(MPI_COMM_WORLD, 1);
}

// Seconds from a barrier to the slowest process's end of `body`. Unless `now`, it starts with
// nothing dirty left to write back (sync), so that no write pays for what ran before it (the
// first snapshot of a run paid up to 4x for the files a previous run had removed).
template <class F> double timed(F &&body, bool now = false) {
  if (!now) ::sync();
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now_us();
  body();
  double mine = (now_us() - t0) / 1e6, slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

void raw_write(const std::string &path, std::size_t bytes) {
  std::vector<char> buf(std::size_t{1} << 20, 'x');
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) MPI_Abort(MPI_COMM_WORLD, 1);
  for (std::size_t done = 0; done < bytes;) {
    const std::size_t n = std::min(buf.size(), bytes - done);
    if (::write(fd, buf.data(), n) != static_cast<ssize_t>(n)) MPI_Abort(MPI_COMM_WORLD, 1);
    done += n;
  }
  if (::fsync(fd) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
  ::close(fd);
}

void raw_read(const std::string &path) {
  std::vector<char> buf(std::size_t{1} << 20);
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) MPI_Abort(MPI_COMM_WORLD, 1);
  while (::read(fd, buf.data(), buf.size()) > 0) {
  }
  ::close(fd);
}

// Repeat puts of `key` for `seconds`: the median latency in µs, the slowest process's.
double put_median_us(store_t s, store_key_t key, const std::vector<char> &value, double seconds) {
  std::vector<double> lat;
  const double end = now_us() + seconds * 1e6;
  for (double t = now_us(); t < end; t = now_us()) {
    check(store_put(s, key, value.data(), value.size()), "store_put");
    lat.push_back(now_us() - t);
  }
  std::sort(lat.begin(), lat.end());
  double mine = lat.empty() ? 0 : lat[lat.size() / 2], slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

std::size_t file_size(const std::string &path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::size_t>(st.st_size) : 0;
}

} // namespace

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, np = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  Options o;
  if (const int rc = parse(argc, argv, rank == 0, o); rc != 0) {
    MPI_Finalize();
    return rc == 1 ? 0 : rc;
  }
  // A new raw file each rep, the one before removed untimed: a snapshot removes the parts it
  // drops in the background too.
  const auto raw_path = [&](int rep) { return o.dir + "/raw-" + std::to_string(rank) + "-" + std::to_string(rep); };
  for (std::size_t mib : o.mib) {
    store_config_t cfg;
    store_config_init(&cfg);
    cfg.replicas = std::min(o.replicas, np);
    cfg.capacity_hint = mib << 21; // its copies and the copies it holds for others
    cfg.snapshot_dir = o.dir.c_str();
    cfg.snapshot_keep = 1;
    store_t s = nullptr;
    check(store_init(MPI_COMM_WORLD, &cfg, &s), "store_init");
    const std::size_t values = (mib << 20) / o.value_size;
    std::vector<char> value(o.value_size, static_cast<char>('a' + rank));
    for (std::size_t i = 0; i < values; ++i) {
      const store_key_t key = (static_cast<store_key_t>(rank) << 32) | i;
      check(store_put(s, key, value.data(), value.size()), "store_put");
    }
    // The two-level store, with the same values.
    const std::string two_dir = o.dir + "/two-levels";
    store_config_t cfg2 = cfg;
    store_t s2 = nullptr;
    if (!o.local_dir.empty()) {
      if (rank == 0) ::mkdir(two_dir.c_str(), 0755);
      MPI_Barrier(MPI_COMM_WORLD);
      cfg2.snapshot_dir = two_dir.c_str();
      cfg2.snapshot_local_dir = o.local_dir.c_str();
      check(store_init(MPI_COMM_WORLD, &cfg2, &s2), "store_init with two levels");
      for (std::size_t i = 0; i < values; ++i) {
        const store_key_t key = (static_cast<store_key_t>(rank) << 32) | i;
        check(store_put(s2, key, value.data(), value.size()), "store_put");
      }
    }
    const store_key_t probe = (static_cast<store_key_t>(rank) << 32) | 0xffffffffu;
    const std::vector<char> probe_value(o.put_size, 'p');
    check(store_put(s, probe, probe_value.data(), probe_value.size()), "store_put");
    double blocking = 0;
    std::vector<double> one_level;
    std::size_t most = 0;
    for (int rep = 1; rep <= o.reps; ++rep) {
      std::uint64_t seq = 0;
      const double snap = timed([&] { check(store_snapshot(s, &seq), "store_snapshot"); });
      blocking = std::max(blocking, snap);
      char part[64];
      std::snprintf(part, sizeof part, "/snap-%010llu/part-%d", static_cast<unsigned long long>(seq), rank);
      const std::size_t mine = file_size(o.dir + part);
      MPI_Allreduce(&mine, &most, 1, MPI_UNSIGNED_LONG, MPI_MAX, MPI_COMM_WORLD);
      one_level.push_back(snap);
      // The snapshots this one dropped are removed in the background: not during the raw write.
      check(store_snapshot_flush_wait(s, nullptr), "store_snapshot_flush_wait");
      const double raw = timed([&] { raw_write(raw_path(rep), most); });
      ::unlink(raw_path(rep - 1).c_str());
      if (rank == 0) {
        const double snap_bw = static_cast<double>(most) / 1048576.0 / snap;
        const double raw_bw = static_cast<double>(most) / 1048576.0 / raw;
        std::printf("{\"op\":\"snapshot\",\"np\":%d,\"mib_per_process\":%zu,\"value_size\":%zu,\"replicas\":%d,"
                    "\"rep\":%d,\"part_bytes\":%zu,\"seconds\":%.4f,\"raw_seconds\":%.4f,\"MiBps\":%.1f,"
                    "\"raw_MiBps\":%.1f,\"ratio\":%.3f}\n",
                    np, mib, o.value_size, cfg.replicas, rep, most, snap, raw, snap_bw, raw_bw, snap_bw / raw_bw);
        std::fflush(stdout);
      }
    }
    // After the one-level snapshots, so that neither disturbs the other; each against the
    // one-level snapshot of the same rep.
    for (int rep = 1; s2 != nullptr && rep <= o.reps; ++rep) {
      const double snap = one_level[static_cast<std::size_t>(rep - 1)];
      const double local = timed([&] { check(store_snapshot(s2, nullptr), "store_snapshot with two levels"); });
      const double flush =
          timed([&] { check(store_snapshot_flush_wait(s2, nullptr), "store_snapshot_flush_wait"); }, true);
      const double raw_local = timed([&] { raw_write(o.local_dir + "/raw-" + std::to_string(rank), most); });
      ::unlink((o.local_dir + "/raw-" + std::to_string(rank)).c_str());
      if (rank == 0) {
        std::printf("{\"op\":\"two_levels\",\"np\":%d,\"mib_per_process\":%zu,\"value_size\":%zu,\"replicas\":%d,"
                    "\"rep\":%d,\"part_bytes\":%zu,\"seconds\":%.4f,\"flush_seconds\":%.4f,"
                    "\"one_level_seconds\":%.4f,\"raw_local_seconds\":%.4f,\"ratio\":%.3f}\n",
                    np, mib, o.value_size, cfg.replicas, rep, most, local, flush, snap, raw_local, local / snap);
        std::fflush(stdout);
      }
    }
    // Put latency with a snapshot in the background, against none, alternated.
    const double window = 0.8 * blocking;
    for (int rep = 1; rep <= o.reps; ++rep) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double quiet = put_median_us(s, probe, probe_value, window);
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = now_us();
      check(store_snapshot_start(s, nullptr), "store_snapshot_start");
      const double started = now_us();
      const double during = put_median_us(s, probe, probe_value, window);
      const double waited = now_us();
      check(store_snapshot_wait(s), "store_snapshot_wait");
      const double done = now_us();
      if (rank == 0) {
        std::printf("{\"op\":\"put_during_snapshot\",\"np\":%d,\"mib_per_process\":%zu,\"replicas\":%d,"
                    "\"put_size\":%zu,\"rep\":%d,\"window_seconds\":%.4f,\"start_seconds\":%.4f,"
                    "\"wait_seconds\":%.4f,\"median_us\":%.2f,\"quiet_median_us\":%.2f,\"ratio\":%.3f}\n",
                    np, mib, cfg.replicas, o.put_size, rep, window, (started - t0) / 1e6, (done - waited) / 1e6, during,
                    quiet, during / quiet);
        std::fflush(stdout);
      }
    }
    check(store_finalize(&s), "store_finalize");
    // Restart from the last snapshot, against reading the raw files back.
    cfg.restore = 1;
    const double restart = timed([&] { check(store_init(MPI_COMM_WORLD, &cfg, &s), "store_init with restore"); });
    const double raw = timed([&] { raw_read(raw_path(o.reps)); });
    // What store_init costs without restoring anything: the floor of any restart.
    store_t empty = nullptr;
    cfg.restore = 0;
    const double init = timed([&] { check(store_init(MPI_COMM_WORLD, &cfg, &empty), "store_init"); });
    check(store_finalize(&empty), "store_finalize");
    store_info_t info;
    store_info_init(&info);
    check(store_get_info(s, &info), "store_get_info");
    std::uint64_t keys = info.restored_keys, all = 0;
    MPI_Allreduce(&keys, &all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
      std::printf("{\"op\":\"restart\",\"np\":%d,\"mib_per_process\":%zu,\"value_size\":%zu,\"replicas\":%d,"
                  "\"keys\":%llu,\"seconds\":%.4f,\"init_seconds\":%.4f,\"raw_read_seconds\":%.4f,"
                  "\"MiBps\":%.1f,\"ratio\":%.3f}\n",
                  np, mib, o.value_size, cfg.replicas, static_cast<unsigned long long>(all), restart, init, raw,
                  static_cast<double>(mib) / restart, restart / raw);
      std::fflush(stdout);
    }
    if (s2 != nullptr) {
      check(store_finalize(&s2), "store_finalize");
      cfg2.restore = 1;
      const double restart2 =
          timed([&] { check(store_init(MPI_COMM_WORLD, &cfg2, &s2), "store_init with restore, two levels"); });
      check(store_get_info(s2, &info), "store_get_info");
      int parts = 0;
      MPI_Allreduce(&info.restored_local_parts, &parts, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
      if (rank == 0) {
        std::printf("{\"op\":\"restart_two_levels\",\"np\":%d,\"mib_per_process\":%zu,\"replicas\":%d,"
                    "\"local_parts\":%d,\"seconds\":%.4f,\"one_level_seconds\":%.4f,\"ratio\":%.3f}\n",
                    np, mib, cfg.replicas, parts, restart2, restart, restart2 / restart);
        std::fflush(stdout);
      }
      check(store_finalize(&s2), "store_finalize");
    }
    check(store_finalize(&s), "store_finalize");
    ::unlink(raw_path(o.reps).c_str());
  }
  MPI_Finalize();
  return 0;
}
