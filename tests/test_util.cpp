#include "test_util.hpp"

#include <malloc.h>

#if defined(__SANITIZE_ADDRESS__)
// The sanitizer runtime's allocator statistics (GCC installs no header for them).
extern "C" std::size_t __sanitizer_get_current_allocated_bytes();
#endif

#include <dirent.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>

namespace rmastore::test {

void write_verdict(bool pass) {
  const char *dir = std::getenv("RMASTORE_TEST_VERDICT_DIR");
  if (dir == nullptr) return;
  const std::string path = std::string(dir) + "/rank-" + std::to_string(world_rank());
  if (FILE *f = std::fopen(path.c_str(), "w")) {
    std::fputs(pass ? "PASS\n" : "FAIL\n", f);
    std::fclose(f);
  }
}

double time_scale() {
  static const double scale = [] {
    const char *v = std::getenv("RMASTORE_TEST_TIME_SCALE");
    const double f = v != nullptr ? std::atof(v) : 1.0;
    return f > 0 ? f : 1.0;
  }();
  return scale;
}

std::chrono::milliseconds scaled(double ms) {
  return std::chrono::milliseconds(static_cast<long long>(ms * time_scale()));
}

namespace {
// Plain POSIX writes: the victim dies right after, and the file must be complete by then.
void write_file(const std::string &name, const std::string &text, int flags) {
  const char *dir = std::getenv("RMASTORE_TEST_VERDICT_DIR");
  if (dir == nullptr) return;
  const std::string path = std::string(dir) + "/" + name;
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | flags, 0644);
  if (fd < 0) return;
  const ssize_t n = write(fd, text.data(), text.size());
  (void)n; // a short write leaves a marker the runner misses: the scenario fails, as it should
  close(fd);
}
} // namespace

void die_by_own_hand(const char *why) {
  const int rank = world_rank();
  std::fprintf(stderr, "[rank %d] dies by its own hand: %s\n", rank, why);
  std::fflush(stderr);
  write_file("killed." + std::to_string(rank), std::string(why) + "\n", O_TRUNC);
  raise(SIGKILL);
  std::abort(); // not reached
}

