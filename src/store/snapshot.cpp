// The durable tier: store_snapshot writes every value once to the snapshot directory, and
// store_init with `restore` puts back the newest complete snapshot (durable/format.hpp has the
// files). Both are collective, and every step that can fail on one process ends with all of
// them agreeing on a status, so that a failure leaves every process with the same answer and
// no manifest that names a part which is not on disk.
#include <mpi.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "common/errors.hpp"
#include "common/fault.hpp"
#include "durable/format.hpp"
#include "recovery/collectives.hpp"
#include "store/store.hpp"
#include "transport/failure.hpp"

namespace rmastore::internal {
namespace {

// Throws STORE_ERR_SNAPSHOT_OTHER if complete snapshot `m` is of another data set.
void require_same_name(const durable::Manifest &m, const std::string &name, const std::string &dir) {
  if (m.name == name) return;
  const auto shown = [](const std::string &n) { return n.empty() ? std::string("none") : "\"" + n + "\""; };
  throw StoreError(STORE_ERR_SNAPSHOT_OTHER, dir + ": snapshot " + std::to_string(m.seq) + " has snapshot_name " +
                                                 shown(m.name) + ", this store " + shown(name));
}

// The lowest (most negative) of every process's status: the same on all of them.
store_status_t agree(MPI_Comm comm, store_status_t mine) {
  int in = mine, out = STORE_OK;
  check_collective(MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce", "a snapshot");
  return static_cast<store_status_t>(out);
}

// Runs `step`, and turns what it throws into this process's status and message.
template <class F> store_status_t attempt(F &&step, std::string *why) {
  try {
    step();
    return STORE_OK;
  } catch (const StoreError &e) {
    if (e.status() == STORE_ERR_PROC_FAILED) throw;
    *why = e.what();
    return e.status();
  } catch (const std::bad_alloc &) {
    *why = "out of memory";
    return STORE_ERR_NO_MEMORY;
  }
}

// Throws the agreed status: this process's own reason if it failed, else the other's. A file
// system's refusal (which file, and the system's reason) is printed by the process it happened
// on, always: STORE_ERR_IO's text sends the user to standard error.
void settle(MPI_Comm comm, store_status_t mine, const std::string &why, const char *what) {
  const store_status_t all = agree(comm, mine);
  if (all == STORE_OK) return;
  if (mine == STORE_ERR_IO) std::fprintf(stderr, "rmastore: %s\n", why.c_str());
  if (mine != STORE_OK) throw StoreError(all, why);
  throw StoreError(all, std::string(what) + " failed on another process");
}

// Reserves `bytes` in `v`, asking for huge pages: the copy of a snapshot's values touches every
// page once, and a fault per 4 KiB page made that copy cost as much as writing the part (perf,
// on a virtual machine: 64 MiB took 0.7-1 s, mostly page faults).
void reserve_in_huge_pages(std::vector<std::byte> &v, std::size_t bytes) {
  v.reserve(bytes);
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<std::uintptr_t>(v.data());
  const std::uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1), last = (begin + bytes) & ~(kHuge - 1);
  if (last > first) ::madvise(reinterpret_cast<void *>(first), last - first, MADV_HUGEPAGE);
}

// Writes this process's part of snapshot f.seq, its records added by `add`, and syncs it.
template <class Add> void write_part(Store::SnapshotInFlight &f, const std::string &dir, std::size_t rank, Add &&add) {
  durable::make_snapshot_dir(dir, f.seq);
  durable::PartWriter part(dir, f.seq, rank);
  add(part);
  RMASTORE_FAULT_POINT("snapshot.part_written");
  const durable::PartSummary sum = part.finish();
  f.part[0] = sum.bytes;
  f.part[1] = sum.records;
  f.part[2] = sum.chain;
  // Tests stretch the time between the part on disk and the manifest, to kill a job there.
  RMASTORE_FAULT_DELAY("snapshot.parts_durable");
}

// Makes snapshot m count in `dir`: its manifest. Then the complete snapshots it leaves beyond
// `keep` (the oldest of `before`: those complete when it started, newest first) lose their
// manifest, so that none is loaded, and their parts go too if `all_parts`; otherwise each
// process removes its share (drop_parts). Incomplete snapshots older than m (cut short by a
// crash or an error) go whole. A failed removal only leaves files behind.
void complete(const std::string &dir, const durable::Manifest &m, int keep, const Store::Complete &before,
              bool all_parts) {
  durable::write_manifest(dir, m);
  try {
    for (std::uint64_t s : durable::list_snapshots(dir)) {
      const bool was_complete = std::any_of(before.begin(), before.end(), [s](const auto &b) { return b.first == s; });
      if (s < m.seq && !was_complete) durable::remove_snapshot(dir, s);
    }
    for (std::size_t k = static_cast<std::size_t>(keep) - 1; k < before.size(); ++k) {
      if (all_parts) {
        durable::remove_snapshot(dir, before[k].first);
      } else {
        durable::remove_manifest(dir, before[k].first);
      }
    }
  } catch (const StoreError &) {
  }
}

// This process's share of the parts of the snapshots complete() dropped: parts i with
// i mod size == rank, so that no process removes them all.
void drop_parts(const std::string &dir, int keep, const Store::Complete &before, std::size_t rank, std::size_t size) {
  for (std::size_t k = static_cast<std::size_t>(keep) - 1; k < before.size(); ++k) {
    for (std::size_t i = rank; i < before[k].second; i += size) durable::remove_part(dir, before[k].first, i);
  }
}

// The flush of two levels, in a thread of each process: copies this process's part from the
// local level to `dir`. Rank 0's thread then waits until every part is there and writes the
// manifest, so a flush completes without another call. It stops waiting when told that every
// copy succeeded (the parts are in place, seen or not) or to stop (it then looks once more).
void flush(Store::FlushInFlight &fl, const std::string &dir, const std::string &local, std::size_t rank, int keep) {
  try {
    fl.status = attempt(
        [&] {
          durable::make_snapshot_dir(dir, fl.seq);
          durable::stage_part(local, dir, fl.seq, rank, &fl.stop);
          // Tests stretch the flush, to kill a job inside it.
          RMASTORE_FAULT_DELAY("snapshot.flushing");
          durable::publish_part(dir, fl.seq, rank);
        },
        &fl.why);
  } catch (...) {
    fl.status = STORE_ERR_INTERNAL;
    fl.why = "the flush's copy failed unexpectedly";
  }
  fl.copied.store(true);
  fl.copied.notify_all();
  if (fl.status != STORE_OK || !fl.manifest) return;
  auto pause = std::chrono::milliseconds(1);
  for (std::size_t i = 0; i < fl.manifest->parts.size();) {
    if (fl.all_copied.load() || durable::part_exists(dir, fl.seq, i)) {
      ++i;
    } else if (fl.stop.load()) {
      fl.manifest_why = durable::part_path(dir, fl.seq, i) + " is not there";
      return;
    } else {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(100));
    }
  }
  // In the background, rank 0 can remove the dropped snapshots whole.
  try {
    fl.manifest_status = attempt([&] { complete(dir, *fl.manifest, keep, fl.before, true); }, &fl.manifest_why);
  } catch (...) {
    fl.manifest_status = STORE_ERR_INTERNAL;
    fl.manifest_why = "writing the manifest failed unexpectedly";
  }
}

} // namespace

