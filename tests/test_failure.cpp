// Fault-injection scenarios: processes are killed with SIGKILL; the survivors must get a failure
// status (never hang), recover, and find every key at its latest committed value with its full
// number of copies; then the store must work on. A run is a series of episodes: operations
// until a failure, recovery, checks, and the survivors taking over the dead ranks' keys.
//
//   test_failure --replicas R --victims a,b [--killers a] [--kill-at N] [--tx 0|1] [--keys K]
//                [--rounds N] [--detector notify|ping] [--localized 0|1] [--compact 0|1]
//                [--expect-loss 0|1] [--host-loss 0|1] [--delete 0|1] [--batch 0|1|2]
//   test_failure --seed S --kills K [--localized 0|1]
//
// With --localized 1 the store uses the localized recovery variant: no call may report the
// failure, the survivors carry on through it, and the checks run once the background repair
// has settled (the test shrinks its own communicator to coordinate them). --compact 1 then also
// calls store_recover (compaction) at the end of each episode.
//
// --expect-loss 1 lets as many processes die as there are copies: the keys whose every copy sat
// on the victims must then be reported, by store_get (STORE_ERR_DATA_LOST) and in lost_count
// of store_last_recovery, and every other key must be whole.
//
// --delete 1: some operations of the rounds delete a key instead of putting it (in the
// transaction with --tx 1); a deleted key must read as not found, unless the delete was under
// way when the failure struck (then it may also hold its value from before).
//
// --batch 1: each round's puts of a rank go out as one store_put_many; --batch 2: as
// store_put_nb, then store_wait for each (with the same guarantees as store_put).
//
// --host-loss 1 (across simulated hosts, scripts/multihost.sh): the victims must be exactly the
// ranks of one host; the first kills that host's Open MPI daemon and dies, the others die with
// it, as when a machine goes away. With copies on distinct hosts nothing may be lost.
//
// In the first form there is one episode. Victims die either at a library fault point
// (RMASTORE_FAULT, set by the test registration) or, the killers among them, by raising
// SIGKILL before their N-th operation. With --tx 1 each round of a rank writes all its keys in
// one transaction, and survivors also check atomicity: all keys of a rank hold one version.
//
// In the second form (the randomized driver) the seed decides everything else: replicas,
// how the K deaths spread over episodes, who dies, how (own hand at a random operation, or a
// random fault point in puts, enlargements, commits or recovery itself), and transactions.
//
// Every rank records in node-shared memory, for each of its keys, the last version whose put
// returned STORE_OK and the version of a put under way, so that survivors can check even a
// dead writer's keys exactly: after recovery a key holds one of the two.
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "capi/test_access.hpp"
#include "common/ulfm.hpp"
#include "ping_count.hpp"
#include "test_util.hpp"

using namespace rmastore::test;
using Clock = std::chrono::steady_clock;

