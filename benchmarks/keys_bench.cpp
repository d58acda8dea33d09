// keys_bench: what keys that come and go cost (issue 12): the first put of a key against a
// repeat put, the control messages per new key, deletes, batches and nonblocking puts, and the
// memory a bystander keeps. Rank 0 is the client, the others serve it from inside MPI (idle), and
// every figure is a ratio against a raw MPI baseline measured in the same run.
//
//   mpirun -n 4 keys_bench [--op newkey,delete,batch,nb,memory] [--keys N] [--size B]
//                          [--replicas R] [--recovery global,localized] [--reps N] [--help]
//
//   newkey - rank 0 puts --keys new keys (first puts), then each again (repeat puts). Per key:
//            microseconds of each, and the control messages each sent (store_info_t
//            requests_sent). Baselines: the raw put (MPI_Put + MPI_Win_flush_all to the key's
//            holders) and a raw round trip to them (MPI_Send + MPI_Recv each).
//   delete - rank 0 puts --keys new keys, then deletes them. Per key: a delete against a first
//            put and a repeat put of the same keys, and the raw put.
//   batch  - rank 0 puts --keys new keys one at a time and --keys others with one
//            store_put_many; then puts both sets again (repeat puts); then reads each set with
//            store_get and with one store_get_many. Per key, and batch against single; the
//            raw baseline of a batch is as many raw puts completed by one flush.
//   nb     - rank 0 puts --keys new keys with store_put_nb, then waits for them all; against
//            the same number of store_put calls of other new keys.
//   memory - every rank but the last (the bystander) puts --keys new keys whose holders and
//            witnesses leave out the bystander; the heap growth per key of a writer and of the
//            bystander (malloc's bytes in use).
// --reps runs each measurement that many times (default 3) and reports every run; the keys
// differ in every run. Output: one JSON object per line.
//
// It links the installed library and uses only its installed headers (rmastore/store_hooks.h
// for where a key's copies and records are).
#include <getopt.h>
#include <malloc.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "rmastore/store.h"
#include "rmastore/store_hooks.h"