void Store::require_ready_for_durable(const char *what) {
  require_healthy();
  if (tx_open_) throw StoreError(STORE_ERR_TX_STATE, std::string(what) + " with a transaction open");
  Core &c = *core_;
  if (c.config.snapshot_dir.empty()) throw StoreError(STORE_ERR_ARG, "no snapshot_dir in the store's configuration");
  // A key whose first holder failed would be written by nobody, and a loss is known only once
  // the repairs ran: the localized variant's repairs must have run (store_recover finishes them).
  if (c.rt.detecting() && c.rt.failures->failures() > 0)
    throw StoreError(STORE_ERR_PROC_FAILED, std::string("a process failed: call store_recover before ") + what);
  c.app.drain();
}

std::uint64_t Store::snapshot() {
  const std::uint64_t seq = snapshot_start(false);
  snapshot_wait();
  return seq;
}

std::uint64_t Store::snapshot_start(bool background) {
  const char *what = background ? "store_snapshot_start" : "store_snapshot";
  if (snapshot_) throw StoreError(STORE_ERR_ARG, "a snapshot is in flight: call store_snapshot_wait first");
  require_ready_for_durable(what);
  if (dropper_.joinable()) dropper_.join();
  finish_flush();
  Core &c = *core_;
  const std::string &dir = c.config.snapshot_dir;
  // With two levels the parts go to the local one, and the flush takes them on.
  const std::string &part_dir = local_dir_.empty() ? dir : local_dir_;
  MPI_Comm comm = c.rt.comm;
  std::string why;

  // The number: one above any in the directory, complete or not (a crashed snapshot's parts
  // must not be mixed with this one's). This collective is also the cut: every process has
  // entered the call, so every put that returned before is in memory. A directory that holds
  // another data set's snapshots is refused before anything is written or removed.
  std::uint64_t newest = 0;
  Complete before;
  store_status_t st = attempt(
      [&] {
        const std::vector<std::uint64_t> seqs = durable::list_snapshots(dir);
        if (!seqs.empty()) newest = seqs.front();
        if (!local_dir_.empty()) {
          const std::vector<std::uint64_t> local = durable::list_snapshots(local_dir_);
          if (!local.empty()) newest = std::max(newest, local.front());
        }
        for (std::uint64_t s : seqs) {
          std::string ignored;
          if (const std::optional<durable::Manifest> m = durable::read_manifest(dir, s, &ignored)) {
            require_same_name(*m, c.config.snapshot_name, dir);
            before.emplace_back(s, m->parts.size());
          }
        }
      },
      &why);
  std::uint64_t seq = 0;
  check_collective(MPI_Allreduce(&newest, &seq, 1, MPI_UINT64_T, MPI_MAX, comm), "MPI_Allreduce", "a snapshot");
  ++seq;
  settle(comm, st, why, what);

  // Each process reads the values it is the first holder of. No process returns before every
  // process has read them (the settle below), so no put or transaction that starts after the
  // call can reach one: the cut is consistent. In the background the values are copied into
  // memory and written by a thread; otherwise they go straight to the part.
  auto flight = std::make_unique<SnapshotInFlight>();
  flight->seq = seq;
  flight->before = std::move(before);
  SnapshotInFlight *f = flight.get();
  const std::size_t rank = static_cast<std::size_t>(c.rt.rank);
  const auto read_mine = [&](auto &&sink) {
    std::vector<SlotStore::LocalCopy> mine;
    std::size_t total = 0;
    for (const SlotStore::LocalCopy &copy : c.holder.slots.copies()) {
      if (copy.id.ns != Ns::kValue || copy.state != CopyState::kComplete) continue;
      const std::vector<int> holders = variant_->holders(copy.id.key);
      if (holders.empty() || holders.front() != c.rt.rank) continue;
      mine.push_back(copy);
      total += copy.header.length;
    }
    if (background) {
      reserve_in_huge_pages(f->bytes, total);
      f->records.reserve(mine.size());
    }
    std::vector<std::byte> buf(4096);
    for (const SlotStore::LocalCopy &copy : mine) {
      std::size_t len = 0;
      ReadResult r;
      // A copy reads as torn only while something writes it, which the contract excludes (but
      // for a localized repair): a copy that never settles is an error, not a hang.
      int tries = 0;
      while ((r = c.holder.slots.read_local(copy.id, buf.data(), buf.size(), &len)) == ReadResult::kTruncated ||
             r == ReadResult::kRetry) {
        if (r == ReadResult::kTruncated) buf.resize(len);
        if (++tries > 100) std::this_thread::sleep_for(std::chrono::microseconds(100)); // ~1 s in all
        if (tries == 10000)
          throw StoreError(STORE_ERR_INTERNAL,
                           "the copy of key " + std::to_string(copy.id.key) + " kept changing during a snapshot");
      }
      if (r == ReadResult::kOk) sink(copy.id.key, buf.data(), len); // else deleted or lost meanwhile
    }
  };
  if (background) {
    st = attempt(
        [&] {
          read_mine([&](std::uint64_t key, const std::byte *value, std::size_t len) {
            f->records.push_back({key, len});
            f->bytes.insert(f->bytes.end(), value, value + len);
          });
        },
        &why);
  } else {
    st = attempt(
        [&] {
          write_part(*f, part_dir, rank, [&](durable::PartWriter &part) {
            read_mine([&](std::uint64_t key, const std::byte *value, std::size_t len) { part.add(key, value, len); });
          });
        },
        &why);
  }
  settle(comm, st, why, what);
  if (background) {
    const auto write = [f, part_dir, rank] {
      f->status = attempt(
          [&] {
            write_part(*f, part_dir, rank, [&](durable::PartWriter &part) {
              std::size_t at = 0;
              for (const auto &[key, len] : f->records) {
                part.add(key, f->bytes.data() + at, len);
                at += len;
              }
            });
          },
          &f->why);
    };
    try {
      f->writer = std::thread(write);
    } catch (const std::system_error &) {
      write(); // every process must still reach store_snapshot_wait with a snapshot in flight
    }
  }
  snapshot_ = std::move(flight);
  return seq;
}

