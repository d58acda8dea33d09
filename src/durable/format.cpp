#include "durable/format.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "common/errors.hpp"
#include "common/slot.hpp"

namespace rmastore::internal::durable {
namespace {

constexpr char kPartMagic[8] = {'R', 'M', 'S', 'N', 'A', 'P', 'P', '1'};
constexpr char kEndMagic[8] = {'R', 'M', 'S', 'N', 'A', 'P', 'E', '1'};
constexpr char kManifestHead[] = "rmastore snapshot";
constexpr std::size_t kBuffer = std::size_t{1} << 20;

struct PartHeader {
  char magic[8];
  std::uint32_t format;
  std::uint32_t index;
  std::uint64_t seq;
  std::uint64_t reserved;
};
struct RecordHeader {
  std::uint64_t key;
  std::uint64_t length;
  std::uint64_t checksum; // of key, length and value
};
struct Trailer {
  char magic[8];
  std::uint64_t records;
  std::uint64_t chain;
  std::uint64_t checksum; // of the fields above
};
static_assert(sizeof(PartHeader) == 32 && sizeof(RecordHeader) == 24 && sizeof(Trailer) == 32);

[[noreturn]] void io_error(const std::string &what, const std::string &path, int err) {
  throw StoreError(STORE_ERR_IO, what + " " + path + ": " + std::strerror(err));
}

std::size_t padded(std::size_t n) {
  return (n + 7) & ~std::size_t{7};
}

std::uint64_t record_checksum(std::uint64_t key, const void *value, std::size_t len) {
  const std::uint64_t head[2] = {key, len};
  const std::uint64_t parts[2] = {bytes_checksum(head, sizeof head), bytes_checksum(value, len)};
  return bytes_checksum(parts, sizeof parts);
}

std::uint64_t chain_step(std::uint64_t chain, std::uint64_t record) {
  const std::uint64_t both[2] = {chain, record};
  return bytes_checksum(both, sizeof both);
}

void fsync_path(const std::string &path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) io_error("cannot open", path, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) io_error("cannot sync", path, err);
}

void write_all(int fd, const void *data, std::size_t len, const std::string &path) {
  const auto *p = static_cast<const char *>(data);
  while (len > 0) {
    const ssize_t n = ::write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) io_error("cannot write", path, errno);
    p += n;
    len -= static_cast<std::size_t>(n);
  }
}

bool read_all(int fd, void *buf, std::size_t len) {
  auto *p = static_cast<char *>(buf);
  while (len > 0) {
    const ssize_t n = ::read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<std::size_t>(n);
  }
  return true;
}

std::string manifest_body(const Manifest &m) {
  std::ostringstream o;
  o << kManifestHead << ' ' << kFormat << '\n'
    << "seq " << m.seq << '\n'
    << "name " << (m.name.empty() ? "-" : m.name) << '\n'
    << "parts " << m.parts.size() << '\n';
  for (std::size_t i = 0; i < m.parts.size(); ++i) {
    const PartSummary &p = m.parts[i];
    o << "part " << i << ' ' << p.bytes << ' ' << p.records << ' ' << p.chain << '\n';
  }
  return o.str();
}

} // namespace

bool valid_name(const std::string &name) {
  if (name.empty()) return true;
  if (name.size() > 64 || !std::isalnum(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char ch) {
    const auto u = static_cast<unsigned char>(ch);
    return std::isalnum(u) || ch == '.' || ch == '_' || ch == '-';
  });
}

std::string snapshot_path(const std::string &dir, std::uint64_t seq) {
  char name[32];
  std::snprintf(name, sizeof name, "snap-%010" PRIu64, seq);
  return dir + "/" + name;
}

std::string part_path(const std::string &dir, std::uint64_t seq, std::size_t index) {
  return snapshot_path(dir, seq) + "/part-" + std::to_string(index);
}

