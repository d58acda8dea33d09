// One run of a failure scenario, rank by rank: the operations, the deaths, the recovery and the
// checks of every key (tests/test_failure.cpp drives its episodes).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "capi/test_access.hpp"
#include "peers.hpp"
#include "scenario.hpp"
#include "stall_watch.hpp"

namespace rmastore::test::failure {

// What every rank knows about its own keys (and those it took over), visible to all ranks of
// the node. A version with kDeleted set is a delete's: the key has no value of that version.
struct KeyRecord {
  std::atomic<std::uint64_t> committed; // last version whose put (or delete) returned STORE_OK
  std::atomic<std::uint64_t> inflight;  // version of a put (or delete) under way, 0 if none
};
constexpr std::uint64_t kDeleted = std::uint64_t{1} << 63;

// --delete: whether the operation of `version` on `key` deletes it. Never the first value of a
// key (version 1) nor the values after a recovery (take_over), so that every key exists there.
bool deletes_at(const Options &o, store_key_t key, std::uint64_t version);

// `key` may read as not found: it was never put, or a delete returned or was under way.
bool may_be_absent(std::uint64_t committed, std::uint64_t inflight);

// The records of `ranks` x `keys` keys, in memory shared by the ranks of this node (collective).
KeyRecord *shared_records(int ranks, int keys);

// Key `k` of `rank`, and the length of its value of `version`.
store_key_t key_of(int rank, int k);
std::size_t length_of(store_key_t key, std::uint64_t version);

class Run {
public:
  Run(const Options &o, KeyRecord *rec, store_t s);

  KeyRecord &record(int rank, int k) { return rec_[rank * opt_.keys + k]; }

  // --expect-loss: every copy of `key` sat on a process in `dead` (placement before any death).
  bool lost(store_key_t key, const std::vector<int> &dead) const;
  std::uint64_t lost_seen() const { return lost_seen_; }
  // Localized: the keys this process's loss list holds beyond those its gets just found lost. A
  // key a get here reported lost stays listed until this process puts it, even if its writer
  // put it again since (and so it is no longer counted by verify): such a key must read now.
  // Returns the number of listed keys that are neither, and names them in *why.
  std::uint64_t unexplained_lost(const store_recovery_t &report, std::string *why);
  bool listed_lost(store_key_t key) const;
  std::uint64_t lost_keys(const std::vector<int> &dead) const;

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
  bool failed_as_expected(store_status_t st, const char *what);

  // A failure seen: a process that is to die with others dies now, so that the deaths of an
  // episode are (nearly) simultaneous.
  void saw_failure(const Episode &e);

  // Host loss: the episode's first victim kills its host's daemon, the others die with it.
  [[noreturn]] void die(const Episode &e, const char *why);

  // A victim still alive, and not meant to die inside store_recover or the background repair,
  // dies now.
  void victim_dies(const Episode &e);

  // A killer's death at its operation `ops`.
  void kill_at(const Episode &e, int ops);

  // Puts `version` of every key this rank writes (its own and those it took over), as single
  // puts or as one transaction. Returns false on a failure.
  bool write_all(std::uint64_t version, bool tx);

  // --batch: the puts of `which` (indexes into `mine`, values in `values`) at once. The first
  // status that is not STORE_OK, after every request completed.
  store_status_t put_batch(const std::vector<std::size_t> &which, const std::vector<std::pair<int, int>> &mine,
                           const std::vector<std::vector<std::byte>> &values);

  // Operations until the episode's failure is reported.
  void operate(const Episode &e, std::uint64_t base);

  // Localized: waits until this rank knows at least `dead` failures and its repair is idle.
  // Returns false after kWaitMs (scaled).
  bool wait_for_repair(int dead);

  // Localized: once every survivor knows the `dead` failures, the survivors (of the test's
  // own communicator `comm`; the store needs none), after waiting until no survivor has
  // anything left to repair, three times in a row, so that repairs one asked of another are
  // seen too.
  // `store_dead` of them are in the store's communicator (a compaction drops the dead).
  Peers settle(MPI_Comm comm, const std::vector<int> &dead, std::size_t store_dead);

  // Recovers, again as long as processes fail meanwhile; returns the survivors' communicator.
  MPI_Comm recover(store_recovery_t &report);

  // Every key of every rank, the dead ranks' included, holds its committed value or the one
  // that was being put, and has its full number of copies on the survivors.
  // Also counts the keys store_get reports lost (lost_seen).
  void verify(Peers &g, int survivors, const std::vector<int> &dead);

  // After recovery: transaction mode, then normal mode, and the dead ranks' keys get a new
  // owner among the survivors, who writes them from now on.
  void take_over(Peers &g, const std::vector<int> &dead, std::uint64_t version);

private:
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

} // namespace rmastore::test::failure