namespace {

// Bounds that tell a hang from a slow run (milliseconds, times RMASTORE_TEST_TIME_SCALE): for a
// failure to be reported, or known and repaired; for one store call; for the whole scenario.
constexpr double kWaitMs = 20000, kCallMs = 10000, kScenarioMs = 60000;

struct Episode {
  std::vector<int> victims; // every rank that dies in the episode
  std::vector<int> killers; // those that kill themselves at kill_at (the rest: fault points)
  int kill_at = -1;
};

struct Options {
  int replicas = 2;
  int keys = 12; // per rank
  int rounds = 6;
  bool tx = false;
  bool localized = false;
  bool compact = false; // localized: store_recover at the end of each episode
  bool expect_loss = false;
  bool host_loss = false; // the victims are the ranks of one host, and its daemon dies with them
  bool deletes = false;   // some operations delete their key
  int batch = 0;          // 1: puts as store_put_many, 2: as store_put_nb
  int detector = STORE_DETECTOR_NOTIFY;
  std::vector<Episode> episodes;
  std::string fault; // RMASTORE_FAULT chosen by a seed
  int timer_us = -1; // RMASTORE_FAULT_TIMER_US chosen by a seed (--in-recovery)
  bool in_recovery = false;
  std::uint64_t seed = 0;
};

std::vector<std::string> split(const std::string &s, char sep) {
  std::vector<std::string> parts;
  for (std::size_t p = 0; p < s.size();) {
    std::size_t end = s.find(sep, p);
    if (end == std::string::npos) end = s.size();
    if (end > p) parts.push_back(s.substr(p, end - p));
    p = end + 1;
  }
  return parts;
}

// The randomized driver: every rank draws the same scenario from the seed.
void draw(Options &o, int kills, int p) {
  std::mt19937_64 rng(o.seed);
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  o.replicas = (kills >= 2 || pick(2) == 0) && p - kills >= 3 ? 3 : 2;
  o.tx = pick(2) == 0;
  // Drawn for both variants, so that a seed draws the same scenario for both.
  const bool compact = pick(2) == 0;
  if (o.localized) o.compact = compact;
  o.keys = 6 + pick(10);
  o.rounds = 4 + pick(6);
  std::vector<int> alive(static_cast<std::size_t>(p));
  for (int i = 0; i < p; ++i) alive[static_cast<std::size_t>(i)] = i;
  // The data-path points a victim can reach: commit points only with transactions, slot locks
  // only in the localized variant.
  std::vector<const char *> points = {"put.between_copies", "put.before_switch", "enlarge.serve"};
  if (o.tx) {
    points.insert(points.end(), {"tx.before_pending", "tx.between_pending", "tx.before_record", "tx.after_record",
                                 "tx.during_apply"});
  }
  if (o.localized) points.push_back("lock.acquired");
  static const char *kRecoverPoints[] = {"recover.start",        "recover.after_revoke", "recover.after_shrink",
                                         "recover.after_window", "recover.rereplicate",  "recover.after_rereplicate"};
  // Localized: the background repair after an earlier death takes the place of store_recover
  // (which only runs there with compaction).
  static const char *kRepairPoints[] = {"lock.break", "repair.transfer"};
  while (kills > 0) {
    // Per episode at most r-1 deaths, so that no key can lose every copy.
    const int n = std::min(kills, std::max(1, pick(o.replicas - 1) + 1));
    Episode e;
    e.kill_at = pick(o.rounds * 2 + 2);
    for (int i = 0; i < n; ++i) {
      const std::size_t at = static_cast<std::size_t>(pick(static_cast<int>(alive.size())));
      const int v = alive[at];
      alive.erase(alive.begin() + static_cast<long>(at));
      e.victims.push_back(v);
      // Fault points only in the first episode, where their hit counts start from zero; a
      // death inside recovery needs another death that starts the recovery. A victim whose
      // data-path point is never reached dies after its operations (Run::operate).
      const int how = o.episodes.empty() ? pick(3) : 0;
      if (how == 1) {
        o.fault += (o.fault.empty() ? "" : ",") +
                   std::string(points[static_cast<std::size_t>(pick(static_cast<int>(points.size())))]) + "@" +
                   std::to_string(v) + "#" + std::to_string(1 + pick(4));
      } else if (how == 2 && i > 0 && (!o.localized || o.compact)) {
        o.fault += (o.fault.empty() ? "" : ",") + std::string(kRecoverPoints[pick(6)]) + "@" + std::to_string(v);
      } else if (how == 2 && i > 0) {
        o.fault += (o.fault.empty() ? "" : ",") + std::string(kRepairPoints[pick(2)]) + "@" + std::to_string(v);
      } else {
        e.killers.push_back(v);
      }
    }
    if (e.killers.empty()) e.killers.push_back(e.victims.front()); // someone must start it
    o.episodes.push_back(e);
    kills -= n;
  }
  // Drawn last, so that the draws above are those of the seeds before deletes existed.
  o.deletes = pick(2) == 0;
}

// --in-recovery 1 with --seed: one episode in which a process dies inside the survivors' first
// store_recover (the localized variant's compaction), after one other (from 6 processes on, two
// others) died at a random operation; with 3 copies (4 for three deaths) nothing may be lost.
// Half the seeds kill it
// at a random moment of the call (recover.timer, RMASTORE_FAULT_TIMER_US from the seed, up to
// 4 ms), the others at a random step of it, the window's creation included.
void draw_in_recovery(Options &o, int p) {
  std::mt19937_64 rng(o.seed * 0x9e3779b97f4a7c15ULL + 23);
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  o.replicas = p >= 4 ? 3 : 2;
  o.tx = pick(2) == 0;
  o.compact = o.localized;
  o.keys = 6 + pick(10);
  o.rounds = 4 + pick(6);
  o.deletes = pick(2) == 0;
  std::vector<int> alive(static_cast<std::size_t>(p));
  for (int i = 0; i < p; ++i) alive[static_cast<std::size_t>(i)] = i;
  const auto take = [&] {
    const std::size_t at = static_cast<std::size_t>(pick(static_cast<int>(alive.size())));
    const int v = alive[at];
    alive.erase(alive.begin() + static_cast<long>(at));
    return v;
  };
  Episode e;
  e.kill_at = pick(o.rounds * 2 + 2);
  const int k = take();
  e.victims.push_back(k);
  e.killers.push_back(k);
  const int v = take();
  e.victims.push_back(v);
  static const char *kSteps[] = {"recover.start",          "recover.after_revoke",      "recover.after_shrink",
                                 "recover.after_ids",      "runtime.after_ctrl_dup#2",  "runtime.before_window#2",
                                 "runtime.before_bells#2", "recover.after_window",      "recover.rereplicate",
                                 "recover.before_move",    "recover.after_rereplicate", "recover.before_agree"};
  if (pick(2) == 0) {
    o.fault = "recover.timer@" + std::to_string(v);
    o.timer_us = pick(4001);
  } else {
    std::string step = kSteps[pick(static_cast<int>(std::size(kSteps)))];
    const std::size_t hash = step.find('#');
    o.fault = hash == std::string::npos ? step + "@" + std::to_string(v)
                                        : step.substr(0, hash) + "@" + std::to_string(v) + step.substr(hash);
  }
  // Drawn last, so that the draws above stay those of the seeds before it: from 6 processes on,
  // a second killer, and 4 copies so that 3 deaths lose nothing.
  if (p >= 6) {
    o.replicas = 4;
    const int k2 = take();
    e.victims.insert(e.victims.begin() + 1, k2);
    e.killers.push_back(k2);
  }
  o.episodes.push_back(e);
}

// The deaths the runner must find markers of (tests/mpirun_test.sh checks RMASTORE_FAULT of
// the fixed scenarios itself): every killer's own-hand death, and the fault points a seed chose
// that are certain to be reached. Those are the ones inside store_recover (global variant, or
// localized compaction): the victim is alive, not a killer, and takes part in the recovery of
// its episode's other deaths; and the data-path points every put passes (below). A seed's other
// points may not be reached (another death stops the operations first, a commit point in a run
// without transactions, a repair that needs no lock broken): such a victim dies after its
// operations, by its own hand, and the runner lists what fired.
std::vector<std::string> expected_deaths(const Options &o) {
  const char *env = std::getenv("RMASTORE_FAULT"); // a seed's faults are in it already
  std::vector<std::string> faults;
  for (const std::string all = env != nullptr ? env : ""; const std::string &spec : split(all, ','))
    faults.push_back(spec);
  const auto has_fault = [&](int v) {
    return std::any_of(faults.begin(), faults.end(), [&](const std::string &f) {
      const std::size_t at = f.find('@');
      return at != std::string::npos && std::atoi(f.c_str() + at + 1) == v;
    });
  };
  std::vector<std::string> specs;
  for (const Episode &e : o.episodes) {
    for (int v : e.killers) {
      // A seed may make a data-path victim the episode's killer too: it dies either way.
      if (e.kill_at >= 0 && !has_fault(v)) specs.push_back("own-hand@" + std::to_string(v));
    }
  }
  if (o.seed == 0) return specs;
  const auto starts = [](const std::string &f, const char *prefix) { return f.rfind(prefix, 0) == 0; };
  const auto data_path = std::count_if(faults.begin(), faults.end(), [&](const std::string &f) {
    return !starts(f, "recover.") && !starts(f, "lock.break") && !starts(f, "repair.");
  });
  for (const std::string &f : faults) {
    // Every put passes these points, and the first values (main: write_all(1)) are o.keys >= 6
    // puts per rank, more than any drawn count, before any killer dies; only another data-path
    // victim's death can stop this victim's puts first, and only in the global variant.
    const bool every_put = starts(f, "put.between_copies@") || starts(f, "lock.acquired@");
    if (starts(f, "recover.") || starts(f, "runtime.") || (every_put && (o.localized || data_path == 1)))
      specs.push_back(f);
  }
  return specs;
}

constexpr char kUsage[] =
    "test_failure --replicas R --victims A[,B...] [--killers A[,B...]] [--kill-at N] [--tx 0|1] [--keys K] "
    "[--rounds N] [--detector notify|ping] [--localized 0|1] [--compact 0|1] [--expect-loss 0|1] [--host-loss 0|1] "
    "[--delete 0|1] [--batch 0|1|2]\n"
    "       test_failure --seed S --kills K [--localized 0|1]\n"
    "       test_failure --seed S --in-recovery 1 [--localized 0|1]";

// A comma-separated list of world ranks.
std::vector<int> parse_ranks(const Cli &cli, const char *option, const char *text, int p) {
  std::vector<int> list;
  for (const std::string &item : split(text, ','))
    list.push_back(static_cast<int>(cli.integer(option, item.c_str(), 0, p - 1)));
  if (list.empty()) cli.error(std::string(option) + " needs one or more ranks, not '" + text + "'");
  return list;
}

Options parse(int argc, char **argv) {
  enum {
    kReplicas = 256,
    kKillAt,
    kKeys,
    kRounds,
    kTx,
    kExpectLoss,
    kHostLoss,
    kDetector,
    kLocalized,
    kCompact,
    kVictims,
    kKillers,
    kSeed,
    kKills,
    kDelete,
    kBatch,
    kInRecovery
  };
  static const option options[] = {{"replicas", required_argument, nullptr, kReplicas},
                                   {"kill-at", required_argument, nullptr, kKillAt},
                                   {"keys", required_argument, nullptr, kKeys},
                                   {"rounds", required_argument, nullptr, kRounds},
                                   {"tx", required_argument, nullptr, kTx},
                                   {"expect-loss", required_argument, nullptr, kExpectLoss},
                                   {"host-loss", required_argument, nullptr, kHostLoss},
                                   {"detector", required_argument, nullptr, kDetector},
                                   {"localized", required_argument, nullptr, kLocalized},
                                   {"compact", required_argument, nullptr, kCompact},
                                   {"victims", required_argument, nullptr, kVictims},
                                   {"killers", required_argument, nullptr, kKillers},
                                   {"seed", required_argument, nullptr, kSeed},
                                   {"kills", required_argument, nullptr, kKills},
                                   {"delete", required_argument, nullptr, kDelete},
                                   {"batch", required_argument, nullptr, kBatch},
                                   {"in-recovery", required_argument, nullptr, kInRecovery},
                                   {"help", no_argument, nullptr, 'h'},
                                   {nullptr, 0, nullptr, 0}};
  const Cli cli{kUsage};
  const int p = world_size();
  Options o;
  Episode e;
  int kills = 0;
  bool fixed = false; // an option of the first form was given
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":h", options, nullptr)) != -1;) {
    const auto flag = [&](const char *name) { return cli.integer(name, optarg, 0, 1) != 0; };
    switch (c) {
    case kReplicas:
      o.replicas = static_cast<int>(cli.integer("--replicas", optarg, 1, p));
      break;
    case kKillAt:
      e.kill_at = static_cast<int>(cli.integer("--kill-at", optarg, 0, INT_MAX));
      fixed = true;
      break;
    case kKeys:
      o.keys = static_cast<int>(cli.integer("--keys", optarg, 1, 999));
      break;
    case kRounds:
      o.rounds = static_cast<int>(cli.integer("--rounds", optarg, 1, 100000));
      break;
    case kTx:
      o.tx = flag("--tx");
      break;
    case kExpectLoss:
      o.expect_loss = flag("--expect-loss");
      break;
    case kHostLoss:
      o.host_loss = flag("--host-loss");
      break;
    case kDelete:
      o.deletes = flag("--delete");
      break;
    case kBatch:
      o.batch = static_cast<int>(cli.integer("--batch", optarg, 0, 2));
      break;
    case kInRecovery:
      o.in_recovery = flag("--in-recovery");
      break;
    case kDetector:
      if (std::strcmp(optarg, "ping") == 0) {
        o.detector = STORE_DETECTOR_PING;
      } else if (std::strcmp(optarg, "notify") == 0) {
        o.detector = STORE_DETECTOR_NOTIFY;
      } else {
        cli.error(std::string("--detector needs notify or ping, not '") + optarg + "'");
      }
      break;
    case kLocalized:
      o.localized = flag("--localized");
      break;
    case kCompact:
      o.compact = flag("--compact");
      break;
    case kVictims:
      e.victims = parse_ranks(cli, "--victims", optarg, p);
      fixed = true;
      break;
    case kKillers:
      e.killers = parse_ranks(cli, "--killers", optarg, p);
      fixed = true;
      break;
    case kSeed:
      o.seed = cli.unsigned_integer("--seed", optarg, 1, UINT64_MAX);
      break;
    case kKills:
      kills = static_cast<int>(cli.integer("--kills", optarg, 1, std::max(1, p - 1)));
      break;
    case 'h':
      cli.help();
    default:
      cli.bad_option(c, argv);
    }
  }
  cli.no_operands(argc, argv);
  if (o.seed != 0) {
    if (fixed) cli.error("--seed draws the deaths itself: give no --victims, --killers or --kill-at with it");
    if (o.deletes) cli.error("--seed draws --delete itself");
    if (o.in_recovery) {
      if (kills != 0) cli.error("--in-recovery draws its deaths itself: give no --kills with it");
      if (p < 4) cli.error("--in-recovery needs 4 processes or more");
      draw_in_recovery(o, p);
      return o;
    }
    if (kills == 0) cli.error("--seed needs --kills");
    draw(o, kills, p);
  } else {
    if (o.in_recovery) cli.error("--in-recovery needs --seed");
    if (kills != 0) cli.error("--kills needs --seed");
    if (e.victims.empty()) cli.error("needs --victims (or --seed)");
    if (e.killers.empty() && e.kill_at >= 0) e.killers = e.victims;
    o.episodes.push_back(e);
  }
  return o;
}