namespace {

using namespace rmastore::bench;

struct Options {
  std::vector<std::string> ops = {"newkey", "delete", "batch", "nb"};
  int keys = 1000;
  std::size_t size = 8;
  int replicas = 2;
  std::vector<int> recoveries = {STORE_RECOVERY_GLOBAL, STORE_RECOVERY_LOCALIZED};
  int reps = 3;
};

constexpr const char *kUsage =
    "usage: keys_bench [--op newkey,delete,batch,nb,memory] [--keys N] [--size B] [--replicas R]\n"
    "                  [--recovery global,localized] [--reps N] [--help]\n";

int parse(int argc, char **argv, bool talk, Options &o) {
  enum { kOp = 256, kKeys, kSize, kReplicas, kRecovery, kReps };
  static const option longopts[] = {{"op", required_argument, nullptr, kOp},
                                    {"keys", required_argument, nullptr, kKeys},
                                    {"size", required_argument, nullptr, kSize},
                                    {"replicas", required_argument, nullptr, kReplicas},
                                    {"recovery", required_argument, nullptr, kRecovery},
                                    {"reps", required_argument, nullptr, kReps},
                                    {"help", no_argument, nullptr, 'h'},
                                    {nullptr, 0, nullptr, 0}};
  const auto refuse = [&](const char *what, const char *value) {
    if (talk) std::fprintf(stderr, "keys_bench: %s: '%s'\n%s", what, value, kUsage);
    return 2;
  };
  opterr = talk ? 1 : 0;
  for (int c; (c = getopt_long(argc, argv, "h", longopts, nullptr)) != -1;) {
    const std::string v = optarg != nullptr ? optarg : "";
    switch (c) {
    case kOp:
      o.ops = split(v);
      if (!all_of_names(o.ops, {"newkey", "delete", "batch", "nb", "memory"}))
        return refuse("--op takes newkey, delete, batch, nb, memory", optarg);
      break;
    case kKeys:
      if (!parse_int(v, o.keys, 1)) return refuse("--keys takes a count of at least 1", optarg);
      break;
    case kSize:
      if (!parse_size(v, o.size) || o.size > (1u << 20)) return refuse("--size takes bytes up to 1M", optarg);
      break;
    case kReplicas:
      if (!parse_int(v, o.replicas, 1)) return refuse("--replicas takes a count of at least 1", optarg);
      break;
    case kRecovery: {
      const std::vector<std::string> names = split(v);
      if (!all_of_names(names, {"global", "localized"})) return refuse("--recovery takes global, localized", optarg);
      o.recoveries.clear();
      for (const std::string &r : names)
        o.recoveries.push_back(r == "localized" ? STORE_RECOVERY_LOCALIZED : STORE_RECOVERY_GLOBAL);
      break;
    }
    case kReps:
      if (!parse_int(v, o.reps, 1)) return refuse("--reps takes a count of at least 1", optarg);
      break;
    case 'h':
      if (talk) std::fputs(kUsage, stdout);
      return 0;
    default:
      if (talk) std::fputs(kUsage, stderr);
      return 2;
    }
  }
  if (optind < argc) return refuse("unexpected argument", argv[optind]);
  return -1;
}

const char *name(int recovery) {
  return recovery == STORE_RECOVERY_LOCALIZED ? "localized" : "global";
}

void check(store_status_t st, const char *what) {
  if (st == STORE_OK) return;
  std::fprintf(stderr, "keys_bench: %s: %s\n", what, store_strerror(st));
  MPI_Abort(MPI_COMM_WORLD, 3);
}

// The raw baselines: a put to some ranks on a plain dynamic window (RawWindow, bench_util.hpp),
// completed by a flush, and a round trip (a message to each rank and its answer).
constexpr int kTagPing = 77, kTagStop = 78;

// Rank 0's raw round trip: one message to each target and its answer; the targets echo from
// serve_pings() until told to stop.
double raw_round_trip_us(const std::vector<int> &targets, int reps) {
  std::vector<double> t;
  char b = 0;
  for (int i = 0; i < reps; ++i) {
    const double t0 = now_us();
    for (int r : targets) MPI_Send(&b, 1, MPI_CHAR, r, kTagPing, MPI_COMM_WORLD);
    for (int r : targets) MPI_Recv(&b, 1, MPI_CHAR, r, kTagPing, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    t.push_back(now_us() - t0);
  }
  return stats(t).median;
}

void serve_pings() {
  for (;;) {
    char b = 0;
    MPI_Status st;
    MPI_Recv(&b, 1, MPI_CHAR, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
    if (st.MPI_TAG == kTagStop) return;
    MPI_Send(&b, 1, MPI_CHAR, 0, kTagPing, MPI_COMM_WORLD);
  }
}

void stop_pings(int np) {
  char b = 0;
  for (int r = 1; r < np; ++r) MPI_Send(&b, 1, MPI_CHAR, r, kTagStop, MPI_COMM_WORLD);
}

std::uint64_t requests_sent(store_t s) {
  return info_of(s).requests_sent;
}

// New keys for run `run` of a measurement: distinct across runs and measurements.
std::vector<store_key_t> fresh_keys(std::uint64_t tag, int run, int n) {
  std::vector<store_key_t> k(static_cast<std::size_t>(n));
  const store_key_t base = (tag << 48) + (static_cast<store_key_t>(run) << 32);
  for (int i = 0; i < n; ++i) k[static_cast<std::size_t>(i)] = base + static_cast<store_key_t>(i);
  return k;
}

// Rank 0's per-key microseconds of `op` over `keys`.
template <class F> double per_key_us(const std::vector<store_key_t> &keys, F &&op) {
  const double t0 = now_us();
  for (store_key_t k : keys) op(k);
  return (now_us() - t0) / static_cast<double>(keys.size());
}

void run_newkey(const Options &o, store_t s, RawWindow &raw, int run, const char *rec, int np) {
  const std::vector<store_key_t> keys = fresh_keys(1, run, o.keys);
  std::vector<char> v(o.size, 'n');
  const std::uint64_t m0 = requests_sent(s);
  const double first = per_key_us(keys, [&](store_key_t k) { check(store_put(s, k, v.data(), v.size()), "put"); });
  const std::uint64_t m1 = requests_sent(s);
  const double repeat = per_key_us(keys, [&](store_key_t k) { check(store_put(s, k, v.data(), v.size()), "put"); });
  const std::uint64_t m2 = requests_sent(s);
  // The baselines aim at the holders of the first key (all keys have as many).
  const std::vector<int> holders = key_holders(s, keys.front());
  std::vector<int> remote;
  for (int h : holders)
    if (h != 0) remote.push_back(h);
  std::vector<double> rp;
  for (int i = 0; i < 200; ++i) {
    const double t0 = now_us();
    raw.put(remote, v.data(), v.size());
    rp.push_back(now_us() - t0);
  }
  std::vector<int> others;
  for (int r = 1; r < np; ++r) others.push_back(r);
  const double rtt = raw_round_trip_us({others.front()}, 200);
  const double k = static_cast<double>(keys.size());
  std::printf("{\"op\":\"newkey\",\"recovery\":\"%s\",\"np\":%d,\"replicas\":%d,\"size\":%zu,\"keys\":%d,\"run\":%d,"
              "\"first_put_us\":%.2f,\"repeat_put_us\":%.2f,\"first_vs_repeat\":%.2f,"
              "\"messages_per_new_key\":%.3f,\"messages_per_repeat_put\":%.3f,"
              "\"raw_put_us\":%.2f,\"raw_round_trip_us\":%.2f,\"first_vs_raw_round_trip\":%.2f}\n",
              rec, np, o.replicas, o.size, o.keys, run, first, repeat, first / repeat, static_cast<double>(m1 - m0) / k,
              static_cast<double>(m2 - m1) / k, stats(rp).median, rtt, first / rtt);
  std::fflush(stdout);
}

void run_delete(const Options &o, store_t s, RawWindow &raw, int run, const char *rec, int np) {
  const std::vector<store_key_t> keys = fresh_keys(2, run, o.keys);
  std::vector<char> v(o.size, 'd');
  const double first = per_key_us(keys, [&](store_key_t k) { check(store_put(s, k, v.data(), v.size()), "put"); });
  const double repeat = per_key_us(keys, [&](store_key_t k) { check(store_put(s, k, v.data(), v.size()), "put"); });
  const std::uint64_t m0 = requests_sent(s);
  const double del = per_key_us(keys, [&](store_key_t k) { check(store_delete(s, k), "delete"); });
  const std::uint64_t m1 = requests_sent(s);
  std::vector<int> remote;
  for (int h : key_holders(s, keys.front()))
    if (h != 0) remote.push_back(h);
  std::vector<double> rp;
  for (int i = 0; i < 200; ++i) {
    const double t0 = now_us();
    raw.put(remote, v.data(), v.size());
    rp.push_back(now_us() - t0);
  }
  std::printf(
      "{\"op\":\"delete\",\"recovery\":\"%s\",\"np\":%d,\"replicas\":%d,\"size\":%zu,\"keys\":%d,\"run\":%d,"
      "\"delete_us\":%.2f,\"first_put_us\":%.2f,\"repeat_put_us\":%.2f,\"delete_vs_first_put\":%.2f,"
      "\"delete_vs_repeat_put\":%.2f,\"messages_per_delete\":%.3f,\"raw_put_us\":%.2f,\"delete_vs_raw\":%.2f}\n",
      rec, np, o.replicas, o.size, o.keys, run, del, first, repeat, del / first, del / repeat,
      static_cast<double>(m1 - m0) / static_cast<double>(keys.size()), stats(rp).median, del / stats(rp).median);
  std::fflush(stdout);
}

void run_batch(const Options &o, store_t s, RawWindow &raw, int run, const char *rec, int np) {
  const std::vector<store_key_t> single = fresh_keys(3, run, o.keys), batch = fresh_keys(4, run, o.keys);
  std::vector<char> v(o.size, 'b');
  std::vector<const void *> bufs(batch.size(), v.data());
  std::vector<size_t> lens(batch.size(), v.size());
  const double k = static_cast<double>(o.keys);
  double t0 = now_us();
  for (store_key_t key : single) check(store_put(s, key, v.data(), v.size()), "put");
  const double new_single = (now_us() - t0) / k;
  t0 = now_us();
  check(store_put_many(s, batch.size(), batch.data(), bufs.data(), lens.data()), "put_many");
  const double new_batch = (now_us() - t0) / k;
  t0 = now_us();
  for (store_key_t key : single) check(store_put(s, key, v.data(), v.size()), "put");
  const double repeat_single = (now_us() - t0) / k;
  t0 = now_us();
  check(store_put_many(s, batch.size(), batch.data(), bufs.data(), lens.data()), "put_many");
  const double repeat_batch = (now_us() - t0) / k;
  std::vector<char> out(batch.size() * std::max<std::size_t>(o.size, 1));
  std::vector<void *> obufs(batch.size());
  std::vector<size_t> caps(batch.size(), o.size), olens(batch.size());
  std::vector<store_status_t> sts(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) obufs[i] = out.data() + i * std::max<std::size_t>(o.size, 1);
  t0 = now_us();
  for (store_key_t key : single) {
    size_t len = 0;
    check(store_get(s, key, out.data(), o.size, &len), "get");
  }
  const double get_single = (now_us() - t0) / k;
  t0 = now_us();
  check(store_get_many(s, batch.size(), batch.data(), obufs.data(), caps.data(), olens.data(), sts.data()), "get_many");
  const double get_batch = (now_us() - t0) / k;
  for (store_status_t st : sts) check(st, "get_many's key");
  std::vector<int> remote;
  for (int h : key_holders(s, batch.front()))
    if (h != 0) remote.push_back(h);
  std::vector<double> rp, rb;
  for (int i = 0; i < 200; ++i) {
    const double t = now_us();
    raw.put(remote, v.data(), v.size());
    rp.push_back(now_us() - t);
  }
  // A batch's raw counterpart: as many puts, one flush.
  for (int i = 0; i < 5; ++i) {
    const double t = now_us();
    raw.put_many(remote, v.data(), v.size(), o.keys);
    rb.push_back((now_us() - t) / k);
  }
  const double raw_batch = stats(rb).median;
  std::printf("{\"op\":\"batch\",\"recovery\":\"%s\",\"np\":%d,\"replicas\":%d,\"size\":%zu,\"keys\":%d,\"run\":%d,"
              "\"new_single_us\":%.2f,\"new_batch_us\":%.2f,\"new_single_vs_batch\":%.2f,"
              "\"repeat_single_us\":%.2f,\"repeat_batch_us\":%.2f,\"repeat_single_vs_batch\":%.2f,"
              "\"get_single_us\":%.2f,\"get_batch_us\":%.2f,\"get_single_vs_batch\":%.2f,"
              "\"raw_put_us\":%.2f,\"raw_batch_us\":%.2f,\"repeat_batch_vs_raw_batch\":%.2f}\n",
              rec, np, o.replicas, o.size, o.keys, run, new_single, new_batch, new_single / new_batch, repeat_single,
              repeat_batch, repeat_single / repeat_batch, get_single, get_batch, get_single / get_batch,
              stats(rp).median, raw_batch, repeat_batch / raw_batch);
  std::fflush(stdout);
}

void run_nb(const Options &o, store_t s, int run, const char *rec, int np) {
  const std::vector<store_key_t> single = fresh_keys(5, run, o.keys), nb = fresh_keys(6, run, o.keys);
  std::vector<char> v(o.size, 'q');
  const double k = static_cast<double>(o.keys);
  double t0 = now_us();
  for (store_key_t key : single) check(store_put(s, key, v.data(), v.size()), "put");
  const double blocking = (now_us() - t0) / k;
  std::vector<store_request_t> reqs(nb.size());
  t0 = now_us();
  for (std::size_t i = 0; i < nb.size(); ++i) check(store_put_nb(s, nb[i], v.data(), v.size(), &reqs[i]), "put_nb");
  const double issued = (now_us() - t0) / k;
  for (store_request_t &r : reqs) check(store_wait(&r), "wait");
  const double completed = (now_us() - t0) / k;
  std::printf("{\"op\":\"nb\",\"recovery\":\"%s\",\"np\":%d,\"replicas\":%d,\"size\":%zu,\"keys\":%d,\"run\":%d,"
              "\"put_us\":%.2f,\"put_nb_issue_us\":%.2f,\"put_nb_complete_us\":%.2f,\"put_vs_nb\":%.2f}\n",
              rec, np, o.replicas, o.size, o.keys, run, blocking, issued, completed, blocking / completed);
  std::fflush(stdout);
}

// Collective: all ranks.
void run_memory(const Options &o, store_t s, int run, const char *rec, int rank, int np) {
  const int bystander = np - 1;
  std::vector<char> v(o.size, 'm');
  // Keys whose holders and witnesses leave out the bystander: the first 2 x replicas of their
  // ranking (store_key_keepers).
  std::vector<store_key_t> mine;
  for (store_key_t k =
           (store_key_t{7} << 48) + (static_cast<store_key_t>(run) << 40) + (static_cast<store_key_t>(rank) << 32);
       static_cast<int>(mine.size()) < o.keys && rank != bystander; ++k) {
    int ranks[64], n = 0;
    check(store_key_keepers(s, k, ranks, 64, &n), "store_key_keepers");
    if (std::find(ranks, ranks + n, bystander) == ranks + n) mine.push_back(k);
  }
  // Warm-up: the first keys also pay for one-off growth (window regions, MPI's request pools).
  for (int i = 0; i < 64 && rank != bystander; ++i)
    check(store_put(s, mine[static_cast<std::size_t>(i)], v.data(), v.size()), "put");
  MPI_Barrier(MPI_COMM_WORLD);
  const double before = static_cast<double>(mallinfo2().uordblks);
  for (std::size_t i = 64; i < mine.size(); ++i) check(store_put(s, mine[i], v.data(), v.size()), "put");
  MPI_Barrier(MPI_COMM_WORLD);
  const double grew = static_cast<double>(mallinfo2().uordblks) - before;
  std::vector<double> all(static_cast<std::size_t>(np));
  MPI_Gather(&grew, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    const double keys = static_cast<double>(o.keys - 64) * static_cast<double>(np - 1);
    std::printf(
        "{\"op\":\"memory\",\"recovery\":\"%s\",\"np\":%d,\"replicas\":%d,\"size\":%zu,\"keys\":%.0f,\"run\":%d,"
        "\"writer_heap_per_key\":%.1f,\"bystander_heap_per_key\":%.2f,\"bystander_heap_bytes\":%.0f}\n",
        rec, np, o.replicas, o.size, keys, run, all[0] / static_cast<double>(o.keys - 64),
        all[static_cast<std::size_t>(bystander)] / keys, all[static_cast<std::size_t>(bystander)]);
    std::fflush(stdout);
  }
}

} // namespace

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, np = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  Options opt;
  const int rc = parse(argc, argv, rank == 0, opt);
  if (rc >= 0) {
    MPI_Finalize();
    return rc;
  }
  if (np < 2) {
    if (rank == 0) std::fprintf(stderr, "keys_bench needs at least 2 processes\n");
    MPI_Finalize();
    return 2;
  }
  RawWindow raw(1 << 20);
  for (int recovery : opt.recoveries) {
    store_config_t cfg;
    store_config_init(&cfg);
    cfg.replicas = std::min(opt.replicas, np);
    cfg.recovery = recovery;
    store_t s = nullptr;
    check(store_init(MPI_COMM_WORLD, &cfg, &s), "store_init");
    for (int run = 0; run < opt.reps; ++run) {
      for (const std::string &op : opt.ops) {
        if (op == "memory") {
          run_memory(opt, s, run, name(recovery), rank, np);
          continue;
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank != 0) {
          serve_pings(); // idle inside MPI until rank 0 is done
          continue;
        }
        if (op == "newkey") run_newkey(opt, s, raw, run, name(recovery), np);
        if (op == "delete") run_delete(opt, s, raw, run, name(recovery), np);
        if (op == "batch") run_batch(opt, s, raw, run, name(recovery), np);
        if (op == "nb") run_nb(opt, s, run, name(recovery), np);
        stop_pings(np);
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    check(store_finalize(&s), "store_finalize");
  }
  MPI_Finalize();
  return 0;
}