void Store::end_snapshot() {
  if (dropper_.joinable()) dropper_.join();
  if (!snapshot_) return;
  if (snapshot_->writer.joinable()) snapshot_->writer.join();
  snapshot_.reset();
}

void Store::snapshot_wait() {
  if (!snapshot_) throw StoreError(STORE_ERR_ARG, "no snapshot is in flight: call store_snapshot_start first");
  // The snapshot ends here whatever happens: joined now, its memory freed on return.
  if (snapshot_->writer.joinable()) snapshot_->writer.join();
  const std::unique_ptr<SnapshotInFlight> f = std::move(snapshot_);
  require_healthy();
  Core &c = *core_;
  const std::string &dir = c.config.snapshot_dir;
  MPI_Comm comm = c.rt.comm;
  std::string why = f->why;
  settle(comm, f->status, why, "store_snapshot_wait");

  // Rank 0 names every part in the manifest, which makes the snapshot count: now, or with two
  // levels once the flush has brought every part to snapshot_dir.
  std::vector<std::uint64_t> lines(c.rt.rank == 0 ? 3 * static_cast<std::size_t>(c.rt.size) : 0);
  check_collective(MPI_Gather(f->part, 3, MPI_UINT64_T, lines.data(), 3, MPI_UINT64_T, 0, comm), "MPI_Gather",
                   "a snapshot");
  durable::Manifest m;
  m.seq = f->seq;
  m.name = c.config.snapshot_name;
  for (std::size_t i = 0; i < lines.size(); i += 3)
    m.parts.push_back(durable::PartSummary{lines[i], lines[i + 1], lines[i + 2]});
  if (!local_dir_.empty()) {
    // No flush starts unless every process got here: a failure is PROC_FAILED everywhere.
    settle(comm, STORE_OK, "", "store_snapshot_wait");
    auto fl = std::make_unique<FlushInFlight>();
    fl->seq = f->seq;
    if (c.rt.rank == 0) {
      fl->manifest = std::move(m);
      fl->before = std::move(f->before);
    }
    FlushInFlight *p = fl.get();
    try {
      fl->thread = std::thread([p, dir, local = local_dir_, rank = static_cast<std::size_t>(c.rt.rank),
                                keep = c.config.snapshot_keep] { flush(*p, dir, local, rank, keep); });
    } catch (const std::system_error &e) {
      // Every process must still meet the others in finish_flush: this one reports the failure
      // there.
      fl->status = STORE_ERR_IO;
      fl->why = std::string("cannot start the flush's thread: ") + e.what();
      fl->copied.store(true);
    }
    flush_ = std::move(fl);
    last_snapshot_ = f->seq;
    return;
  }
  store_status_t st = STORE_OK;
  if (c.rt.rank == 0) {
    st = attempt(
        [&] {
          RMASTORE_FAULT_POINT("snapshot.before_manifest");
          complete(dir, m, c.config.snapshot_keep, f->before, false);
        },
        &why);
  }
  settle(comm, st, why, "store_snapshot_wait");
  // Removing the dropped parts took as long as writing a tenth of the new ones (ext4 freeing
  // 64 MiB: 25-55 ms), and the caller need not wait for it.
  const auto drop = [dir, keep = c.config.snapshot_keep, before = std::move(f->before),
                     rank = static_cast<std::size_t>(c.rt.rank), size = static_cast<std::size_t>(c.rt.size)] {
    try {
      drop_parts(dir, keep, before, rank, size);
    } catch (...) { // a failed removal only leaves files behind
    }
  };
  try {
    dropper_ = std::thread(drop);
  } catch (const std::system_error &) {
    drop();
  }
  last_snapshot_ = f->seq;
  flushed_snapshot_ = f->seq;
}

