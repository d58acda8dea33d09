// compare_redis: rmastore against what HPC users would otherwise reach for, Redis with
// replication, on the same machine and with the same number of copies and clients.
//
//   mpirun -n P compare_redis [--replicas R] [--sizes 8,4K,1M] [--port 6400] [--help]
//
// It links the installed library and uses only its installed headers (docs/benchmarks.md).
//
// Rank 0 starts a redis-server master and R-1 replicas on loopback (persistence off), waits
// until the replicas are in sync, and stops them at the end. Every rank is one client:
//   put: Redis SET + WAIT R-1 0 (the SET returns once the replicas acknowledged it), against
//        store_put with R copies (returns once every copy is written);
//   get: Redis GET against store_get. Each client reads another client's key of which its own
//        process holds no copy, when there are more processes than copies (a remote read);
//        otherwise its own key (a local read). The rows say which ("remote_readers").
// Each client uses its own key; all clients run at once, between barriers. Output: one JSON
// object per line per (op, system, size), with latency over all clients' operations and the
// aggregate throughput (MiB_per_s counts value bytes, not copies); the rmastore rows carry
// speedup = Redis median / rmastore median.
#include <getopt.h>
#include <mpi.h>

#include <hiredis.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "rmastore/store.h"
#include "rmastore/store_hooks.h"

