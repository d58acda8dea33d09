// What a failure scenario of test_failure is: who dies in each episode, how and when, and the
// workload around the deaths. A fixed scenario comes from the command line (options.cpp), which
// tests/failure/scenarios.txt writes for each row; a seed draws one (schedule.cpp).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace rmastore::test::failure {

using Clock = std::chrono::steady_clock;

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

// The command line (the usage on a mistake). With --seed the scenario is drawn here.
Options parse(int argc, char **argv);

// The randomized driver (schedule.cpp): every rank draws the same scenario from o.seed, with
// `kills` deaths among `p` processes (--seed S --kills K), or one death inside store_recover
// (--seed S --in-recovery 1).
void draw(Options &o, int kills, int p);
void draw_in_recovery(Options &o, int p);

// The deaths the runner must find markers of, besides RMASTORE_FAULT (schedule.cpp).
std::vector<std::string> expected_deaths(const Options &o);

// This rank dies inside store_recover (a recover.* or runtime.* point of RMASTORE_FAULT).
bool dies_in_recovery(int rank);

// Localized: this rank dies in the background repair of another's death.
bool dies_in_repair(int rank);

// The parts of `s` between the `sep`s, empty ones left out.
std::vector<std::string> split(const std::string &s, char sep);

inline bool in(const std::vector<int> &list, int rank) {
  return std::find(list.begin(), list.end(), rank) != list.end();
}

} // namespace rmastore::test::failure