void Store::finish_flush() {
  if (!flush_) return;
  const std::unique_ptr<FlushInFlight> fl = std::move(flush_);
  // Whatever happens, the thread ends before the flush is forgotten.
  struct End {
    FlushInFlight &fl;
    ~End() { fl.end(); }
  } end{*fl};
  fl->copied.wait(false);
  const std::string &dir = core_->config.snapshot_dir;
  const std::string head = "the flush of snapshot " + std::to_string(fl->seq) + " to " + dir;
  settle(core_->rt.comm, fl->status, fl->why, head.c_str());
  // Every part is in place: rank 0's thread writes the manifest, without waiting to see them.
  fl->all_copied.store(true);
  if (fl->thread.joinable()) fl->thread.join();
  settle(core_->rt.comm, fl->manifest ? fl->manifest_status : STORE_OK, fl->manifest_why, head.c_str());
  flushed_snapshot_ = fl->seq;
  drop_local_parts(fl->seq);
}

void Store::drop_local_parts(std::uint64_t seq) {
  try {
    for (std::uint64_t s : durable::list_snapshots(local_dir_))
      if (s < seq) durable::remove_part(local_dir_, s, static_cast<std::size_t>(core_->rt.rank));
  } catch (const StoreError &) {
  } catch (const std::bad_alloc &) {
  }
}