namespace {

using namespace rmastore::bench;

std::vector<pid_t> g_servers; // started by this process (rank 0)

void stop_servers() {
  for (pid_t pid : g_servers) kill(pid, SIGTERM);
  for (pid_t pid : g_servers) waitpid(pid, nullptr, 0);
  g_servers.clear();
}

[[noreturn]] void fail(const std::string &what) {
  std::fprintf(stderr, "compare_redis: %s\n", what.c_str());
  stop_servers(); // a later run must not find them holding its ports
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

int reps_for(std::size_t size) {
  if (size <= 4096) return 1000;
  if (size <= 65536) return 300;
  if (size <= (1 << 20)) return 40;
  return 6;
}

// Starts a redis-server (a replica of master_port if > 0); stop_servers() ends it.
void start_server(int port, int master_port, const std::string &dir) {
  // A server already on the port would be measured instead of ours.
  if (redisContext *c = redisConnect("127.0.0.1", port); c != nullptr) {
    const bool taken = c->err == 0;
    redisFree(c);
    if (taken) fail("port " + std::to_string(port) + " is in use: pass --port");
  }
  const pid_t pid = fork();
  if (pid < 0) fail("fork");
  if (pid == 0) {
    std::vector<std::string> args = {"redis-server",
                                     "--port",
                                     std::to_string(port),
                                     "--bind",
                                     "127.0.0.1",
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "no",
                                     "--dir",
                                     dir,
                                     "--logfile",
                                     "",
                                     "--protected-mode",
                                     "no",
                                     "--dbfilename",
                                     "dump-" + std::to_string(port) + ".rdb"};
    if (master_port > 0) {
      args.insert(args.end(), {"--replicaof", "127.0.0.1", std::to_string(master_port)});
    }
    std::vector<char *> argv;
    for (auto &a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (std::freopen("/dev/null", "w", stdout) == nullptr) _exit(126);
    execvp("redis-server", argv.data());
    _exit(127);
  }
  g_servers.push_back(pid);
}

redisContext *connect_to(int port) {
  for (int i = 0; i < 200; ++i) {
    redisContext *c = redisConnect("127.0.0.1", port);
    if (c != nullptr && c->err == 0) return c;
    if (c != nullptr) redisFree(c);
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  fail("cannot connect to redis-server on port " + std::to_string(port));
}

redisReply *command(redisContext *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  auto *r = static_cast<redisReply *>(redisvCommand(c, fmt, ap));
  va_end(ap);
  if (r == nullptr) fail(std::string("redis: ") + c->errstr);
  if (r->type == REDIS_REPLY_ERROR) fail(std::string("redis: ") + r->str);
  return r;
}

// True once the master sees `replicas` replicas online and in sync.
bool replicas_ready(redisContext *c, int replicas) {
  redisReply *r = command(c, "INFO replication");
  const std::string info(r->str, r->len);
  freeReplyObject(r);
  int online = 0;
  for (std::size_t p = info.find("state=online"); p != std::string::npos; p = info.find("state=online", p + 1))
    ++online;
  return online >= replicas;
}

struct Result {
  double median = 0, p99 = 0, ops_per_s = 0;
};

// Runs `op` reps times on every rank at once; latency over all ranks' operations.
template <class Op> Result measure(int reps, Op op) {
  std::vector<double> lat;
  lat.reserve(static_cast<std::size_t>(reps));
  op(); // warm-up: creates the key, the slots, the connection's buffers
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = now_us();
  for (int i = 0; i < reps; ++i) {
    const double t0 = now_us();
    op();
    lat.push_back(now_us() - t0);
  }
  double elapsed = now_us() - start, longest = 0;
  MPI_Allreduce(&elapsed, &longest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  int np = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<double> all(rank == 0 ? lat.size() * static_cast<std::size_t>(np) : 0);
  MPI_Gather(lat.data(), reps, MPI_DOUBLE, all.data(), reps, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  Result r;
  if (rank == 0) {
    const Stats s = stats(all);
    r.median = s.median;
    r.p99 = s.p99;
    r.ops_per_s = static_cast<double>(np) * reps / (longest * 1e-6);
  }
  return r;
}

void emit(const char *op, const char *system, std::size_t size, int np, int replicas, int reps, const Result &r,
          double speedup, int remote_readers) {
  std::printf("{\"op\":\"%s\",\"system\":\"%s\",\"size\":%zu,\"clients\":%d,\"replicas\":%d,\"reps\":%d,"
              "\"median_us\":%.2f,\"p99_us\":%.2f,\"ops_per_s\":%.0f,\"MiB_per_s\":%.1f",
              op, system, size, np, replicas, reps, r.median, r.p99, r.ops_per_s,
              r.ops_per_s * static_cast<double>(size) / (1 << 20));
  if (speedup > 0) std::printf(",\"speedup\":%.2f", speedup);
  if (remote_readers >= 0) std::printf(",\"remote_readers\":%d", remote_readers);
  std::printf("}\n");
  std::fflush(stdout);
}

constexpr const char *kUsage = "usage: compare_redis [--replicas R] [--sizes 8,4K,1M] [--port P] [--help]\n";

// Every rank parses the same arguments; only rank 0 (`talk`) prints. Returns -1 to run, or the
// status to exit with: 0 after --help, 2 for arguments it refuses (after the usage).
int parse(int argc, char **argv, bool talk, int &replicas, int &port, std::vector<std::size_t> &sizes) {
  enum { kReplicas = 256, kSizes, kPort };
  static const option longopts[] = {{"replicas", required_argument, nullptr, kReplicas},
                                    {"sizes", required_argument, nullptr, kSizes},
                                    {"port", required_argument, nullptr, kPort},
                                    {"help", no_argument, nullptr, 'h'},
                                    {nullptr, 0, nullptr, 0}};
  const auto refuse = [&](const char *what, const char *value) {
    if (talk) std::fprintf(stderr, "compare_redis: %s: '%s'\n%s", what, value, kUsage);
    return 2;
  };
  opterr = talk ? 1 : 0; // getopt_long's own message for unknown options and missing values
  int c = 0;
  while ((c = getopt_long(argc, argv, "h", longopts, nullptr)) != -1) {
    const std::string v = optarg != nullptr ? optarg : "";
    switch (c) {
    case kReplicas:
      if (!parse_int(v, replicas, 1)) return refuse("--replicas takes a copy count of at least 1", optarg);
      break;
    case kSizes:
      sizes.clear();
      for (const std::string &x : split(v)) {
        std::size_t n = 0;
        if (!parse_size(x, n)) return refuse("--sizes takes sizes such as 8,4K,1M", optarg);
        sizes.push_back(n);
      }
      if (sizes.empty()) return refuse("--sizes takes sizes such as 8,4K,1M", optarg);
      break;
    case kPort:
      if (!parse_int(v, port, 1) || port > 65535) return refuse("--port takes a TCP port", optarg);
      break;
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

} // namespace

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, np = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  int replicas = 2, port = 6400;
  std::vector<std::size_t> sizes = {8, 64, 512, 4096, 65536, 1 << 20, 16 << 20};
  if (const int status = parse(argc, argv, rank == 0, replicas, port, sizes); status >= 0) {
    MPI_Finalize();
    return status;
  }
  if (replicas < 1 || replicas > np) fail("--replicas must be between 1 and the number of processes");
  if (port > 65536 - replicas) fail("--port: the replicas listen on the ports after it, which must exist");

  // Redis: a master and replicas-1 replicas, started by rank 0.
  char dir[] = "/tmp/compare_redis.XXXXXX";
  if (rank == 0) {
    if (mkdtemp(dir) == nullptr) fail("mkdtemp");
    start_server(port, 0, dir);
    for (int i = 1; i < replicas; ++i) start_server(port + i, port, dir);
    redisContext *c = connect_to(port);
    for (int i = 0; i < 400 && !replicas_ready(c, replicas - 1); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    if (!replicas_ready(c, replicas - 1)) fail("the Redis replicas did not come online");
    redisFree(c);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  redisContext *redis = connect_to(port);

  store_config_t cfg;
  store_config_init(&cfg);
  cfg.replicas = replicas;
  store_t store = nullptr;
  if (store_init(MPI_COMM_WORLD, &cfg, &store) != STORE_OK) fail("store_init");

  std::size_t largest = *std::max_element(sizes.begin(), sizes.end());
  std::vector<char> value(largest), got(largest);
  for (std::size_t i = 0; i < largest; ++i) value[i] = static_cast<char>(i * 7 + static_cast<std::size_t>(rank));
  const std::string key = "key-" + std::to_string(rank);
  // The key this client reads: another client's, if this process holds no copy of it.
  int source = rank;
  for (int other = 1; other < np; ++other) {
    const int candidate = (rank + other) % np;
    const std::vector<int> holders = key_holders(store, static_cast<store_key_t>(candidate));
    if (std::find(holders.begin(), holders.end(), rank) == holders.end()) {
      source = candidate;
      break;
    }
  }
  const std::string read_key = "key-" + std::to_string(source);
  int remote = source != rank ? 1 : 0, remote_readers = 0;
  MPI_Reduce(&remote, &remote_readers, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  for (std::size_t size : sizes) {
    const int reps = reps_for(size);
    const Result set = measure(reps, [&] {
      freeReplyObject(command(redis, "SET %b %b", key.data(), key.size(), value.data(), size));
      redisReply *w = command(redis, "WAIT %d 0", replicas - 1);
      if (w->integer < replicas - 1) fail("WAIT returned too few replicas");
      freeReplyObject(w);
    });
    const Result put = measure(reps, [&] {
      if (store_put(store, static_cast<store_key_t>(rank), value.data(), size) != STORE_OK) fail("store_put");
    });
    const Result get_r = measure(reps, [&] {
      redisReply *r = command(redis, "GET %b", read_key.data(), read_key.size());
      if (r->type != REDIS_REPLY_STRING || r->len != size) fail("GET returned the wrong value");
      freeReplyObject(r);
    });
    const Result get_s = measure(reps, [&] {
      std::size_t len = 0;
      if (store_get(store, static_cast<store_key_t>(source), got.data(), got.size(), &len) != STORE_OK || len != size)
        fail("store_get");
    });
    if (rank == 0) {
      emit("put", "redis", size, np, replicas, reps, set, 0, -1);
      emit("put", "rmastore", size, np, replicas, reps, put, set.median / put.median, -1);
      emit("get", "redis", size, np, replicas, reps, get_r, 0, remote_readers);
      emit("get", "rmastore", size, np, replicas, reps, get_s, get_r.median / get_s.median, remote_readers);
    }
  }
  redisFree(redis);
  store_finalize(&store);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    stop_servers();
    const std::string cleanup = std::string("rm -rf ") + dir;
    if (std::system(cleanup.c_str()) != 0) std::fprintf(stderr, "compare_redis: could not remove %s\n", dir);
  }
  MPI_Finalize();
  return 0;
}