void stop_for(std::chrono::milliseconds how_long, const char *why) {
  const int rank = world_rank();
  std::fprintf(stderr, "[rank %d] stops for %lld ms: %s\n", rank, static_cast<long long>(how_long.count()), why);
  std::fflush(stderr);
  write_file("stopped." + std::to_string(rank), std::string(why) + "\n", O_TRUNC);
  const pid_t self = getpid();
  const pid_t child = fork();
  if (child == 0) {
    // Only async-signal-safe calls in the child of a threaded process.
    struct timespec t = {static_cast<time_t>(how_long.count() / 1000),
                         static_cast<long>(how_long.count() % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
    kill(self, SIGCONT);
    _exit(0);
  }
  if (child < 0) {
    std::fprintf(stderr, "[rank %d] stop_for: fork: %s\n", rank, std::strerror(errno));
    write_verdict(false);
    return;
  }
  raise(SIGSTOP);
}

namespace {
std::atomic<pid_t> g_daemon{0};
std::vector<int> g_host_ranks; // written before the watcher starts, read by die_with_host only
} // namespace

bool watch_host_daemon(const std::vector<int> &host_ranks) {
  const pid_t parent = getppid();
  std::string comm;
  if (FILE *f = std::fopen(("/proc/" + std::to_string(parent) + "/comm").c_str(), "r")) {
    char buf[64] = "";
    if (std::fgets(buf, sizeof buf, f) != nullptr) comm = buf;
    std::fclose(f);
  }
  if (comm.rfind("prted", 0) != 0) return false;
  g_host_ranks = host_ranks;
  g_daemon = parent;
  std::thread([parent] {
    while (getppid() == parent) usleep(1000);
    raise(SIGKILL);
  }).detach();
  return true;
}

namespace {
// Under Slurm (tests/slurm.cmake, scripts/slurm.sh) a host's loss takes its Slurm daemons too:
// every process of this simulated host, which is this network namespace (scripts/multihost.sh),
// slurmd and slurmstepd included, as when the machine goes away. Returns the names of the
// processes killed.
std::string kill_host_namespace() {
  char self_ns[64] = "";
  if (readlink("/proc/self/ns/net", self_ns, sizeof self_ns - 1) <= 0) return "";
  std::string names;
  const pid_t self = getpid();
  DIR *d = opendir("/proc");
  if (d == nullptr) return "";
  while (const dirent *e = readdir(d)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0 || pid == self) continue;
    const std::string proc = std::string("/proc/") + e->d_name;
    char ns[64] = "";
    if (readlink((proc + "/ns/net").c_str(), ns, sizeof ns - 1) <= 0 || std::strcmp(ns, self_ns) != 0) continue;
    char comm[64] = "";
    if (FILE *f = std::fopen((proc + "/comm").c_str(), "r")) {
      if (std::fgets(comm, sizeof comm, f) == nullptr) comm[0] = 0;
      std::fclose(f);
    }
    comm[std::strcspn(comm, "\n")] = 0;
    if (kill(pid, SIGKILL) == 0) names += std::string(" ") + comm;
  }
  closedir(d);
  return names;
}
} // namespace

bool slurm_node_loss() {
  // RMASTORE_TEST_DAEMON_ONLY=1: under Slurm too, only the Open MPI daemon dies, as when it
  // crashes on a node that lives on (tests/slurm.cmake).
  const char *only = std::getenv("RMASTORE_TEST_DAEMON_ONLY");
  return std::getenv("SLURM_JOB_ID") != nullptr && (only == nullptr || std::strcmp(only, "1") != 0);
}

void die_with_host(bool kill_daemon, const char *why) {
  const pid_t daemon = g_daemon;
  if (daemon == 0) die_by_own_hand("die_with_host without watch_host_daemon");
  if (kill_daemon && slurm_node_loss()) {
    const std::string text = std::string("host loss: its processes, Slurm's daemons too, killed by rank ") +
                             std::to_string(world_rank()) + " (" + why + ")\n";
    for (int r : g_host_ranks) write_file("killed." + std::to_string(r), text, O_TRUNC);
    // The premise, in a marker tests/mpirun_test.sh checks (host-lost@<rank>): what the sweep killed.
    const std::string killed = kill_host_namespace();
    const bool premise = killed.find(" slurmd") != std::string::npos &&
                         killed.find(" slurmstepd") != std::string::npos && killed.find(" prted") != std::string::npos;
    write_file("host-lost." + std::to_string(world_rank()), (premise ? "killed:" : "MISSED:") + killed + "\n", O_TRUNC);
    raise(SIGKILL);
  }
  if (kill_daemon) {
    // The markers of the whole host are left here, before the kill: once the daemon is gone, Open
    // MPI aborts each of its processes on PMIX_ERR_LOST_CONNECTION (ompi/errhandler/errhandler.c),
    // which can come before the watcher sees the process orphaned, or before this process could
    // write anything after the kill.
    const std::string text =
        std::string("host loss: its prted killed by rank ") + std::to_string(world_rank()) + " (" + why + ")\n";
    for (int r : g_host_ranks) write_file("killed." + std::to_string(r), text, O_TRUNC);
    if (kill(daemon, SIGKILL) != 0) {
      // The host lives on: a victim's failed verdict fails the scenario.
      std::fprintf(stderr, "[rank %d] host loss: cannot kill its prted %d: %s\n", world_rank(), (int)daemon,
                   std::strerror(errno));
      std::fflush(stderr);
      write_verdict(false);
    }
    raise(SIGKILL);
  }
  // The watcher kills this process once the daemon is gone, if Open MPI's abort does not come
  // first; a daemon that lives on is reported here.
  std::this_thread::sleep_for(scaled(5000));
  std::fprintf(stderr, "[rank %d] host loss: its prted still lives (%s)\n", world_rank(), why);
  std::fflush(stderr);
  raise(SIGKILL);
  std::abort(); // not reached
}

void expect_deaths(const std::vector<std::string> &specs) {
  std::string text;
  for (const std::string &s : specs) text += s + "\n";
  write_file("faults-expected", text, O_APPEND);
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

namespace {
std::uint64_t splitmix(std::uint64_t &s) {
  std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
} // namespace

// Layout: the first 16 bytes (or fewer) carry key ^ version and version; the rest is a stream
// seeded by both. Any mix of two values fails check_value.
std::vector<std::byte> make_value(std::uint64_t key, std::uint64_t version, std::size_t len) {
  std::vector<std::byte> v(len);
  std::uint64_t head[2] = {key ^ (version * 0x100000001b3ULL), version};
  if (len > 0) std::memcpy(v.data(), head, std::min(len, sizeof head));
  std::uint64_t s = key * 31 + version;
  for (std::size_t i = sizeof head; i < len; i += 8) {
    const std::uint64_t x = splitmix(s);
    std::memcpy(v.data() + i, &x, std::min<std::size_t>(8, len - i));
  }
  return v;
}

bool check_value(std::uint64_t key, const std::byte *buf, std::size_t len, std::uint64_t *version) {
  if (len < 16) {
    // Too short to carry the version: the caller must know it.
    const auto expect = make_value(key, *version, len);
    return len == 0 || std::memcmp(expect.data(), buf, len) == 0;
  }
  std::uint64_t head[2];
  std::memcpy(head, buf, sizeof head);
  const auto expect = make_value(key, head[1], len);
  if (std::memcmp(expect.data(), buf, len) != 0) return false;
  *version = head[1];
  return true;
}

int test_recovery() {
  const char *v = std::getenv("RMASTORE_TEST_RECOVERY");
  return v != nullptr && std::string(v) == "localized" ? STORE_RECOVERY_LOCALIZED : STORE_RECOVERY_GLOBAL;
}

store_t make_store(int replicas, std::size_t initial_slot_size, int recovery) {
  store_config_t cfg;
  store_config_init(&cfg);
  cfg.replicas = std::min(replicas, world_size());
  cfg.initial_slot_size = initial_slot_size;
  cfg.recovery = recovery >= 0 ? recovery : test_recovery();
  store_t s = nullptr;
  if (store_init(MPI_COMM_WORLD, &cfg, &s) != STORE_OK) return nullptr;
  return s;
}

std::uint64_t version_of(store_t s, store_key_t key, std::size_t len) {
  std::vector<std::byte> buf(len + 100);
  size_t got = 0;
  if (store_get(s, key, buf.data(), buf.size(), &got) != STORE_OK) return 0;
  std::uint64_t v = 0;
  return check_value(key, buf.data(), got, &v) ? v : 0;
}

std::size_t heap_in_use() {
#if defined(__SANITIZE_ADDRESS__)
  return __sanitizer_get_current_allocated_bytes();
#else
  return mallinfo2().uordblks;
#endif
}

bool all_ranks(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

std::vector<std::string> all_strings(const std::string &text) {
  std::array<char, 256> mine{};
  text.copy(mine.data(), mine.size() - 1);
  std::vector<char> all(mine.size() * static_cast<std::size_t>(world_size()));
  MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, all.data(), static_cast<int>(mine.size()),
                MPI_CHAR, MPI_COMM_WORLD);
  std::vector<std::string> out;
  for (int r = 0; r < world_size(); ++r) out.emplace_back(&all[static_cast<std::size_t>(r) * mine.size()]);
  return out;
}

std::vector<std::string> host_of_rank() {
  std::array<char, 64> name{};
  gethostname(name.data(), name.size() - 1);
  return all_strings(name.data());
}

namespace {
// True where this process prints a command-line mistake: world rank 0 once MPI is initialized
// (until it is finalized), every process before.
bool prints_usage() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return !initialized || finalized || world_rank() == 0;
}

[[noreturn]] void leave(int status) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
  std::exit(status);
}
} // namespace

void Cli::error(const std::string &message) const {
  if (prints_usage()) {
    const std::string program(usage, std::strcspn(usage, " "));
    std::fprintf(stderr, "%s: %s\nusage: %s\n", program.c_str(), message.c_str(), usage);
    std::fflush(stderr);
  }
  leave(2);
}

void Cli::bad_option(int c, char *const argv[]) const {
  // optind is past the offending argument; optopt names a short option, 0 or a long option's
  // value (>= 256 here) otherwise.
  const std::string arg =
      optopt > 0 && optopt < 256 ? std::string("-") + static_cast<char>(optopt) : std::string(argv[optind - 1]);
  error(c == ':' ? "option '" + arg + "' needs a value" : "unknown option '" + arg + "'");
}

void Cli::help() const {
  if (prints_usage()) std::printf("usage: %s\n", usage);
  std::fflush(stdout);
  leave(0);
}

void Cli::no_operands(int argc, char *const argv[]) const {
  if (optind < argc) error(std::string("unexpected argument '") + argv[optind] + "'");
}

long long Cli::integer(const char *option, const char *text, long long min, long long max) const {
  char *end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || errno == ERANGE || v < min || v > max) {
    error(std::string(option) + " needs a whole number from " + std::to_string(min) + " to " + std::to_string(max) +
          ", not '" + text + "'");
  }
  return v;
}

unsigned long long Cli::unsigned_integer(const char *option, const char *text, unsigned long long min,
                                         unsigned long long max) const {
  char *end = nullptr;
  errno = 0;
  // strtoull takes "-1" for ULLONG_MAX: a sign is refused here.
  const unsigned long long v = std::strchr(text, '-') == nullptr ? std::strtoull(text, &end, 10) : 0;
  if (end == nullptr || end == text || *end != '\0' || errno == ERANGE || v < min || v > max) {
    error(std::string(option) + " needs a whole number from " + std::to_string(min) + " to " + std::to_string(max) +
          ", not '" + text + "'");
  }
  return v;
}

double Cli::number(const char *option, const char *text, double min, double max) const {
  char *end = nullptr;
  errno = 0;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || errno == ERANGE || !std::isfinite(v) || v < min || v > max) {
    char range[96];
    std::snprintf(range, sizeof range, " needs a number from %g to %g, not '", min, max);
    error(option + std::string(range) + text + "'");
  }
  return v;
}

} // namespace rmastore::test