// What every rank knows about its own keys (and those it took over), visible to all ranks of
// the node. A version with kDeleted set is a delete's: the key has no value of that version.
struct KeyRecord {
  std::atomic<std::uint64_t> committed; // last version whose put (or delete) returned STORE_OK
  std::atomic<std::uint64_t> inflight;  // version of a put (or delete) under way, 0 if none
};
constexpr std::uint64_t kDeleted = std::uint64_t{1} << 63;

// --delete: whether the operation of `version` on `key` deletes it. Never the first value of a
// key (version 1) nor the values after a recovery (take_over), so that every key exists there.
bool deletes_at(const Options &o, store_key_t key, std::uint64_t version) {
  return o.deletes && version != 1 && version % 100 != 90 && (key * 7 + version * 13) % 3 == 0;
}

// `key` may read as not found: it was never put, or a delete returned or was under way.
bool may_be_absent(std::uint64_t committed, std::uint64_t inflight) {
  return committed == 0 || (committed & kDeleted) != 0 || (inflight & kDeleted) != 0;
}

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

// True if RMASTORE_FAULT names a point for this rank whose name starts with `prefix`.
bool has_point(int rank, const char *prefix) {
  const char *env = std::getenv("RMASTORE_FAULT");
  if (env == nullptr) return false;
  const std::string spec = env;
  for (std::size_t p = spec.find(prefix); p != std::string::npos; p = spec.find(prefix, p + 1)) {
    const std::size_t at = spec.find('@', p);
    if (at != std::string::npos && std::atoi(spec.c_str() + at + 1) == rank) return true;
  }
  return false;
}

// This rank dies inside store_recover.
bool dies_in_recovery(int rank) {
  return has_point(rank, "recover.") || has_point(rank, "runtime.");
}

// Localized: this rank dies in the background repair of another's death.
bool dies_in_repair(int rank) {
  return has_point(rank, "lock.break") || has_point(rank, "repair.");
}

// The survivors' collectives, built from point-to-point messages among known-live ranks of a
// communicator that may hold dead ones. The localized variant needs no survivors'
// communicator, and making one for the test is not reliable in Open MPI 5.0.7: the agreement
// inside MPIX_Comm_shrink crashed (segfault in era_iagree_req_complete_cb) in 1 of about 13
// runs, MPI_Comm_create_group refuses a parent with failed processes, and
// MPI_Comm_create_from_group hung in ompi_comm_activate in 1 of 3.
class Peers {
public:
  Peers() = default;
  Peers(MPI_Comm comm, std::vector<int> members) : comm_(comm), members_(std::move(members)) {
    int me = 0;
    MPI_Comm_rank(comm_, &me);
    index_ = static_cast<int>(std::find(members_.begin(), members_.end(), me) - members_.begin());
  }
  bool valid() const { return comm_ != MPI_COMM_NULL && index_ < size(); }
  int size() const { return static_cast<int>(members_.size()); }
  int index() const { return index_; } // 0 on one of them: the one that prints
  std::uint64_t sum(std::uint64_t v) {
    return combine(v, [](std::uint64_t a, std::uint64_t b) { return a + b; });
  }
  std::uint64_t max(std::uint64_t v) {
    return combine(v, [](std::uint64_t a, std::uint64_t b) { return std::max(a, b); });
  }
  void barrier() {
    combine(0, [](std::uint64_t a, std::uint64_t) { return a; });
  }
  // Everyone's value, in member order.
  std::vector<std::uint64_t> gather(std::uint64_t v) {
    std::vector<std::uint64_t> all(members_.size(), 0);
    if (index_ == 0) {
      all[0] = v;
      for (std::size_t i = 1; i < members_.size(); ++i)
        MPI_Recv(&all[i], 1, MPI_UINT64_T, members_[i], kTag, comm_, MPI_STATUS_IGNORE);
      for (std::size_t i = 1; i < members_.size(); ++i)
        MPI_Send(all.data(), size(), MPI_UINT64_T, members_[i], kTag, comm_);
    } else {
      MPI_Send(&v, 1, MPI_UINT64_T, members_[0], kTag, comm_);
      MPI_Recv(all.data(), size(), MPI_UINT64_T, members_[0], kTag, comm_, MPI_STATUS_IGNORE);
    }
    return all;
  }

private:
  static constexpr int kTag = 4242;
  template <class Op> std::uint64_t combine(std::uint64_t v, Op op) {
    const std::vector<std::uint64_t> all = gather(v);
    std::uint64_t r = all[0];
    for (std::size_t i = 1; i < all.size(); ++i) r = op(r, all[i]);
    return r;
  }
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<int> members_;
  int index_ = 0;
};

Peers everyone(MPI_Comm comm) {
  int n = 0;
  MPI_Comm_size(comm, &n);
  std::vector<int> all(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) all[static_cast<std::size_t>(i)] = i;
  return Peers(comm, all);
}