PartWriter::PartWriter(const std::string &dir, std::uint64_t seq, std::size_t index)
    : path_(part_path(dir, seq, index)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) io_error("cannot create", path_, errno);
  buf_.reserve(kBuffer);
  PartHeader h{};
  std::memcpy(h.magic, kPartMagic, sizeof h.magic);
  h.format = kFormat;
  h.index = static_cast<std::uint32_t>(index);
  h.seq = seq;
  write_out(&h, sizeof h);
}

PartWriter::~PartWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void PartWriter::write_out(const void *data, std::size_t len) {
  const auto *p = static_cast<const std::byte *>(data);
  summary_.bytes += len;
  while (len > 0) {
    if (buf_.size() == kBuffer) flush();
    const std::size_t n = std::min(len, kBuffer - buf_.size());
    buf_.insert(buf_.end(), p, p + n);
    p += n;
    len -= n;
  }
}

void PartWriter::flush() {
  write_all(fd_, buf_.data(), buf_.size(), path_);
  buf_.clear();
}

void PartWriter::add(std::uint64_t key, const void *value, std::size_t len) {
  const RecordHeader r{key, len, record_checksum(key, value, len)};
  write_out(&r, sizeof r);
  if (len > 0) write_out(value, len);
  static constexpr std::byte zeros[8]{};
  write_out(zeros, padded(len) - len);
  ++summary_.records;
  summary_.chain = chain_step(summary_.chain, r.checksum);
}

PartSummary PartWriter::finish() {
  Trailer t{};
  std::memcpy(t.magic, kEndMagic, sizeof t.magic);
  t.records = summary_.records;
  t.chain = summary_.chain;
  t.checksum = bytes_checksum(&t, offsetof(Trailer, checksum));
  write_out(&t, sizeof t);
  flush();
  if (::fsync(fd_) != 0) io_error("cannot sync", path_, errno);
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) io_error("cannot close", path_, errno);
  return summary_;
}

std::optional<std::vector<Record>> read_part(const std::string &dir, std::uint64_t seq, std::size_t index,
                                             const PartSummary &expected, std::string *why) {
  const std::string path = part_path(dir, seq, index);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *why = path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) != expected.bytes) {
    *why = path + ": " + std::to_string(st.st_size) + " bytes, the manifest says " + std::to_string(expected.bytes);
    return std::nullopt;
  }
  std::vector<std::byte> all(static_cast<std::size_t>(expected.bytes));
  if (expected.bytes < sizeof(PartHeader) + sizeof(Trailer) || !read_all(fd, all.data(), all.size())) {
    *why = path + ": cannot read it whole";
    return std::nullopt;
  }
  PartHeader h;
  std::memcpy(&h, all.data(), sizeof h);
  if (std::memcmp(h.magic, kPartMagic, sizeof h.magic) != 0 || h.format != kFormat || h.seq != seq ||
      h.index != index) {
    *why = path + ": not part " + std::to_string(index) + " of snapshot " + std::to_string(seq);
    return std::nullopt;
  }
  Trailer t;
  std::memcpy(&t, all.data() + all.size() - sizeof t, sizeof t);
  if (std::memcmp(t.magic, kEndMagic, sizeof t.magic) != 0 ||
      t.checksum != bytes_checksum(&t, offsetof(Trailer, checksum)) || t.records != expected.records ||
      t.chain != expected.chain) {
    *why = path + ": its trailer does not match the manifest";
    return std::nullopt;
  }
  std::vector<Record> out;
  out.reserve(static_cast<std::size_t>(t.records));
  std::size_t at = sizeof h;
  const std::size_t end = all.size() - sizeof t;
  std::uint64_t chain = 0;
  while (at < end) {
    RecordHeader r;
    if (end - at < sizeof r) break;
    std::memcpy(&r, all.data() + at, sizeof r);
    at += sizeof r;
    if (r.length > end - at || padded(static_cast<std::size_t>(r.length)) > end - at) break;
    const std::byte *v = all.data() + at;
    if (record_checksum(r.key, v, static_cast<std::size_t>(r.length)) != r.checksum) {
      *why = path + ": the value of key " + std::to_string(r.key) + " does not match its checksum";
      return std::nullopt;
    }
    out.push_back(Record{r.key, std::vector<std::byte>(v, v + r.length)});
    chain = chain_step(chain, r.checksum);
    at += padded(static_cast<std::size_t>(r.length));
  }
  if (at != end || out.size() != t.records || chain != t.chain) {
    *why = path + ": its records do not match its trailer";
    return std::nullopt;
  }
  return out;
}