void Store::close_flush(bool everyone_copied) {
  if (!flush_) return;
  const std::unique_ptr<FlushInFlight> fl = std::move(flush_);
  // Rank 0's thread looks once more for every part, and writes the manifest if it finds them.
  fl->end();
  // Said by the process whose copy failed, and by rank 0 if it wrote no manifest. Local parts
  // stay: only rank 0 knows whether the snapshot is complete (a restart reads them if it is).
  const std::string head =
      "rmastore: snapshot " + std::to_string(fl->seq) + " is not complete in " + core_->config.snapshot_dir + ": ";
  if (fl->status != STORE_OK) {
    std::fprintf(stderr, "%s%s\n", head.c_str(), fl->why.c_str());
  } else if (fl->manifest && fl->manifest_status != STORE_OK) {
    std::fprintf(stderr, "%s%s\n", head.c_str(),
                 everyone_copied ? fl->manifest_why.c_str() : "a process failed before every part arrived");
  }
}

void Store::abandon_flush() {
  if (!flush_) return;
  flush_->end();
  flush_.reset();
}

std::uint64_t Store::flush_wait() {
  require_healthy();
  if (core_->config.snapshot_dir.empty())
    throw StoreError(STORE_ERR_ARG, "no snapshot_dir in the store's configuration");
  if (dropper_.joinable()) dropper_.join();
  finish_flush();
  return flushed_snapshot_;
}

namespace {

// Every process's `mine`, concatenated in rank order; a failure is STORE_ERR_PROC_FAILED, as
// for every step of the durable tier.
std::vector<std::uint64_t> gather_all(MPI_Comm comm, const std::vector<std::uint64_t> &mine, const char *what) {
  return allgatherv(comm, mine, [what](int rc, const char *call) { check_collective(rc, call, what); });
}

// The newest complete snapshot in the store's directory: its number (0: none) and, in
// *records, this process's share of its values (parts i with i mod size == rank: no process
// reads everything, whatever the two jobs' sizes). A snapshot that fails a check on any process
// is skipped by all, said on standard error, and counted in *skipped. A part found whole in
// the local level `local` (two levels: a restart on the same nodes) is read there, and counted
// in *local_parts. Collective.
std::uint64_t read_newest(Core &c, const std::string &local, const char *what, std::vector<durable::Record> *records,
                          int *skipped, int *local_parts) {
  const std::string &dir = c.config.snapshot_dir;
  MPI_Comm comm = c.rt.comm;
  std::string why;
  // Rank 0's list, so that every process tries the same snapshots in the same order.
  std::vector<std::uint64_t> seqs;
  store_status_t st = STORE_OK;
  if (c.rt.rank == 0) st = attempt([&] { seqs = durable::list_snapshots(dir); }, &why);
  settle(comm, st, why, what);
  std::uint64_t count = seqs.size();
  check_collective(MPI_Bcast(&count, 1, MPI_UINT64_T, 0, comm), "MPI_Bcast", what);
  seqs.resize(count);
  check_collective(MPI_Bcast(seqs.data(), static_cast<int>(count), MPI_UINT64_T, 0, comm), "MPI_Bcast", what);

  for (std::uint64_t seq : seqs) {
    records->clear();
    bool usable = true;
    st = attempt(
        [&] {
          const std::optional<durable::Manifest> m = durable::read_manifest(dir, seq, &why);
          if (!m) {
            usable = false;
            return;
          }
          require_same_name(*m, c.config.snapshot_name, dir);
          for (std::size_t i = static_cast<std::size_t>(c.rt.rank); i < m->parts.size();
               i += static_cast<std::size_t>(c.rt.size)) {
            std::optional<std::vector<durable::Record>> part;
            if (!local.empty() && durable::part_exists(local, seq, i)) {
              std::string ignored;
              part = durable::read_part(local, seq, i, m->parts[i], &ignored);
              if (part) ++*local_parts;
            }
            if (!part) part = durable::read_part(dir, seq, i, m->parts[i], &why);
            if (!part) {
              usable = false;
              return;
            }
            for (durable::Record &r : *part) records->push_back(std::move(r));
          }
        },
        &why);
    settle(comm, st, why, what);
    if (agree(comm, usable ? STORE_OK : STORE_ERR_IO) == STORE_OK) return seq;
    if (!usable)
      std::fprintf(stderr, "rmastore: snapshot %llu in %s skipped: %s\n", static_cast<unsigned long long>(seq),
                   dir.c_str(), why.c_str());
    ++*skipped;
  }
  records->clear();
  return 0;
}

} // namespace