class Run {
public:
  Run(const Options &o, KeyRecord *rec, store_t s)
      : opt_(o), rec_(rec), s_(s), buf_(1 << 20), initial_(*rmastore::internal::impl(s)->placement()) {
    me_ = world_rank();
    p_ = world_size();
    owner_.resize(static_cast<std::size_t>(p_));
    for (int r = 0; r < p_; ++r) owner_[static_cast<std::size_t>(r)] = r;
  }

  KeyRecord &record(int rank, int k) { return rec_[rank * opt_.keys + k]; }

  // --expect-loss: every copy of `key` sat on a process in `dead` (placement before any death).
  bool lost(store_key_t key, const std::vector<int> &dead) const {
    if (!opt_.expect_loss) return false;
    std::vector<int> h(static_cast<std::size_t>(initial_.replicas()));
    initial_.holders(key, h);
    return std::all_of(h.begin(), h.end(), [&](int r) { return in(dead, r); });
  }
  std::uint64_t lost_seen() const { return lost_seen_; }
  // Localized: the keys this process's loss list holds beyond those its gets just found lost. A
  // key a get here reported lost stays listed until this process puts it, even if its writer
  // put it again since (and so it is no longer counted by verify): such a key must read now.
  // Returns the number of listed keys that are neither, and names them in *why.
  std::uint64_t unexplained_lost(const store_recovery_t &report, std::string *why) {
    std::vector<store_key_t> found = lost_found_;
    std::sort(found.begin(), found.end());
    std::uint64_t bad = 0;
    for (std::uint64_t i = 0; i < report.lost_count; ++i) {
      const store_key_t k = report.lost_keys[i];
      if (std::binary_search(found.begin(), found.end(), k)) continue;
      std::vector<std::byte> b(buf_.size());
      size_t len = 0;
      const store_status_t gs = store_get(s_, k, b.data(), b.size(), &len);
      if (gs == STORE_OK) continue;
      ++bad;
      *why += " " + std::to_string(k) + " (" + store_strerror(gs) + ")";
    }
    return bad;
  }
  bool listed_lost(store_key_t key) const {
    store_recovery_t report;
    store_recovery_init(&report);
    if (store_last_recovery(s_, &report) != STORE_OK) return false;
    return report.lost_count > 0 && std::binary_search(report.lost_keys, report.lost_keys + report.lost_count, key);
  }
  std::uint64_t lost_keys(const std::vector<int> &dead) const {
    std::uint64_t n = 0;
    for (int rank = 0; rank < p_; ++rank) {
      for (int k = 0; k < opt_.keys; ++k) n += lost(key_of(rank, k), dead) ? 1 : 0;
    }
    return n;
  }

  // Runs one store call and keeps the longest time any call took: none may hang.
  template <class F> store_status_t timed(const char *what, F &&call) {
    const auto t0 = Clock::now();
    stall_watch_.begin(what);
    const store_status_t st = call();
    stall_watch_.end();
    const double took = std::chrono::duration<double>(Clock::now() - t0).count();
    if (took > longest_) {
      longest_ = took;
      longest_what_ = std::string(what) + " returned " + store_strerror(st);
    }
    return st;
  }
  double longest_call() const { return longest_; }
  const char *longest_what() const { return longest_what_.c_str(); }

  // A status from a call that a failure may interrupt. Global variant: STORE_ERR_PROC_FAILED is
  // the expected news of a failure. Localized: calls carry on through failures, so only
  // STORE_OK is right.
  bool failed_as_expected(store_status_t st, const char *what) {
    if (opt_.localized) {
      CHECK(st == STORE_OK, "%s returned %s (localized: calls carry on through failures)", what, store_strerror(st));
    } else {
      CHECK(st == STORE_ERR_PROC_FAILED, "%s returned %s", what, store_strerror(st));
    }
    return false;
  }

  // A failure seen: a process that is to die with others dies now, so that the deaths of an
  // episode are (nearly) simultaneous.
  void saw_failure(const Episode &e) {
    failed_ = true;
    if (e.kill_at >= 0 && in(e.killers, me_)) die(e, "killer: with the first failure it saw");
  }

  // Host loss: the episode's first victim kills its host's daemon, the others die with it.
  [[noreturn]] void die(const Episode &e, const char *why) {
    if (opt_.host_loss) die_with_host(me_ == e.victims.front(), why);
    die_by_own_hand(why);
  }

  // A victim still alive, and not meant to die inside store_recover or the background repair,
  // dies now.
  void victim_dies(const Episode &e) {
    if (in(e.victims, me_) && !dies_in_recovery(me_) && !dies_in_repair(me_))
      die(e, "victim still alive after its operations");
  }

  // A killer's death at its operation `ops`.
  void kill_at(const Episode &e, int ops) {
    if (e.kill_at < 0 || ops != e.kill_at || !in(e.killers, me_)) return;
    const std::string why = "killer: before its operation " + std::to_string(ops);
    die(e, why.c_str());
  }

  // Puts `version` of every key this rank writes (its own and those it took over), as single
  // puts or as one transaction. Returns false on a failure.
  bool write_all(std::uint64_t version, bool tx) {
    std::vector<std::pair<int, int>> mine; // (rank the key belonged to, k)
    for (int r = 0; r < p_; ++r) {
      if (owner_[static_cast<std::size_t>(r)] != me_) continue;
      for (int k = 0; k < opt_.keys; ++k) mine.emplace_back(r, k);
    }
    if (tx) {
      const store_status_t st = store_tx_begin(s_);
      if (st != STORE_OK) return failed_as_expected(st, "tx_begin"); // a failure is known already
    }
    std::vector<std::uint64_t> done(mine.size());
    // --batch: the puts are gathered and go out together after the deletes.
    std::vector<std::size_t> batched;
    std::vector<std::vector<std::byte>> values;
    for (std::size_t i = 0; i < mine.size(); ++i) {
      const auto [r, k] = mine[i];
      const store_key_t key = key_of(r, k);
      const bool del = deletes_at(opt_, key, version);
      done[i] = version | (del ? kDeleted : 0);
      record(r, k).inflight = done[i];
      if (opt_.batch != 0 && !del) {
        batched.push_back(i);
        values.push_back(make_value(key, version, length_of(key, version)));
        continue;
      }
      store_status_t st;
      if (del) {
        st = timed("store_delete", [&] { return store_delete(s_, key); });
      } else {
        const auto v = make_value(key, version, length_of(key, version));
        st = timed("store_put", [&] { return store_put(s_, key, v.data(), v.size()); });
      }
      if (tx && st != STORE_OK) {
        failed_as_expected(st, del ? "delete in a transaction" : "put in a transaction");
        CHECK(store_tx_abort(s_) == STORE_OK, "tx_abort");
        return false;
      }
      if (tx) continue;
      if (st != STORE_OK) return failed_as_expected(st, del ? "delete" : "put");
      record(r, k).committed = done[i];
      record(r, k).inflight = 0;
    }
    if (!batched.empty()) {
      const store_status_t st = timed(opt_.batch == 1 ? "store_put_many" : "store_put_nb/store_wait",
                                      [&] { return put_batch(batched, mine, values); });
      if (tx && st != STORE_OK) {
        failed_as_expected(st, "batch in a transaction");
        CHECK(store_tx_abort(s_) == STORE_OK, "tx_abort");
        return false;
      }
      if (!tx && st != STORE_OK) return failed_as_expected(st, "batch");
      for (std::size_t i : batched) {
        if (tx) continue;
        record(mine[i].first, mine[i].second).committed = done[i];
        record(mine[i].first, mine[i].second).inflight = 0;
      }
    }
    if (!tx) return true;
    const store_status_t st = timed("store_tx_commit", [&] { return store_tx_commit(s_); });
    if (st != STORE_OK) return failed_as_expected(st, "commit");
    for (std::size_t i = 0; i < mine.size(); ++i) {
      record(mine[i].first, mine[i].second).committed = done[i];
      record(mine[i].first, mine[i].second).inflight = 0;
    }
    return true;
  }

