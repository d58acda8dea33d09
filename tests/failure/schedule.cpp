// The randomized driver's schedules (a seed draws the whole scenario), and the deaths the runner
// must find markers of.
#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "scenario.hpp"

namespace rmastore::test::failure {

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

namespace {

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

} // namespace

// This rank dies inside store_recover.
bool dies_in_recovery(int rank) {
  return has_point(rank, "recover.") || has_point(rank, "runtime.");
}

// Localized: this rank dies in the background repair of another's death.
bool dies_in_repair(int rank) {
  return has_point(rank, "lock.break") || has_point(rank, "repair.");
}

} // namespace rmastore::test::failure