void write_manifest(const std::string &dir, const Manifest &m) {
  std::string text = manifest_body(m);
  text += "end " + std::to_string(bytes_checksum(text.data(), text.size())) + "\n";
  const std::string snap = snapshot_path(dir, m.seq);
  const std::string tmp = snap + "/MANIFEST.tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) io_error("cannot create", tmp, errno);
  try {
    write_all(fd, text.data(), text.size(), tmp);
    if (::fsync(fd) != 0) io_error("cannot sync", tmp, errno);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) io_error("cannot close", tmp, errno);
  if (::rename(tmp.c_str(), (snap + "/MANIFEST").c_str()) != 0) io_error("cannot rename", tmp, errno);
  fsync_path(snap, O_RDONLY | O_DIRECTORY);
}

std::optional<Manifest> read_manifest(const std::string &dir, std::uint64_t seq, std::string *why) {
  const std::string path = snapshot_path(dir, seq) + "/MANIFEST";
  std::FILE *f = std::fopen(path.c_str(), "re");
  if (f == nullptr) {
    *why = path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  std::string text;
  char chunk[4096];
  std::size_t n;
  while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0) text.append(chunk, n);
  std::fclose(f);
  std::istringstream in(text);
  std::string word;
  std::uint64_t format = 0;
  in >> word;
  if (text.rfind(kManifestHead, 0) != 0) {
    *why = path + ": not a manifest";
    return std::nullopt;
  }
  in >> word >> format;
  if (format != kFormat) {
    throw StoreError(STORE_ERR_SNAPSHOT_FORMAT,
                     path + ": format " + std::to_string(format) + ", this library reads " + std::to_string(kFormat));
  }
  const std::size_t end = text.rfind("end ");
  Manifest m;
  std::size_t parts = 0;
  std::string w1, w2, w3;
  in >> w1 >> m.seq >> w3 >> m.name >> w2 >> parts;
  if (m.name == "-") m.name.clear();
  if (end == std::string::npos || w1 != "seq" || w3 != "name" || !valid_name(m.name) || w2 != "parts" || m.seq != seq ||
      parts > (std::size_t{1} << 24)) {
    *why = path + ": damaged";
    return std::nullopt;
  }
  m.parts.resize(parts);
  for (std::size_t i = 0; i < parts; ++i) {
    std::size_t index = 0;
    in >> word >> index >> m.parts[i].bytes >> m.parts[i].records >> m.parts[i].chain;
    if (!in || word != "part" || index != i) {
      *why = path + ": damaged";
      return std::nullopt;
    }
  }
  const std::string stated = text.substr(end + 4);
  if (std::to_string(bytes_checksum(text.data(), end)) + "\n" != stated || manifest_body(m) != text.substr(0, end)) {
    *why = path + ": its checksum does not match";
    return std::nullopt;
  }
  return m;
}

std::vector<std::uint64_t> list_snapshots(const std::string &dir) {
  DIR *d = ::opendir(dir.c_str());
  if (d == nullptr) io_error("cannot read", dir, errno);
  std::vector<std::uint64_t> out;
  while (const dirent *e = ::readdir(d)) {
    std::uint64_t seq = 0;
    char tail = 0;
    if (std::sscanf(e->d_name, "snap-%10" SCNu64 "%c", &seq, &tail) == 1 && std::strlen(e->d_name) == 15)
      out.push_back(seq);
  }
  ::closedir(d);
  std::sort(out.rbegin(), out.rend());
  return out;
}