  // --batch: the puts of `which` (indexes into `mine`, values in `values`) at once. The first
  // status that is not STORE_OK, after every request completed.
  store_status_t put_batch(const std::vector<std::size_t> &which, const std::vector<std::pair<int, int>> &mine,
                           const std::vector<std::vector<std::byte>> &values) {
    std::vector<store_key_t> keys;
    std::vector<const void *> bufs;
    std::vector<size_t> lens;
    for (std::size_t j = 0; j < which.size(); ++j) {
      keys.push_back(key_of(mine[which[j]].first, mine[which[j]].second));
      bufs.push_back(values[j].data());
      lens.push_back(values[j].size());
    }
    if (opt_.batch == 1) return store_put_many(s_, keys.size(), keys.data(), bufs.data(), lens.data());
    std::vector<store_request_t> reqs(keys.size(), nullptr);
    store_status_t first = STORE_OK;
    for (std::size_t j = 0; j < keys.size() && first == STORE_OK; ++j)
      first = store_put_nb(s_, keys[j], bufs[j], lens[j], &reqs[j]);
    for (store_request_t &r : reqs) {
      if (r == nullptr) continue;
      const store_status_t st = store_wait(&r);
      if (first == STORE_OK) first = st;
    }
    return first;
  }

  // Operations until the episode's failure is reported.
  void operate(const Episode &e, std::uint64_t base) {
    failed_ = false;
    int ops = 0;
    for (int round = 0; round < opt_.rounds && !failed_; ++round) {
      kill_at(e, ops);
      ++ops;
      if (!write_all(base + static_cast<std::uint64_t>(round), opt_.tx)) {
        saw_failure(e);
        break;
      }
      // Reads of other ranks' keys: any committed or in-flight version of them.
      for (int k = 0; k < opt_.keys && !failed_; ++k) {
        kill_at(e, ops);
        ++ops;
        const int other = (me_ + round + k) % p_;
        size_t len = 0;
        // Its writer may change the key meanwhile: a delete before or during the get may explain
        // a "not found".
        const bool absent_before = may_be_absent(record(other, k).committed, record(other, k).inflight);
        const store_status_t gs =
            timed("store_get", [&] { return store_get(s_, key_of(other, k), buf_.data(), buf_.size(), &len); });
        std::uint64_t got = 0;
        if (gs == STORE_ERR_PROC_FAILED) {
          failed_as_expected(gs, "get");
          saw_failure(e);
        } else if (gs == STORE_ERR_NOT_FOUND) {
          // Only if never committed, or deleted.
          CHECK(absent_before || may_be_absent(record(other, k).committed, record(other, k).inflight),
                "get of key %llu: not found (committed %#llx, in flight %#llx)", (unsigned long long)key_of(other, k),
                (unsigned long long)record(other, k).committed.load(),
                (unsigned long long)record(other, k).inflight.load());
        } else if (gs == STORE_ERR_DATA_LOST) {
          CHECK(lost(key_of(other, k), e.victims), "get of key %llu: %s (committed %#llx, in flight %#llx)",
                (unsigned long long)key_of(other, k), store_strerror(gs),
                (unsigned long long)record(other, k).committed.load(),
                (unsigned long long)record(other, k).inflight.load());
        } else {
          CHECK(gs == STORE_OK && check_value(key_of(other, k), buf_.data(), len, &got), "get: %s", store_strerror(gs));
        }
      }
    }
    // Victims still alive (their fault point was not reached, or a killer's operation count)
    // die now, except those meant to die inside store_recover or the background repair; the
    // others keep asking until they hear of it. The runner fails the scenario if a fault point
    // the scenario expected did not fire (this death leaves another marker). A call must never
    // hang: the bound only tells a hang from a slow machine.
    victim_dies(e);
    if (opt_.localized) {
      if (dies_in_repair(me_)) {
        // The point fires while this rank repairs after another's death; if the repair never
        // reaches it, the rank dies once the repair is done.
        wait_for_repair(1);
        die_by_own_hand("its repair finished without reaching its fault point");
      }
      return;
    }
    const auto deadline = Clock::now() + scaled(kWaitMs);
    while (!failed_ && Clock::now() < deadline) {
      size_t len = 0;
      if (store_get(s_, key_of(me_, 0), buf_.data(), buf_.size(), &len) == STORE_ERR_PROC_FAILED) saw_failure(e);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHECK(failed_, "no failure was reported within %.0f s", kWaitMs * time_scale() / 1000);
  }

  // Localized: waits until this rank knows at least `dead` failures and its repair is idle.
  // Returns false after kWaitMs (scaled).
  bool wait_for_repair(int dead) {
    const auto deadline = Clock::now() + scaled(kWaitMs);
    store_info_t info;
    store_info_init(&info);
    while (Clock::now() < deadline) {
      store_get_info(s_, &info);
      if (info.failed_processes >= dead && info.repair_backlog == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }

  // Localized: once every survivor knows the `dead` failures, the survivors (of the test's
  // own communicator `comm`; the store needs none), after waiting until no survivor has
  // anything left to repair, three times in a row, so that repairs one asked of another are
  // seen too.
  // `store_dead` of them are in the store's communicator (a compaction drops the dead).
  Peers settle(MPI_Comm comm, const std::vector<int> &dead, std::size_t store_dead) {
    CHECK(wait_for_repair(static_cast<int>(store_dead)), "the failures were not known and repaired within %.0f s",
          kWaitMs * time_scale() / 1000);
    std::vector<int> alive;
    for (int r = 0; r < p_; ++r) {
      if (!in(dead, r)) alive.push_back(r);
    }
    Peers g(comm, alive);
    const auto deadline = Clock::now() + scaled(kWaitMs);
    store_info_t info;
    store_info_init(&info);
    bool late = false; // decided together: every survivor leaves the loop in the same round
    for (int quiet = 0; quiet < 3 && !late;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      store_get_info(s_, &info);
      quiet = g.max(info.repair_backlog) == 0 ? quiet + 1 : 0;
      late = g.max(Clock::now() >= deadline ? 1 : 0) != 0;
    }
    CHECK(!late, "the repairs did not settle within %.0f s", kWaitMs * time_scale() / 1000);
    return g;
  }

  // Recovers, again as long as processes fail meanwhile; returns the survivors' communicator.
  MPI_Comm recover(store_recovery_t &report) {
    MPI_Comm comm = MPI_COMM_NULL;
    store_status_t rs = STORE_ERR_RECOVER_AGAIN;
    int attempts = 0;
    store_recovery_t before, now;
    store_recovery_init(&before);
    CHECK(store_last_recovery(s_, &before) == STORE_OK, "store_last_recovery");
    while (rs == STORE_ERR_RECOVER_AGAIN && attempts < 10) {
      rs = store_recover(s_, &comm);
      ++attempts;
      if (rs == STORE_ERR_RECOVER_AGAIN) {
        // Between attempts the store is not usable: a data call says so at once instead of
        // waiting for helpers that an unfinished recovery has not restarted. Its key is outside
        // the scenario's keys, so that a put that wrongly succeeded changes nothing verified.
        const store_key_t probe = key_of(p_, 0);
        const store_status_t ps = store_put(s_, probe, buf_.data(), 8);
        CHECK(ps == STORE_ERR_PROC_FAILED, "store_put between store_recover attempts: %s", store_strerror(ps));
        // An unfinished attempt leaves the report of the last recovery that finished as it was.
        store_recovery_init(&now);
        CHECK(store_last_recovery(s_, &now) == STORE_OK, "store_last_recovery");
        CHECK(now.attempts == before.attempts && now.survivors == before.survivors && now.failed == before.failed &&
                  now.keys == before.keys && now.bytes_moved == before.bytes_moved &&
                  now.total_seconds == before.total_seconds,
              "an unfinished store_recover changed the last recovery's report");
      }
    }
    CHECK(rs == STORE_OK, "store_recover: %s after %d attempts", store_strerror(rs), attempts);
    store_recovery_init(&report);
    CHECK(rs != STORE_OK || store_last_recovery(s_, &report) == STORE_OK, "store_last_recovery");
    CHECK(rs != STORE_OK || report.attempts == attempts, "the report counts %d attempts, not %d", report.attempts,
          attempts);
    return rs == STORE_OK ? comm : MPI_COMM_NULL;
  }

  // Every key of every rank, the dead ranks' included, holds its committed value or the one
  // that was being put, and has its full number of copies on the survivors.
  // Also counts the keys store_get reports lost (lost_seen).
  void verify(Peers &g, int survivors, const std::vector<int> &dead) {
    auto *impl = rmastore::internal::impl(s_);
    lost_seen_ = 0;
    lost_found_.clear();
    std::uint64_t held = 0, total_keys = 0;
    for (int rank = 0; rank < p_; ++rank) {
      std::uint64_t rank_version = 0; // with transactions, all keys of a rank agree
      bool mixed = false, first = true;
      for (int k = 0; k < opt_.keys; ++k) {
        const store_key_t key = key_of(rank, k);
        const std::uint64_t committed = record(rank, k).committed, inflight = record(rank, k).inflight;
        size_t len = 0;
        const store_status_t gs = store_get(s_, key, buf_.data(), buf_.size(), &len);
        std::uint64_t got = 0;
        // Localized: a key may survive the deaths of all its first holders if the background
        // repair copied it between two deaths.
        if (lost(key, dead) && (gs == STORE_ERR_DATA_LOST || !opt_.localized)) {
          CHECK(gs == STORE_ERR_DATA_LOST, "key %llu lost every copy, but store_get says %s", (unsigned long long)key,
                store_strerror(gs));
          // The loss list of this process must already say what its get just said.
          CHECK(gs != STORE_ERR_DATA_LOST || listed_lost(key),
                "store_get says key %llu is lost, store_last_recovery on the same process does not list it",
                (unsigned long long)key);
          ++lost_seen_;
          lost_found_.push_back(key);
          continue;
        }
        if (gs == STORE_ERR_NOT_FOUND && may_be_absent(committed, inflight)) {
          // Never put, or deleted (with transactions: the version of the delete counts towards
          // the rank's one version, when only one of the two was a delete).
          const bool c = (committed & kDeleted) != 0, i = (inflight & kDeleted) != 0;
          if (c != i) {
            const std::uint64_t v = (c ? committed : inflight) & ~kDeleted;
            if (!first && v != rank_version) mixed = true;
            first = false;
            rank_version = v;
          }
          // No copy is left where the key is placed: a deleted key's memory went back.
          const std::vector<int> holders = impl->holders(key);
          if (std::find(holders.begin(), holders.end(), impl->rank()) != holders.end()) {
            rmastore::internal::SlotHeader h;
            std::vector<std::byte> copy;
            CHECK(!impl->read_local_copy(key, h, copy) || rmastore::internal::slot_deleted(h),
                  "key %llu reads as not found, but this holder has a copy of version %llu", (unsigned long long)key,
                  (unsigned long long)h.version);
          }
          continue;
        }
        const bool good = gs == STORE_OK && check_value(key, buf_.data(), len, &got);
        CHECK(good, "key %llu of rank %d: %s", (unsigned long long)key, rank, store_strerror(gs));
        if (good) {
          if (!first && got != rank_version) mixed = true;
          first = false;
          rank_version = got;
          CHECK(got == committed || (inflight != 0 && got == inflight),
                "key %llu of rank %d has version %llu, committed %llu, in flight %llu", (unsigned long long)key, rank,
                (unsigned long long)got, (unsigned long long)committed, (unsigned long long)inflight);
          CHECK(len == length_of(key, got), "length");
        }
        ++total_keys;
        const std::vector<int> holders = impl->holders(key);
        if (std::find(holders.begin(), holders.end(), impl->rank()) != holders.end()) {
          rmastore::internal::SlotHeader h;
          std::vector<std::byte> copy;
          CHECK(impl->read_local_copy(key, h, copy), "no valid local copy of %llu", (unsigned long long)key);
          // Nobody writes now, and the repairs settled: every lock was given back (one taken
          // and released under different lock words would stay held by a live process).
          CHECK(h.owner == rmastore::internal::kOwnerFree, "the lock of key %llu is still held: owner word %#llx",
                (unsigned long long)key, (unsigned long long)h.owner);
          ++held;
        }
      }
      CHECK(!opt_.tx || !mixed, "the keys of rank %d hold different versions: a transaction was applied in part", rank);
    }
    const std::uint64_t copies = g.sum(held);
    const auto r = static_cast<std::uint64_t>(std::min(opt_.replicas, survivors));
    CHECK(copies == total_keys * r, "%llu copies for %llu keys", (unsigned long long)copies,
          (unsigned long long)total_keys);
    store_info_t info;
    store_info_init(&info);
    store_get_info(s_, &info);
    const std::uint64_t all = g.sum(info.local_copies);
    CHECK(all == total_keys * r, "store_info counts %llu copies", (unsigned long long)all);
  }

  // After recovery: transaction mode, then normal mode, and the dead ranks' keys get a new
  // owner among the survivors, who writes them from now on.
  void take_over(Peers &g, const std::vector<int> &dead, std::uint64_t version) {
    store_mode_t mode = STORE_MODE_NORMAL;
    if (!opt_.localized) {
      CHECK(store_get_mode(s_, &mode) == STORE_OK && mode == STORE_MODE_TRANSACTION, "not in transaction mode");
      const auto v = make_value(key_of(me_, 0), 99, 10);
      CHECK(store_put(s_, key_of(me_, 0), v.data(), v.size()) == STORE_ERR_MODE, "a plain put in transaction mode");
    }
    const store_status_t bn = store_back_to_normal(s_);
    CHECK(bn == STORE_OK, "store_back_to_normal: %s", store_strerror(bn));
    CHECK(store_get_mode(s_, &mode) == STORE_OK && mode == STORE_MODE_NORMAL, "still in transaction mode");
    const int survivors = g.size();
    const std::vector<std::uint64_t> alive = g.gather(static_cast<std::uint64_t>(me_));
    for (int r = 0; r < p_; ++r) {
      if (in(dead, owner_[static_cast<std::size_t>(r)])) {
        owner_[static_cast<std::size_t>(r)] = static_cast<int>(alive[static_cast<std::size_t>(r % survivors)]);
      }
    }
    g.barrier();
    CHECK(write_all(version, false), "put after recovery");
    g.barrier();
    for (int rank = 0; rank < p_; ++rank) {
      for (int k = 0; k < opt_.keys; ++k) {
        const store_key_t key = key_of(rank, k);
        size_t len = 0;
        std::uint64_t got = 0;
        const store_status_t gs = store_get(s_, key, buf_.data(), buf_.size(), &len);
        CHECK(gs == STORE_OK && check_value(key, buf_.data(), len, &got) && got == version, "after recovery: %s",
              store_strerror(gs));
      }
    }
    g.barrier();
  }

private:
  // For hunting stalls (opt-in): with RMASTORE_TEST_STALL_DUMP=<seconds>, a store call still
  // running after that long has gdb print every thread's stack of this process, once per call,
  // into stall.<pid>.<n> of RMASTORE_TEST_STALL_DIR (or the working directory). A stall that
  // ends on its own leaves its stacks behind, which the call's time alone does not tell.
  class StallWatch {
  public:
    StallWatch() {
      const char *v = std::getenv("RMASTORE_TEST_STALL_DUMP");
      if (v == nullptr || std::atof(v) <= 0) return;
      after_ = std::atof(v);
      const char *dir = std::getenv("RMASTORE_TEST_STALL_DIR");
      dir_ = dir != nullptr ? dir : ".";
      // More for gdb to print of this process (a script: -x FILE), for a stall under study.
      if (const char *script = std::getenv("RMASTORE_TEST_STALL_GDB")) gdb_extra_ = std::string(" -x ") + script;
      // Which process is which rank, for reading the stacks of all of them.
      if (FILE *f = std::fopen((dir_ + "/rank." + std::to_string(getpid())).c_str(), "w")) {
        std::fprintf(f, "%d\n", world_rank());
        std::fclose(f);
      }
      thread_ = std::thread([this] { watch(); });
    }
    ~StallWatch() {
      stop_ = true;
      if (thread_.joinable()) thread_.join();
    }
    void begin(const char *what) {
      what_ = what;
      since_ns_.store(now_ns());
    }
    void end() {
      const std::int64_t since = since_ns_.exchange(0);
      if (since == 0 || since != dumped_for_.load()) return;
      // The call whose stacks were taken is over: how long it took in all, in the summary.
      if (FILE *f = std::fopen((dir_ + "/stall-summary").c_str(), "a")) {
        std::fprintf(f, "pid %d rank %d: %s took %.3f s (stacks in stall.%d.%d)\n", getpid(), world_rank(),
                     what_.load(), static_cast<double>(now_ns() - since) / 1e9, getpid(), dumps_.load());
        std::fclose(f);
      }
    }

  private:
    static std::int64_t now_ns() {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
    }
    void watch() {
      while (!stop_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        const std::int64_t since = since_ns_.load(), now = now_ns();
        if (since == 0 || since == dumped_for_.load() || static_cast<double>(now - since) < after_ * 1e9) continue;
        // Numbered before gdb runs: the call may end while it does.
        const int number = ++dumps_;
        dumped_for_.store(since);
        const std::string out = dir_ + "/stall." + std::to_string(getpid()) + "." + std::to_string(number);
        // First this host's TCP sockets (queues, timers, windows), taken before gdb stops
        // anything; then opal_progress's event-loop state (users, its lock, poll period, last
        // poll: whether btl/tcp's sockets are being read) and this process's stacks. Every
        // process of every simulated host is visible here (they share the pid namespace): the
        // stacks of all the job's processes follow, unless another process of the job dumped
        // them in the last 10 s.
        const std::string pid = std::to_string(getpid());
        const std::string own = "ss -tnoiep 2>/dev/null; ls -l /proc/" + pid + "/fd; grep -H tfd /proc/" + pid +
                                "/fdinfo/* 2>/dev/null; gdb -batch -p " + pid +
                                " -ex 'p (int)num_event_users' -ex \"p (int)'lock.0'\""
                                " -ex 'p (long)event_progress_delta' -ex 'p (long)event_progress_last_time'"
                                " -ex 'thread apply all bt'" +
                                gdb_extra_;
        const std::string all = "if [ -z \"$(find " + dir_ +
                                " -name 'all.*' -newermt '-10 seconds' 2>/dev/null)\" ]; then touch " + dir_ + "/all." +
                                pid + "; for p in $(pgrep -x test_failure); do echo \"== pid $p rank $(cat " + dir_ +
                                "/rank.$p 2>/dev/null)\"; gdb -batch -p $p -ex 'thread apply all bt'; done; fi";
        const std::string cmd = "(echo 'rank " + std::to_string(world_rank()) + ": " + what_.load() + "'; " + own +
                                "; " + all + ") > " + out + " 2>&1";
        std::fprintf(stderr, "[rank %d] %s has run for %.3f s: stacks in %s\n", world_rank(), what_.load(),
                     static_cast<double>(now - since) / 1e9, out.c_str());
        if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "[rank %d] gdb failed\n", world_rank());
      }
    }
    double after_ = 0;
    std::string dir_, gdb_extra_;
    std::atomic<bool> stop_{false};
    std::atomic<const char *> what_{""};
    std::atomic<std::int64_t> since_ns_{0}, dumped_for_{0};
    std::atomic<int> dumps_{0};
    std::thread thread_;
  };

  StallWatch stall_watch_;
  const Options &opt_;
  KeyRecord *rec_;
  store_t s_;
  std::vector<std::byte> buf_;
  const rmastore::internal::Placement initial_; // before any death
  std::uint64_t lost_seen_ = 0;
  std::vector<store_key_t> lost_found_; // the keys of lost_seen_
  int me_ = 0, p_ = 0;
  bool failed_ = false;
  double longest_ = 0;
  std::string longest_what_;
  std::vector<int> owner_; // who writes the keys of rank i now
};

} // namespace

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const Options opt = parse(argc, argv);
  // A seed's fault points; read by the library at its first fault point.
  if (!opt.fault.empty()) setenv("RMASTORE_FAULT", opt.fault.c_str(), 1);
  if (opt.timer_us >= 0) setenv("RMASTORE_FAULT_TIMER_US", std::to_string(opt.timer_us).c_str(), 1);
  const int me = world_rank(), p = world_size();
  if (opt.host_loss) {
    // The premise: the victims are one whole host, and other hosts survive it.
    const std::vector<std::string> hosts = host_of_rank();
    const Episode &e = opt.episodes.front();
    const std::string lost = hosts[static_cast<std::size_t>(e.victims.front())];
    int on_host = 0;
    for (int r = 0; r < p; ++r) on_host += hosts[static_cast<std::size_t>(r)] == lost ? 1 : 0;
    bool whole = on_host == static_cast<int>(e.victims.size()) && on_host < p;
    for (int v : e.victims) whole = whole && hosts[static_cast<std::size_t>(v)] == lost;
    if (in(e.victims, me) && !watch_host_daemon(e.victims)) whole = false;
    MPI_Allreduce(MPI_IN_PLACE, &whole, 1, MPI_CXX_BOOL, MPI_LAND, MPI_COMM_WORLD);
    CHECK(whole, "--host-loss: the victims are not exactly the ranks of one host of several, under its prted");
    if (!whole) {
      write_verdict(false);
      MPI_Finalize();
      return 1;
    }
  }
  if (me == 0) expect_deaths(expected_deaths(opt));
  if (me == 0 && opt.seed != 0) {
    std::printf("seed %llu: replicas %d, %s, %d keys, %d rounds, faults '%s'", (unsigned long long)opt.seed,
                opt.replicas, opt.tx ? "transactions" : "single puts", opt.keys, opt.rounds, opt.fault.c_str());
    if (opt.timer_us >= 0) std::printf(" after %d us", opt.timer_us);
    std::printf(", episodes:");
    for (const Episode &e : opt.episodes) {
      std::printf(" [victims");
      for (int v : e.victims) std::printf(" %d%s", v, in(e.killers, v) ? "*" : "");
      std::printf(" at op %d]", e.kill_at);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  const auto t_start = Clock::now();
  KeyRecord *rec = shared_records(p, opt.keys);
  CHECK(rec != nullptr, "no shared memory");
  store_config_t cfg;
  store_config_init(&cfg);
  cfg.replicas = std::min(opt.replicas, p);
  cfg.detector = opt.detector;
  cfg.recovery = opt.localized ? STORE_RECOVERY_LOCALIZED : STORE_RECOVERY_GLOBAL;
  store_t s = nullptr;
  CHECK(store_init(MPI_COMM_WORLD, &cfg, &s) == STORE_OK, "store_init failed");
  if (rec == nullptr || s == nullptr) {
    write_verdict(false);
    MPI_Finalize();
    return 1;
  }
  Run run(opt, rec, s);
  // The localized variant's survivors talk on a copy of the world made while all are alive.
  MPI_Comm world = MPI_COMM_NULL;
  CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &world) == MPI_SUCCESS, "MPI_Comm_dup");
  MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);

  // Every key gets a first value (fault points may already fire here).
  bool early = !run.write_all(1, false);
  if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS) early = true;
  if (opt.localized) early = false; // nobody stops: every rank goes on with its operations

  std::vector<int> dead;
  // The global variant's survivors' communicator comes from store_recover.
  MPI_Comm comm = MPI_COMM_NULL;
  store_recovery_t report{};
  const auto print_recovery = [&](Peers &g, std::size_t e, const char *what) {
    if (g.index() != 0) return;
    std::printf("episode %zu: %s %d attempt(s), %.1f ms (shrink %.1f, window %.1f, re-replication %.1f), "
                "%llu B lost, %llu B moved, %llu keys repaired of %llu, transactions: %llu keys forward, %llu "
                "back\n",
                e, what, report.attempts, report.total_seconds * 1e3, report.shrink_seconds * 1e3,
                report.window_seconds * 1e3, report.rereplicate_seconds * 1e3, (unsigned long long)report.bytes_lost,
                (unsigned long long)report.bytes_moved, (unsigned long long)report.keys_repaired,
                (unsigned long long)report.keys, (unsigned long long)report.tx_rolled_forward,
                (unsigned long long)report.tx_rolled_back);
    std::fflush(stdout);
  };
  const auto give_up = [&] {
    write_verdict(false);
    return 1; // without MPI_Finalize: the others cannot finish with us anyway
  };
  std::size_t compacted = 0; // deaths before the last store_recover (in the localized variant, a compaction)
  for (std::size_t e = 0; e < opt.episodes.size(); ++e) {
    const Episode &ep = opt.episodes[e];
    if (!(e == 0 && early)) {
      run.operate(ep, 2 + 100 * e);
    } else {
      // A death during the first puts: the episode's other victims must not live on into the
      // recovery (a data-path fault point they did not reach yet would fire after it).
      run.saw_failure(ep);
      run.victim_dies(ep);
    }
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
    if (opt.localized) {
      // The survivors carried on. Once the background repair settled, every key must be whole
      // again, without any collective call on the store.
      for (int v : ep.victims) {
        if (!dies_in_recovery(v)) dead.push_back(v);
      }
      Peers g = run.settle(world, dead, dead.size() - compacted);
      CHECK(g.valid(), "this rank is not among the survivors");
      if (!g.valid()) return give_up();
      int survivors = g.size();
      CHECK(survivors == p - static_cast<int>(dead.size()), "%d survivors", survivors);
      CHECK(!opt.expect_loss || run.lost_keys(dead) > 0, "no key had every copy on the victims");
      store_info_t info;
      store_info_init(&info);
      store_get_info(s, &info);
      const std::uint64_t repaired = g.sum(info.repaired_bytes);
      if (g.index() == 0) {
        std::printf("episode %zu: background repair settled, %llu B written by repairs so far\n", e,
                    (unsigned long long)repaired);
        std::fflush(stdout);
      }
      run.verify(g, survivors, dead);
      // After the gets: a process's list holds at least what its gets found lost (the notices of
      // the repairs may be late, RMASTORE_FAULT_OFF=lost_notice).
      store_recovery_init(&report);
      store_last_recovery(s, &report);
      std::string why;
      CHECK(run.unexplained_lost(report, &why) == 0, "listed lost, but neither found lost nor put again:%s",
            why.c_str());
      CHECK(report.lost_count >= run.lost_seen(), "%llu keys reported lost, %llu found lost",
            (unsigned long long)report.lost_count, (unsigned long long)run.lost_seen());
      CHECK(!opt.expect_loss || run.lost_seen() > 0, "no key was lost");
      run.take_over(g, dead, 90 + 100 * e);
      if (!opt.compact) continue;
      // Compaction: optional, it must leave everything as it was (victims of recover.* points
      // die inside it).
      for (int v : ep.victims) {
        if (dies_in_recovery(v)) dead.push_back(v);
      }
      comm = run.recover(report);
      if (comm == MPI_COMM_NULL) return give_up();
      Peers c = everyone(comm);
      survivors = c.size();
      CHECK(survivors == p - static_cast<int>(dead.size()), "%d survivors after compaction", survivors);
      CHECK(report.survivors == survivors && report.failed == static_cast<int>(dead.size() - compacted),
            "the report says %d survivors and %d failed", report.survivors, report.failed);
      compacted = dead.size();
      CHECK(report.lost_count == 0, "%llu keys lost in compaction", (unsigned long long)report.lost_count);
      run.verify(c, survivors, dead);
      print_recovery(c, e, "compaction");
      continue;
    }
    dead.insert(dead.end(), ep.victims.begin(), ep.victims.end());
    comm = run.recover(report);
    if (comm == MPI_COMM_NULL) return give_up();
    Peers g = everyone(comm);
    const int survivors = g.size();
    CHECK(survivors == p - static_cast<int>(dead.size()), "%d survivors", survivors);
    CHECK(report.survivors == survivors && report.failed == static_cast<int>(dead.size() - compacted),
          "the report says %d survivors and %d failed", report.survivors, report.failed);
    compacted = dead.size();
    CHECK(report.lost_count == run.lost_keys(dead), "%llu keys reported lost, %llu expected",
          (unsigned long long)report.lost_count, (unsigned long long)run.lost_keys(dead));
    CHECK(!opt.expect_loss || run.lost_keys(dead) > 0, "no key had every copy on the victims");
    run.verify(g, survivors, dead);
    CHECK(run.lost_seen() == run.lost_keys(dead), "%llu keys found lost, %llu expected",
          (unsigned long long)run.lost_seen(), (unsigned long long)run.lost_keys(dead));
    run.take_over(g, dead, 90 + 100 * e);
    print_recovery(g, e, "recovery");
  }
  // The ping detector sends its pings (tests/test_ping.cpp shows that they alone detect).
  if (opt.detector == STORE_DETECTOR_PING) {
    CHECK(pings_sent() > 0, "the ping detector sent no ping");
  } else {
    CHECK(pings_sent() == 0, "%llu pings sent without the ping detector", (unsigned long long)pings_sent());
  }
  // MPI may only know processes as failed that did die: a live process counted as failed is
  // excluded from every recovery while it goes on (issue 23: a split of the survivors).
  {
    std::vector<int> victims;
    for (const Episode &ep : opt.episodes) victims.insert(victims.end(), ep.victims.begin(), ep.victims.end());
    MPI_Group failed = MPI_GROUP_NULL, all = MPI_GROUP_NULL;
    int n = 0;
    if (MPIX_Comm_get_failed(world, &failed) == MPI_SUCCESS && MPI_Group_size(failed, &n) == MPI_SUCCESS && n > 0 &&
        MPI_Comm_group(world, &all) == MPI_SUCCESS) {
      std::vector<int> in_failed(static_cast<std::size_t>(n)), ranks(static_cast<std::size_t>(n));
      for (int i = 0; i < n; ++i) in_failed[static_cast<std::size_t>(i)] = i;
      MPI_Group_translate_ranks(failed, n, in_failed.data(), all, ranks.data());
      for (int r : ranks) CHECK(in(victims, r), "MPI counts rank %d as failed, but it is no victim", r);
      MPI_Group_free(&all);
    }
    if (failed != MPI_GROUP_NULL) MPI_Group_free(&failed);
  }
  // Printed on every run so that loops can measure stalls shorter than the bound below.
  std::printf("[rank %d] longest call %.3f s (%s)\n", me, run.longest_call(), run.longest_what());
  CHECK(run.longest_call() < kCallMs * time_scale() / 1000, "a call took %.1f s (%s)", run.longest_call(),
        run.longest_what());
  CHECK(store_finalize(&s) == STORE_OK, "store_finalize");
  const double total_s = std::chrono::duration<double>(Clock::now() - t_start).count();
  CHECK(total_s < kScenarioMs * time_scale() / 1000, "the scenario took %.1f s", total_s);
  write_verdict(check_failures == 0);
  if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  MPI_Comm_free(&world);
  MPI_Finalize();
  return check_failures == 0 ? 0 : 1;
}
