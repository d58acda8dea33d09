// Shared by the tests: verdict files, deterministic values, and small MPI helpers.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "rmastore/store.h"

namespace rmastore::test {

// Time bounds. Every bound in the tests (deadlines for a failure to be reported or a repair to
// settle, the longest a call may take, how long a race runs, test_unaffected's stall bound) is
// there only so that a hang or a stall fails instead of running forever; none measures speed.
// They were chosen on an idle 2-core machine. RMASTORE_TEST_TIME_SCALE=<factor> (default 1,
// e.g. 3 on a loaded machine or under sanitizers) multiplies all of them, the delays of
// RMASTORE_DELAY (src/common/fault.cpp), tests/mpirun_test.sh's limit and CTest's timeouts
// (cmake/RmastoreTesting.cmake): one setting, read when the tests run.
double time_scale();
// `ms` milliseconds times time_scale().
std::chrono::milliseconds scaled(double ms);

// Writes PASS or FAIL for this rank where tests/mpirun_test.sh looks for it.
void write_verdict(bool pass);

// A victim's death by its own hand: leaves killed.<world rank> (holding `why`) in the verdict
// directory, then raises SIGKILL. The runner checks this marker for every own-hand@<rank> that
// expect_deaths() declared, as it checks fault-fired markers of fault points (src/common/fault.hpp).
[[noreturn]] void die_by_own_hand(const char *why);
// A process that MPI may declare failed while it is alive: leaves stopped.<world rank> (holding
// `why`) in the verdict directory, then stops every thread of this process (SIGSTOP) for `how_long`;
// a child process it forks sends the SIGCONT. Returns once resumed, if Open MPI lets it run on.
// The runner checks the marker for every stopped@<rank> that expect_deaths() declared.
void stop_for(std::chrono::milliseconds how_long, const char *why);
// Host loss (scripts/multihost.sh). watch_host_daemon: if this process's parent is its host's
// Open MPI daemon (prted), starts a thread that kills this process as soon as the daemon is gone,
// as when the machine goes away; false if the parent is no prted. `host_ranks`: the world ranks
// of this host. die_with_host then kills the daemon (kill_daemon), leaving killed.<rank> for every
// rank of the host, and dies; or waits to die with it.
bool watch_host_daemon(const std::vector<int> &host_ranks);
[[noreturn]] void die_with_host(bool kill_daemon, const char *why);
// Whether die_with_host takes the whole simulated node under Slurm: slurmd and slurmstepd too.
bool slurm_node_loss();
// Declares deaths the runner must find markers of, one spec a line: <point>@<rank>[#<n>] for a
// fault point, own-hand@<rank> for die_by_own_hand, stopped@<rank> for stop_for. For scenarios that choose their deaths
// themselves; the specs of RMASTORE_FAULT in the runner's environment are checked anyway.
void expect_deaths(const std::vector<std::string> &specs);

int world_rank();
int world_size();
// Every rank's `text` (its first 255 bytes), by rank of MPI_COMM_WORLD (collective).
std::vector<std::string> all_strings(const std::string &text);
// The host name of every rank of MPI_COMM_WORLD (collective; each simulated host of
// scripts/multihost.sh has its own).
std::vector<std::string> host_of_rank();

// A value fully determined by (key, version, len): tests rebuild it instead of storing it.
std::vector<std::byte> make_value(std::uint64_t key, std::uint64_t version, std::size_t len);
// True if buf[0..len) is make_value(key, version, len) for some version; stores it in *version.
bool check_value(std::uint64_t key, const std::byte *buf, std::size_t len, std::uint64_t *version);

// The version of make_value that store_get returns for `key` (at most `len` bytes long), or 0
// if the get fails or the value is not one make_value made.
std::uint64_t version_of(store_t s, store_key_t key, std::size_t len);

// The recovery variant the tests run under: RMASTORE_TEST_RECOVERY=localized selects
// STORE_RECOVERY_LOCALIZED, anything else the default.
int test_recovery();

// store_init over MPI_COMM_WORLD with `replicas` copies (capped at the job size), in the
// variant test_recovery() names unless `recovery` (a store_recovery_kind_t) is given.
store_t make_store(int replicas, std::size_t initial_slot_size = 64, int recovery = -1);

// Bytes this process has allocated and not freed: glibc's count, or the sanitizer allocator's
// in an AddressSanitizer build (where glibc's reads 0).
std::size_t heap_in_use();

// Agreement across ranks: true only if `ok` is true on every rank.
bool all_ranks(bool ok);

// Command lines. Each program parses its own with getopt_long, its option string starting with
// ':' (so that a missing value is told apart from an unknown option), and reports every mistake
// through a Cli: a clear message and the usage on stderr, then exit status 2. Every rank has the
// same arguments, so every rank finds the same mistake: once MPI is initialized only world rank
// 0 prints, and every rank leaves MPI (MPI_Finalize) before it exits.
struct Cli {
  const char *usage; // "program [--option N] ...", printed after every mistake and for --help

  [[noreturn]] void error(const std::string &message) const;
  // For getopt_long's '?' (an unknown option) and ':' (an option without its value).
  [[noreturn]] void bad_option(int c, char *const argv[]) const;
  // --help: the usage on stdout, exit status 0.
  [[noreturn]] void help() const;
  // After the options: error if arguments are left over (this program takes no operands).
  void no_operands(int argc, char *const argv[]) const;
  // The whole of `text` as a base-10 integer in [min, max] (strtoll, every error checked).
  long long integer(const char *option, const char *text, long long min, long long max) const;
  // The whole of `text` as an unsigned base-10 integer in [min, max] (strtoull; no sign).
  unsigned long long unsigned_integer(const char *option, const char *text, unsigned long long min,
                                      unsigned long long max) const;
  // The whole of `text` as a finite number in [min, max] (strtod, every error checked).
  double number(const char *option, const char *text, double min, double max) const;
};

// Checks of the tests whose ranks die, which cannot use GoogleTest: a failed one is printed
// and counted, and the rank's verdict is check_failures == 0.
inline int check_failures = 0;
#define CHECK(cond, ...)                                                                                               \
  do {                                                                                                                 \
    if (!(cond)) {                                                                                                     \
      std::fprintf(stderr, "[rank %d] %s:%d: check failed: %s ", ::rmastore::test::world_rank(), __FILE__, __LINE__,   \
                   #cond);                                                                                             \
      std::fprintf(stderr, __VA_ARGS__);                                                                               \
      std::fprintf(stderr, "\n");                                                                                      \
      ++::rmastore::test::check_failures;                                                                              \
    }                                                                                                                  \
  } while (0)

} // namespace rmastore::test