void make_snapshot_dir(const std::string &dir, std::uint64_t seq) {
  const std::string snap = snapshot_path(dir, seq);
  if (::mkdir(snap.c_str(), 0755) != 0 && errno != EEXIST) io_error("cannot create", snap, errno);
}

void remove_manifest(const std::string &dir, std::uint64_t seq) {
  const std::string snap = snapshot_path(dir, seq);
  ::unlink((snap + "/MANIFEST").c_str());
  ::unlink((snap + "/MANIFEST.tmp").c_str());
}

void remove_snapshot(const std::string &dir, std::uint64_t seq) {
  const std::string snap = snapshot_path(dir, seq);
  remove_manifest(dir, seq);
  if (DIR *d = ::opendir(snap.c_str())) {
    std::vector<std::string> names;
    while (const dirent *e = ::readdir(d)) {
      if (std::strncmp(e->d_name, "part-", 5) == 0) names.emplace_back(e->d_name);
    }
    ::closedir(d);
    for (const std::string &n : names) ::unlink((snap + "/" + n).c_str());
  }
  ::rmdir(snap.c_str());
}

std::string expand_host(const std::string &dir) {
  if (dir.find("%h") == std::string::npos) return dir;
  // gethostname fails only for a bad buffer; a name cut at 255 bytes still names the node.
  char host[256] = {};
  (void)::gethostname(host, sizeof host - 1);
  std::string out;
  for (std::size_t i = 0; i < dir.size(); ++i) {
    if (dir.compare(i, 2, "%h") == 0) {
      out += host;
      ++i;
    } else {
      out += dir[i];
    }
  }
  return out;
}

void stage_part(const std::string &from, const std::string &to, std::uint64_t seq, std::size_t index,
                const std::atomic<bool> *stop) {
  const std::string src = part_path(from, seq, index), tmp = part_path(to, seq, index) + ".tmp";
  const int in = ::open(src.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) io_error("cannot open", src, errno);
  const int out = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) {
    const int err = errno;
    ::close(in);
    io_error("cannot create", tmp, err);
  }
  try {
    std::vector<char> buf(kBuffer);
    for (;;) {
      const ssize_t n = ::read(in, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) io_error("cannot read", src, errno);
      if (n == 0) break;
      if (stop->load()) throw StoreError(STORE_ERR_IO, tmp + ": the flush was abandoned");
      write_all(out, buf.data(), static_cast<std::size_t>(n), tmp);
    }
    if (::fsync(out) != 0) io_error("cannot sync", tmp, errno);
  } catch (...) {
    ::close(in);
    ::close(out);
    throw;
  }
  ::close(in);
  if (::close(out) != 0) io_error("cannot close", tmp, errno);
}

void publish_part(const std::string &to, std::uint64_t seq, std::size_t index) {
  const std::string final_name = part_path(to, seq, index);
  if (::rename((final_name + ".tmp").c_str(), final_name.c_str()) != 0) io_error("cannot rename", final_name, errno);
  fsync_path(snapshot_path(to, seq), O_RDONLY | O_DIRECTORY);
}

bool part_exists(const std::string &dir, std::uint64_t seq, std::size_t index) {
  struct stat st {};
  return ::stat(part_path(dir, seq, index).c_str(), &st) == 0;
}

void remove_part(const std::string &dir, std::uint64_t seq, std::size_t index) {
  ::unlink(part_path(dir, seq, index).c_str());
  ::unlink((part_path(dir, seq, index) + ".tmp").c_str());
  ::rmdir(snapshot_path(dir, seq).c_str());
}

} // namespace rmastore::internal::durable
