// One run of a failure scenario (run.hpp).
#include "run.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace rmastore::test::failure {

bool deletes_at(const Options &o, store_key_t key, std::uint64_t version) {
  return o.deletes && version != 1 && version % 100 != 90 && (key * 7 + version * 13) % 3 == 0;
}

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

Run::Run(const Options &o, KeyRecord *rec, store_t s)
    : opt_(o), rec_(rec), s_(s), buf_(1 << 20), initial_(*rmastore::internal::impl(s)->placement()) {
  me_ = world_rank();
  p_ = world_size();
  owner_.resize(static_cast<std::size_t>(p_));
  for (int r = 0; r < p_; ++r) owner_[static_cast<std::size_t>(r)] = r;
}

bool Run::lost(store_key_t key, const std::vector<int> &dead) const {
  if (!opt_.expect_loss) return false;
  std::vector<int> h(static_cast<std::size_t>(initial_.replicas()));
  initial_.holders(key, h);
  return std::all_of(h.begin(), h.end(), [&](int r) { return in(dead, r); });
}

std::uint64_t Run::unexplained_lost(const store_recovery_t &report, std::string *why) {
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

bool Run::listed_lost(store_key_t key) const {
  store_recovery_t report;
  store_recovery_init(&report);
  if (store_last_recovery(s_, &report) != STORE_OK) return false;
  return report.lost_count > 0 && std::binary_search(report.lost_keys, report.lost_keys + report.lost_count, key);
}

std::uint64_t Run::lost_keys(const std::vector<int> &dead) const {
  std::uint64_t n = 0;
  for (int rank = 0; rank < p_; ++rank) {
    for (int k = 0; k < opt_.keys; ++k) n += lost(key_of(rank, k), dead) ? 1 : 0;
  }
  return n;
}

bool Run::failed_as_expected(store_status_t st, const char *what) {
  if (opt_.localized) {
    CHECK(st == STORE_OK, "%s returned %s (localized: calls carry on through failures)", what, store_strerror(st));
  } else {
    CHECK(st == STORE_ERR_PROC_FAILED, "%s returned %s", what, store_strerror(st));
  }
  return false;
}

void Run::saw_failure(const Episode &e) {
  failed_ = true;
  if (e.kill_at >= 0 && in(e.killers, me_)) die(e, "killer: with the first failure it saw");
}

void Run::die(const Episode &e, const char *why) {
  if (opt_.host_loss) die_with_host(me_ == e.victims.front(), why);
  die_by_own_hand(why);
}

void Run::victim_dies(const Episode &e) {
  if (in(e.victims, me_) && !dies_in_recovery(me_) && !dies_in_repair(me_))
    die(e, "victim still alive after its operations");
}

void Run::kill_at(const Episode &e, int ops) {
  if (e.kill_at < 0 || ops != e.kill_at || !in(e.killers, me_)) return;
  const std::string why = "killer: before its operation " + std::to_string(ops);
  die(e, why.c_str());
}

bool Run::write_all(std::uint64_t version, bool tx) {
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

store_status_t Run::put_batch(const std::vector<std::size_t> &which, const std::vector<std::pair<int, int>> &mine,
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

void Run::operate(const Episode &e, std::uint64_t base) {
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

bool Run::wait_for_repair(int dead) {
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

Peers Run::settle(MPI_Comm comm, const std::vector<int> &dead, std::size_t store_dead) {
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

MPI_Comm Run::recover(store_recovery_t &report) {
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

void Run::verify(Peers &g, int survivors, const std::vector<int> &dead) {
  auto *impl = rmastore::internal::impl(s_);
  // Localized: the locks that puts keep cached go back, so that a lock still held below is one
  // that no live process will give back.
  impl->give_back_locks();
  g.barrier();
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
        // and released under different lock words would stay held by a live process). The
        // unlocks of cached locks may still be on their way.
        for (const auto by = Clock::now() + scaled(kWaitMs);
             h.owner != rmastore::internal::kOwnerFree && Clock::now() < by;) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          impl->read_local_copy(key, h, copy);
        }
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

void Run::take_over(Peers &g, const std::vector<int> &dead, std::uint64_t version) {
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

} // namespace rmastore::test::failure