void Store::put_records(const std::vector<durable::Record> &records) {
  std::vector<PutItem> items;
  items.reserve(records.size());
  for (const durable::Record &r : records) items.push_back(PutItem{r.key, r.value.data(), r.value.size()});
  constexpr std::size_t kBatch = 512;
  // The variant's own puts: allowed in the global variant's transaction mode too, since each key
  // either keeps its state or gets the snapshot's value, and a call cut short by a failure is
  // finished by the next one.
  for (std::size_t i = 0; i < items.size(); i += kBatch) {
    variant_->put_many({items.begin() + static_cast<std::ptrdiff_t>(i),
                        items.begin() + static_cast<std::ptrdiff_t>(std::min(items.size(), i + kBatch))});
  }
}

std::uint64_t Store::restore() {
  std::vector<durable::Record> records;
  const std::uint64_t seq =
      read_newest(*core_, local_dir_, "store_init's restore", &records, &snapshots_skipped_, &restored_local_parts_);
  if (seq == 0) return 0;
  put_records(records);
  settle(core_->rt.comm, STORE_OK, "", "store_init's restore");
  restored_snapshot_ = seq;
  restored_keys_ = records.size();
  return seq;
}

std::uint64_t Store::restore_lost(std::vector<std::uint64_t> *back) {
  constexpr const char *kWhat = "store_restore_lost";
  require_ready_for_durable(kWhat);
  // A flush that failed was said on standard error; the keys come from the snapshot before it.
  try {
    finish_flush();
  } catch (const StoreError &e) {
    if (e.status() != STORE_ERR_IO) throw;
  }
  Core &c = *core_;
  MPI_Comm comm = c.rt.comm;
  back->clear();
  // The candidates: every process's loss list (they differ in the localized variant).
  std::size_t n = 0;
  const store_key_t *listed = variant_->lost_keys(lost_keys_, &n);
  std::vector<std::uint64_t> lost = gather_all(comm, std::vector<std::uint64_t>(listed, listed + n), kWhat);
  std::sort(lost.begin(), lost.end());
  lost.erase(std::unique(lost.begin(), lost.end()), lost.end());
  if (lost.empty()) return 0; // the same on every process: nothing read
  std::vector<durable::Record> records;
  int skipped = 0, local_parts = 0;
  const std::uint64_t seq = read_newest(c, local_dir_, kWhat, &records, &skipped, &local_parts);
  // Only keys that still read as lost: one put or deleted since keeps what it has now.
  std::vector<durable::Record> wanted;
  std::vector<std::uint64_t> mine;
  std::string why;
  const store_status_t st = attempt(
      [&] {
        std::byte probe[1];
        std::size_t len = 0;
        for (durable::Record &r : records) {
          if (!std::binary_search(lost.begin(), lost.end(), r.key) ||
              variant_->get(r.key, probe, sizeof probe, &len) != STORE_ERR_DATA_LOST)
            continue;
          mine.push_back(r.key);
          wanted.push_back(std::move(r));
        }
        put_records(wanted);
      },
      &why);
  settle(comm, st, why, kWhat);
  *back = gather_all(comm, mine, kWhat);
  std::sort(back->begin(), back->end());
  return seq;
}

} // namespace rmastore::internal
