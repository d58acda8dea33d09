// The files of the durable tier: snapshots of a store in a directory, written and read with
// POSIX I/O. No MPI here: store/snapshot.cpp decides who writes and reads what.
//
// <dir>/snap-<seq>/part-<i>  - the values process i of the writing job was responsible for;
// <dir>/snap-<seq>/MANIFEST  - written last, after every part is durable: a snapshot without a
//                              valid manifest was cut short and is never loaded.
// A part is a header, records (key, length, checksum, value padded to 8 bytes) and a trailer
// with the record count and a checksum chained over every record. The manifest is text: the
// format, the sequence number, the data set's name, each part's size, record count and chain,
// and a checksum of all of it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rmastore::internal::durable {

inline constexpr std::uint32_t kFormat = 1;

// What a reader needs to check a part against: the manifest's line for it.
struct PartSummary {
  std::uint64_t bytes = 0;   // the file's size
  std::uint64_t records = 0; // values in it
  std::uint64_t chain = 0;   // checksum chained over the records' checksums
  bool operator==(const PartSummary &) const = default;
};

struct Manifest {
  std::uint64_t seq = 0;
  std::string name; // store_config_t::snapshot_name; empty: none
  std::vector<PartSummary> parts;
};

// Whether `name` may be a snapshot_name: empty, or 1-64 of [A-Za-z0-9._-] starting with a letter
// or a digit (a manifest holds it as one word, and "-" there means none).
bool valid_name(const std::string &name);

struct Record {
  std::uint64_t key;
  std::vector<std::byte> value;
};

// Failures of the file system (a full disk, a missing or read-only directory) are thrown as
// StoreError(STORE_ERR_IO); a snapshot of another format as STORE_ERR_SNAPSHOT_FORMAT.

std::string snapshot_path(const std::string &dir, std::uint64_t seq);
std::string part_path(const std::string &dir, std::uint64_t seq, std::size_t index);

// Writes one part, buffered; finish() makes it durable (fsync) and returns its summary.
class PartWriter {
public:
  PartWriter(const std::string &dir, std::uint64_t seq, std::size_t index);
  ~PartWriter();
  PartWriter(const PartWriter &) = delete;
  PartWriter &operator=(const PartWriter &) = delete;
  void add(std::uint64_t key, const void *value, std::size_t len);
  PartSummary finish();

private:
  void write_out(const void *data, std::size_t len);
  void flush();
  std::string path_;
  int fd_ = -1;
  std::vector<std::byte> buf_;
  PartSummary summary_;
};

// Reads part `index` of snapshot `seq` and checks it against `expected`: its records, or
// nullopt with the reason in *why (missing, truncated, a bad checksum).
std::optional<std::vector<Record>> read_part(const std::string &dir, std::uint64_t seq, std::size_t index,
                                             const PartSummary &expected, std::string *why);

// Writes the manifest of `m` durably: a temporary file, fsync, rename, fsync of the directory.
void write_manifest(const std::string &dir, const Manifest &m);
// The manifest of snapshot `seq`, or nullopt with the reason in *why (none: the snapshot is
// incomplete; or damaged). Throws STORE_ERR_SNAPSHOT_FORMAT for a manifest of another format.
std::optional<Manifest> read_manifest(const std::string &dir, std::uint64_t seq, std::string *why);

// The sequence numbers of the snapshot directories in `dir`, complete or not, newest first.
// Throws STORE_ERR_IO if `dir` cannot be read.
std::vector<std::uint64_t> list_snapshots(const std::string &dir);
// Creates snapshot `seq`'s directory in `dir`, which must exist; it may exist already.
void make_snapshot_dir(const std::string &dir, std::uint64_t seq);
// Removes snapshot `seq`, manifest first so that a crash midway leaves it incomplete.
void remove_snapshot(const std::string &dir, std::uint64_t seq);
// Removes snapshot `seq`'s manifest only: it is then incomplete, and never loaded.
void remove_manifest(const std::string &dir, std::uint64_t seq);

// Two levels (store_config_t::snapshot_local_dir). `dir` with every "%h" replaced by this
// host's name.
std::string expand_host(const std::string &dir);
// Copies part `index` of snapshot `seq` from `from` to `to`, whose snapshot directory must
// exist, under a temporary name, synced; publish_part then renames it and syncs the directory,
// so that a part under its own name in `to` is whole and durable.
// Throws STORE_ERR_IO as soon as *stop is set (an abandoned flush).
void stage_part(const std::string &from, const std::string &to, std::uint64_t seq, std::size_t index,
                const std::atomic<bool> *stop);
void publish_part(const std::string &to, std::uint64_t seq, std::size_t index);
bool part_exists(const std::string &dir, std::uint64_t seq, std::size_t index);
// Removes part `index` of snapshot `seq`, and the snapshot's directory if that leaves it empty
// (other processes of the node keep theirs). Failures leave files behind, nothing worse.
void remove_part(const std::string &dir, std::uint64_t seq, std::size_t index);

} // namespace rmastore::internal::durable
