// A resilient LAMMPS driver: runs an unmodified LAMMPS input, checkpoints it into rmastore every
// N steps, and when processes die, goes on from the last checkpoint on the survivors, in the
// same mpirun. docs/lammps.md explains the design; the short version:
//
// - LAMMPS runs as a library on `lcomm`, a duplicate of the survivors' communicator, in chunks
//   of N steps. After each chunk every process writes LAMMPS's own multi-file restart
//   (write_restart restart.%) to a memory-backed directory and puts its file (rank 0 also the
//   base file) into the store in one transaction.
// - Every round ends in MPIX_Comm_agree on `dcomm`, the driver's communicator: every live
//   process reaches it whatever happened in its chunk, and all get the same answer. Only when
//   all agree that their parts are committed does rank 0 record the checkpoint as the current
//   one (a second transaction and a second agreement). Two generations of keys alternate, so
//   the current checkpoint is never overwritten while the next one is written.
// - LAMMPS's MPI calls ignore errors. An error handler on lcomm, inherited by every
//   communicator LAMMPS derives from it (and the derived ones are recorded, see
//   MPI_Comm_split below), revokes them all and throws out of LAMMPS, so that no survivor
//   waits inside LAMMPS for a dead peer. The LAMMPS instance is then abandoned, never closed:
//   closing it would run collectives on revoked communicators. Its memory is lost until exit.
// - After a failed round, the survivors call store_recover, read the current checkpoint's
//   parts back from the store (each process only the files LAMMPS's read_restart will have it
//   read), open a new LAMMPS instance on the new communicator, read_restart, replay the input's
//   commands that a restart file does not hold, and run on to the end of the input's run.
//
//   lammps_resilient [options] -in INPUT [-var NAME VALUE ...]
//
// Thermo lines "THERMO <step> <pe> <ke> <etotal> <press>" (17 digits) are printed after every
// chunk, so that a run that survived failures can be compared digit for digit with a
// failure-free run that restarts from the same checkpoint (--reference, compare_thermo.sh).
#define LAMMPS_LIB_MPI 1
#include <library.h>
#include <mpi.h>
// after mpi.h, on purpose
#include <mpi-ext.h>
#include <rmastore/store.h>

#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace {

// ------------------------------------------------------------------------------------------------
// Options

struct Options {
  std::string input;
  std::vector<std::string> vars; // -var NAME VALUE..., passed on to LAMMPS
  long every = 20;               // steps between checkpoints
  int replicas = 2;
  long capacity_mib = 0; // store_config_t::capacity_hint, if set
  bool localized = false;
  std::vector<std::pair<int, long>> kills; // world rank dies in the middle of this step
  bool kill_host = false;                  // victims take their host's daemon with them
  std::string workdir;                     // memory-backed directory for restart files
  bool keep = false;                       // keep each checkpoint's files (for --reference)
  std::string reference;                   // reference mode: read_restart this file, no store
  long stale_piece = 0;                    // negative control: rank 1's part of this checkpoint is not stored
  std::string baseline;                    // benchmark: "disk" or "shm" instead of the store
};

const char kUsage[] = "usage: lammps_resilient [--every N] [--replicas R] [--capacity-mib M] [--localized] [--kill "
                      "RANK@STEP[,...]] [--kill-host]\n"
                      "                        [--workdir DIR] [--keep] [--reference RESTART] [--stale-piece K]\n"
                      "                        [--baseline disk|shm] -in INPUT [-var NAME VALUE ...]\n";

[[noreturn]] void usage_error(int rank, const std::string &what) {
  if (rank == 0) std::fprintf(stderr, "lammps_resilient: %s\n%s", what.c_str(), kUsage);
  MPI_Finalize();
  std::exit(2);
}

long to_long(int rank, const char *text, const char *what) {
  char *end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < 0) usage_error(rank, std::string("bad ") + what + ": " + text);
  return v;
}

Options parse(int argc, char **argv, int rank) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char *what) -> const char * {
      if (i + 1 >= argc) usage_error(rank, std::string(what) + " needs a value");
      return argv[++i];
    };
    if (a == "--help") {
      if (rank == 0) std::fputs(kUsage, stdout);
      MPI_Finalize();
      std::exit(0);
    } else if (a == "-in") {
      o.input = value("-in");
    } else if (a == "-var") {
      o.vars.push_back("-var");
      o.vars.push_back(value("-var"));
      while (i + 1 < argc && argv[i + 1][0] != '-') o.vars.push_back(argv[++i]);
    } else if (a == "--every") {
      o.every = to_long(rank, value("--every"), "--every");
      if (o.every < 1) usage_error(rank, "--every must be at least 1");
    } else if (a == "--replicas") {
      o.replicas = static_cast<int>(to_long(rank, value("--replicas"), "--replicas"));
    } else if (a == "--capacity-mib") {
      o.capacity_mib = to_long(rank, value("--capacity-mib"), "--capacity-mib");
    } else if (a == "--localized") {
      o.localized = true;
    } else if (a == "--kill") {
      std::stringstream list(value("--kill"));
      for (std::string item; std::getline(list, item, ',');) {
        const auto at = item.find('@');
        if (at == std::string::npos) usage_error(rank, "--kill takes RANK@STEP, not " + item);
        o.kills.emplace_back(static_cast<int>(to_long(rank, item.substr(0, at).c_str(), "rank")),
                             to_long(rank, item.substr(at + 1).c_str(), "step"));
      }
    } else if (a == "--kill-host") {
      o.kill_host = true;
    } else if (a == "--workdir") {
      o.workdir = value("--workdir");
    } else if (a == "--keep") {
      o.keep = true;
    } else if (a == "--reference") {
      o.reference = value("--reference");
    } else if (a == "--stale-piece") {
      o.stale_piece = to_long(rank, value("--stale-piece"), "--stale-piece");
    } else if (a == "--baseline") {
      o.baseline = value("--baseline");
      if (o.baseline != "disk" && o.baseline != "shm") usage_error(rank, "--baseline is disk or shm");
    } else {
      usage_error(rank, "unknown argument " + a);
    }
  }
  if (o.input.empty()) usage_error(rank, "-in INPUT is required");
  return o;
}

// ------------------------------------------------------------------------------------------------
// The input: its commands, split at the one `run`

struct Input {
  std::vector<std::string> before; // commands before the run
  long run_steps = 0;
  std::vector<std::string> after; // commands after it
};

std::string first_word(const std::string &cmd) {
  std::istringstream in(cmd);
  std::string w;
  in >> w;
  return w;
}

// LAMMPS's own syntax, as far as the driver must understand it: '#' starts a comment outside
// quotes, '&' at the end of a line continues it.
Input read_input(const std::string &path, int rank) {
  std::ifstream f(path);
  if (!f) usage_error(rank, "cannot read " + path);
  Input in;
  bool seen_run = false;
  std::string line, cmd;
  while (std::getline(f, line)) {
    // The quote that is open, if any: an apostrophe inside "..." opens nothing.
    char quote = 0;
    for (std::size_t i = 0; i < line.size(); ++i) {
      if (quote != 0) {
        if (line[i] == quote) quote = 0;
      } else if (line[i] == '"' || line[i] == '\'') {
        quote = line[i];
      } else if (line[i] == '#') {
        line.resize(i);
        break;
      }
    }
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (!line.empty() && line.back() == '&') {
      line.pop_back();
      cmd += line + " ";
      continue;
    }
    cmd += line;
    const std::string word = first_word(cmd);
    if (word.empty()) {
      cmd.clear();
      continue;
    }
    if (word == "run") {
      if (seen_run) usage_error(rank, "the input has more than one run command: the driver supports one");
      std::istringstream args(cmd);
      std::string w, n, extra;
      args >> w >> n;
      if (args >> extra) usage_error(rank, "the driver supports a plain 'run N', not: " + cmd);
      in.run_steps = to_long(rank, n.c_str(), "run length");
      seen_run = true;
    } else if (word == "include" || word == "jump" || word == "label" || word == "next" || word == "rerun") {
      usage_error(rank, "the driver does not support '" + word + "' in the input");
    } else {
      (seen_run ? in.after : in.before).push_back(cmd);
    }
    cmd.clear();
  }
  if (!seen_run) usage_error(rank, "the input has no run command");
  return in;
}

// What a restart file already holds (the system, its force field, groups, the timestep) or
// what would change it (new velocities): these commands of the input are not replayed after a
// read_restart. Everything else is (fixes, computes, kspace, neighbor and thermo settings, ...);
// fixes that keep state in the restart file get it back when they are defined again.
bool replayed_after_restart(const std::string &cmd) {
  static const char *const skip[] = {
      "units",          "atom_style",    "atom_modify", "dimension",      "boundary",       "newton",
      "processors",     "region",        "create_box",  "create_atoms",   "read_data",      "read_restart",
      "read_dump",      "replicate",     "velocity",    "displace_atoms", "delete_atoms",   "set",
      "create_bonds",   "mass",          "pair_style",  "pair_coeff",     "pair_modify",    "bond_style",
      "bond_coeff",     "angle_style",   "angle_coeff", "dihedral_style", "dihedral_coeff", "improper_style",
      "improper_coeff", "special_bonds", "timestep",    "reset_timestep", "group",          "lattice"};
  const std::string w = first_word(cmd);
  return std::none_of(std::begin(skip), std::end(skip), [&](const char *s) { return w == s; });
}

// ------------------------------------------------------------------------------------------------
// Failures inside LAMMPS

struct PeerFailure {
  int mpi_error;
};

// The communicators of the current LAMMPS instance: lcomm and every one derived from it.
std::mutex g_comms_mutex;
std::vector<MPI_Comm> g_lammps_comms;
bool g_recording = false; // until the instance is abandoned

void revoke_lammps_comms() {
  std::lock_guard<std::mutex> lock(g_comms_mutex);
  for (MPI_Comm c : g_lammps_comms) MPIX_Comm_revoke(c);
}

// Every MPI error on a LAMMPS communicator: revoke them all (peers blocked in LAMMPS then fail
// too, instead of waiting for a process that left), and leave LAMMPS. Not while an exception
// is already unwinding (a destructor's MPI call): then LAMMPS gets the error code.
void lammps_comm_error(MPI_Comm *comm, int *code, ...) {
  MPIX_Comm_revoke(*comm);
  revoke_lammps_comms();
  if (std::uncaught_exceptions() == 0) throw PeerFailure{*code};
}

MPI_Errhandler g_throwing = MPI_ERRHANDLER_NULL;

// Records `child` if it was made from a communicator of the current LAMMPS instance (the store
// makes communicators too, through the same functions).
void record(MPI_Comm parent, MPI_Comm child) {
  if (child == MPI_COMM_NULL) return;
  std::lock_guard<std::mutex> lock(g_comms_mutex);
  if (g_recording && std::find(g_lammps_comms.begin(), g_lammps_comms.end(), parent) != g_lammps_comms.end()) {
    g_lammps_comms.push_back(child);
  }
}

} // namespace

// The communicators LAMMPS makes from its own inherit the throwing error handler; they are
// recorded here (these definitions take the place of the MPI library's for liblammps) so that
// the first error revokes them all, also those a peer may be blocked on.
extern "C" {
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *out) {
  const int rc = PMPI_Comm_dup(comm, out);
  if (rc == MPI_SUCCESS) record(comm, *out);
  return rc;
}
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *out) {
  const int rc = PMPI_Comm_split(comm, color, key, out);
  if (rc == MPI_SUCCESS) record(comm, *out);
  return rc;
}
int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *out) {
  const int rc = PMPI_Comm_split_type(comm, type, key, info, out);
  if (rc == MPI_SUCCESS) record(comm, *out);
  return rc;
}
int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *out) {
  const int rc = PMPI_Comm_create(comm, group, out);
  if (rc == MPI_SUCCESS) record(comm, *out);
  return rc;
}
int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder, MPI_Comm *out) {
  const int rc = PMPI_Cart_create(comm, ndims, dims, periods, reorder, out);
  if (rc == MPI_SUCCESS) record(comm, *out);
  return rc;
}
int MPI_Cart_sub(MPI_Comm comm, const int remain[], MPI_Comm *out) {
  const int rc = PMPI_Cart_sub(comm, remain, out);
  if (rc == MPI_SUCCESS) record(comm, *out);
  return rc;
}
int MPI_Comm_free(MPI_Comm *comm) {
  {
    std::lock_guard<std::mutex> lock(g_comms_mutex);
    g_lammps_comms.erase(std::remove(g_lammps_comms.begin(), g_lammps_comms.end(), *comm), g_lammps_comms.end());
  }
  return PMPI_Comm_free(comm);
}
}

namespace {

// ------------------------------------------------------------------------------------------------
// Kills at a step, from inside LAMMPS's timestep

struct Killer {
  long step = -1;
  bool host = false;
  std::string stamp; // the file the victim leaves its time of death in (the benchmark reads it)
};
Killer g_killer;

// Seconds since the epoch: comparable between processes of one machine (the benchmark's
// "from the kill to the first new timestep").
double wall_clock() {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// fix external's callback, every step after the forces: adds no force (the fix is in every run
// of the driver, the reference too); kills this process at its step.
void on_step(void *, int64_t step, int nlocal, int *, double **, double **fext) {
  for (int i = 0; i < nlocal; ++i) fext[i][0] = fext[i][1] = fext[i][2] = 0.0;
  if (step != g_killer.step) return;
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const double at = wall_clock();
  // A file, not only the output: the last line of a process killed right after may not be
  // forwarded by the launcher.
  if (FILE *f = std::fopen(g_killer.stamp.c_str(), "w")) {
    std::fprintf(f, "%.6f\n", at);
    std::fclose(f);
  }
  std::fprintf(stderr, "[lammps_resilient] rank %d dies at step %lld%s (KILLED at %.6f)\n", rank,
               static_cast<long long>(step), g_killer.host ? " with its host" : "", at);
  std::fflush(stderr);
  if (g_killer.host) kill(getppid(), SIGKILL); // the host's Open MPI daemon: the whole host goes
  raise(SIGKILL);
}

// ------------------------------------------------------------------------------------------------
// Files

// The whole file into `bytes`, after `reserve` bytes left for the caller. The buffer is reused
// from one checkpoint to the next: a fresh one of many MiB costs a page fault per page.
bool read_file(const std::string &path, std::size_t reserve, std::string &bytes) {
  const int fd = open(path.c_str(), O_RDONLY);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0) close(fd);
    return false;
  }
  bytes.resize(reserve + static_cast<std::size_t>(st.st_size));
  std::size_t done = reserve;
  while (done < bytes.size()) {
    const ssize_t n = read(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  close(fd);
  return done == bytes.size() && done > reserve;
}

bool write_file(const std::string &path, const char *bytes, std::size_t n) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return false;
  std::size_t done = 0;
  while (done < n) {
    const ssize_t w = write(fd, bytes + done, n - done);
    if (w <= 0) {
      close(fd);
      return false;
    }
    done += static_cast<std::size_t>(w);
  }
  return close(fd) == 0;
}

void make_dir(const std::string &path) {
  std::string partial;
  std::stringstream parts(path);
  for (std::string p; std::getline(parts, p, '/');) {
    partial += p + "/";
    mkdir(partial.c_str(), 0755);
  }
}

// rm -rf, ignoring what another process removed first.
void remove_tree(const std::string &path) {
  nftw(
      path.c_str(), [](const char *p, const struct stat *, int, FTW *) { return remove(p), 0; }, 16,
      FTW_DEPTH | FTW_PHYS);
}

std::string piece_name(const std::string &pattern, int i) {
  std::string s = pattern;
  s.replace(s.find('%'), 1, i < 0 ? std::string("base") : std::to_string(i));
  return s;
}

// ------------------------------------------------------------------------------------------------
// Keys and checkpoint records

// A part of checkpoint generation g: the base file (index -1) or process i's file.
store_key_t part_key(int gen, int i) {
  return (store_key_t{1} << 56) | (static_cast<store_key_t>(gen) << 48) | static_cast<store_key_t>(i + 1);
}
constexpr store_key_t kCurrentKey = store_key_t{2} << 56;

// Each part starts with this header: a part of another checkpoint is never taken for this one.
// (The store checksums every value itself and never returns a torn one.)
struct PartHeader {
  std::uint64_t checkpoint;
  std::uint64_t bytes;
};

// The current checkpoint: the last one every process committed its part of.
struct Current {
  std::uint64_t checkpoint; // 1, 2, ...; its parts are in generation checkpoint % 2
  std::int64_t step;
  std::int64_t files; // processes that wrote it
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class Driver {
public:
  Driver(const Options &o, Input in, int world_rank) : o_(o), in_(std::move(in)), world_rank_(world_rank) {}

  int run();

private:
  bool open_lammps(MPI_Comm comm);
  void command(const std::string &cmd);
  void add_killer_fix();
  long step() const { return static_cast<long>(*static_cast<int64_t *>(lammps_extract_global(lmp_, "ntimestep"))); }
  void print_thermo();
  bool run_chunk();
  bool checkpoint_parts(std::uint64_t k);
  bool record_current(std::uint64_t k);
  bool agree(bool ok);
  void recover();
  enum class Fetched { kOk, kFailed, kCorrupt };
  Fetched fetch_files();
  bool start_from_files();
  void start_from_input();
  void abandon_lammps();
  void close_lammps();
  void fatal(const std::string &what);

  const Options &o_;
  const Input in_;
  const int world_rank_;
  store_t store_ = nullptr;
  MPI_Comm dcomm_ = MPI_COMM_NULL; // the driver's: agreements
  MPI_Comm lcomm_ = MPI_COMM_NULL; // LAMMPS's
  int rank_ = 0, size_ = 0;
  void *lmp_ = nullptr;
  long target_ = 0;              // the step the input's run ends at
  std::uint64_t checkpoint_ = 0; // the last checkpoint made or restored
  Current current_{};            // the checkpoint being restored
  std::string restore_pattern_;
  std::vector<std::string> restore_files_;
  int recoveries_ = 0;
  double ckpt_seconds_ = 0;
  double write_seconds_ = 0;    // write_restart's part of the last checkpoint
  std::size_t ckpt_bytes_ = 0;  // this process's files in the last checkpoint
  std::string part_buffers_[2]; // its own part, and (rank 0) the base file
  int ckpt_count_ = 0;
};

void Driver::fatal(const std::string &what) {
  std::fprintf(stderr, "lammps_resilient: rank %d: %s\n", world_rank_, what.c_str());
  std::fflush(stderr);
  // MPI_Abort after a process failure did not always return: leave at once.
  _exit(1);
}

// False if a failure got in the way (then call it again after the next recovery).
bool Driver::open_lammps(MPI_Comm comm) {
  if (MPI_Comm_dup(comm, &lcomm_) != MPI_SUCCESS) return false;
  {
    std::lock_guard<std::mutex> lock(g_comms_mutex);
    g_lammps_comms.assign(1, lcomm_);
    g_recording = true;
  }
  MPI_Comm_set_errhandler(lcomm_, g_throwing);
  std::vector<std::string> args = {"lammps_resilient", "-nocite", "-log", "none", "-echo", "none"};
  args.insert(args.end(), o_.vars.begin(), o_.vars.end());
  std::vector<char *> argv;
  for (std::string &a : args) argv.push_back(a.data());
  lmp_ = lammps_open(static_cast<int>(argv.size()), argv.data(), lcomm_, nullptr);
  if (lmp_ == nullptr) fatal("lammps_open failed");
  return true;
}

void Driver::command(const std::string &cmd) {
  lammps_command(lmp_, cmd.c_str());
  if (lammps_has_error(lmp_) != 0) {
    char msg[1024] = "";
    lammps_get_last_error_message(lmp_, msg, sizeof msg);
    fatal("LAMMPS: " + cmd + ": " + msg);
  }
}

void Driver::print_thermo() {
  if (rank_ != 0) return;
  std::printf("THERMO %ld %.17g %.17g %.17g %.17g\n", step(), lammps_get_thermo(lmp_, "pe"),
              lammps_get_thermo(lmp_, "ke"), lammps_get_thermo(lmp_, "etotal"), lammps_get_thermo(lmp_, "press"));
  std::fflush(stdout);
}

// The commands every run of the driver adds: the fix whose callback kills at a step.
void Driver::add_killer_fix() {
  command("fix rmastore_kill all external pf/callback 1 1");
  lammps_set_fix_external_callback(lmp_, "rmastore_kill", on_step, nullptr);
}

void Driver::start_from_input() {
  for (const std::string &c : in_.before) command(c);
  add_killer_fix();
  target_ = step() + in_.run_steps;
}

// Runs to the next multiple of `every` (or the end). False if a failure left LAMMPS.
bool Driver::run_chunk() {
  const long s = step();
  const long n = std::min(target_ - s, o_.every - s % o_.every);
  try {
    command("run " + std::to_string(n) + " pre yes post no");
  } catch (const PeerFailure &e) {
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(e.mpi_error, text, &len);
    std::fprintf(stderr, "[lammps_resilient] rank %d: left LAMMPS at step %ld: %s\n", world_rank_, s, text);
    std::fflush(stderr);
    return false;
  }
  print_thermo();
  return true;
}

bool Driver::agree(bool ok) {
  int flag = ok ? 1 : 0;
  const int rc = MPIX_Comm_agree(dcomm_, &flag);
  return rc == MPI_SUCCESS && flag == 1;
}

// write_restart, then this process's file (rank 0: also the base file) into the store in one
// transaction. The files are removed unless --keep.
bool Driver::checkpoint_parts(std::uint64_t k) {
  const std::string dir = o_.workdir + "/ckpt-" + std::to_string(k);
  make_dir(dir);
  const std::string pattern = dir + "/restart.%";
  const double t0 = now();
  try {
    command("write_restart " + pattern);
  } catch (const PeerFailure &) {
    return false;
  }
  write_seconds_ = now() - t0;
  ckpt_bytes_ = 0;
  std::vector<int> files = {rank_};
  if (rank_ == 0) files.push_back(-1);
  if (!o_.baseline.empty()) {
    for (int i : files) {
      const std::string name = piece_name(pattern, i);
      // On disk, durable as a restart file should be: fsync each file this process wrote.
      const int fd = open(name.c_str(), O_RDONLY);
      struct stat st {};
      if (fd < 0 || (o_.baseline == "disk" && fsync(fd) != 0) || fstat(fd, &st) != 0) fatal("fsync " + name);
      close(fd);
      ckpt_bytes_ += static_cast<std::size_t>(st.st_size);
      // Two checkpoints are kept, as an application would keep them.
      const std::string older = o_.workdir + "/ckpt-" + std::to_string(k - 2);
      unlink(piece_name(older + "/restart.%", i).c_str());
      rmdir(older.c_str());
    }
    return true;
  }
  const int gen = static_cast<int>(k % 2);
  bool ok = store_tx_begin(store_) == STORE_OK;
  for (int i : files) {
    const std::string name = piece_name(pattern, i);
    std::string &bytes = part_buffers_[i < 0 ? 1 : 0];
    if (!read_file(name, sizeof(PartHeader), bytes)) fatal("cannot read " + name);
    const std::size_t body = bytes.size() - sizeof(PartHeader);
    ckpt_bytes_ += body;
    if (!o_.keep) unlink(name.c_str());
    if (static_cast<long>(k) == o_.stale_piece && i == 1) continue; // the negative control
    const PartHeader h{k, body};
    std::memcpy(bytes.data(), &h, sizeof h);
    ok = ok && store_put(store_, part_key(gen, i), bytes.data(), bytes.size()) == STORE_OK;
  }
  if (!o_.keep) rmdir(dir.c_str());
  const store_status_t st = ok ? store_tx_commit(store_) : store_tx_abort(store_);
  return ok && st == STORE_OK;
}

bool Driver::record_current(std::uint64_t k) {
  if (!o_.baseline.empty() || rank_ != 0) return true;
  const Current c{k, step(), size_};
  return store_tx_begin(store_) == STORE_OK && store_put(store_, kCurrentKey, &c, sizeof c) == STORE_OK &&
         store_tx_commit(store_) == STORE_OK;
}

// The instance is abandoned, not closed: closing it would run LAMMPS's collectives on revoked
// communicators. Its memory stays allocated until the process ends.
void Driver::abandon_lammps() {
  {
    std::lock_guard<std::mutex> lock(g_comms_mutex);
    g_recording = false;
  }
  revoke_lammps_comms();
  lmp_ = nullptr;
}

// At the end, on every process: collective.
void Driver::close_lammps() {
  try {
    lammps_close(lmp_);
  } catch (const PeerFailure &) {
    fatal("a failure while LAMMPS was closed at the end");
  }
  lmp_ = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_comms_mutex);
    g_recording = false;
    g_lammps_comms.clear();
  }
  PMPI_Comm_free(&lcomm_);
}

// store_recover, then the restore; again (both) while further processes fail. Each phase ends
// in an agreement that every survivor reaches, so that none waits in a collective that another
// has left.
void Driver::recover() {
  ++recoveries_;
  const double t0 = now();
  abandon_lammps();
  store_recovery_t report;
  store_recovery_init(&report);
  int failed = 0;
  for (bool done = false; !done;) {
    MPI_Comm comm = MPI_COMM_NULL;
    store_status_t st = STORE_ERR_RECOVER_AGAIN;
    while (st == STORE_ERR_RECOVER_AGAIN) st = store_recover(store_, &comm);
    if (st != STORE_OK) fatal(std::string("store_recover: ") + store_strerror(st));
    PMPI_Comm_free(&dcomm_);
    dcomm_ = comm;
    MPI_Comm_rank(dcomm_, &rank_);
    MPI_Comm_size(dcomm_, &size_);
    store_last_recovery(store_, &report);
    failed += report.failed;
    if (report.lost_count != 0) fatal("the store lost " + std::to_string(report.lost_count) + " keys");
    const Fetched f = fetch_files();
    // Bit 0: fetched; bit 1: the checkpoint is whole. All see the same.
    int flag = (f == Fetched::kOk ? 1 : 0) | (f != Fetched::kCorrupt ? 2 : 0);
    const int rc = MPIX_Comm_agree(dcomm_, &flag);
    if ((flag & 2) == 0) {
      if (!o_.keep) remove_tree(o_.workdir);
      fatal("the current checkpoint is inconsistent: no process goes on from it");
    }
    if (rc != MPI_SUCCESS || flag != 3) continue;
    done = agree(start_from_files());
    if (!done) abandon_lammps();
  }
  if (rank_ == 0) {
    std::printf("RECOVERY %d: %d survivors, %d failed; restored checkpoint %llu (step %ld) in %.3f s "
                "(RESUMED at %.6f)\n",
                recoveries_, size_, failed, static_cast<unsigned long long>(checkpoint_), step(), now() - t0,
                wall_clock());
    std::fflush(stdout);
  }
}

// The current checkpoint's files that LAMMPS's read_restart will have this process read (with
// fewer processes than files, process r reads files r, r + size, ...; rank 0 also the base
// file), written back from the store. Local: no collective.
Driver::Fetched Driver::fetch_files() {
  restore_files_.clear();
  std::size_t len = 0;
  const store_status_t st = store_get(store_, kCurrentKey, &current_, sizeof current_, &len);
  if (st == STORE_ERR_NOT_FOUND) {
    current_ = Current{0, 0, 0}; // no checkpoint was complete: from the start
    return Fetched::kOk;
  }
  if (st == STORE_ERR_PROC_FAILED) return Fetched::kFailed;
  if (st != STORE_OK || len != sizeof current_) {
    fatal(std::string("reading the current checkpoint: ") + store_strerror(st));
  }
  if (current_.files < size_) fatal("restart on more processes than wrote the checkpoint is not supported");
  const int gen = static_cast<int>(current_.checkpoint % 2);
  const std::string dir = o_.workdir + "/restore-" + std::to_string(recoveries_);
  make_dir(dir);
  restore_pattern_ = dir + "/restart.%";
  std::vector<int> mine;
  if (rank_ == 0) mine.push_back(-1);
  for (int i = rank_; i < current_.files; i += size_) mine.push_back(i);
  for (int i : mine) {
    std::string bytes;
    std::size_t n = 0;
    store_status_t g = store_get(store_, part_key(gen, i), nullptr, 0, &n);
    if (g == STORE_ERR_TRUNCATED || g == STORE_OK) {
      bytes.resize(n);
      g = store_get(store_, part_key(gen, i), bytes.data(), bytes.size(), &n);
    }
    if (g == STORE_ERR_PROC_FAILED) return Fetched::kFailed;
    PartHeader h{};
    if (g == STORE_OK && n >= sizeof h) std::memcpy(&h, bytes.data(), sizeof h);
    if (g != STORE_OK || h.checkpoint != current_.checkpoint || h.bytes != n - sizeof h) {
      const std::string why = g != STORE_OK                         ? store_strerror(g)
                              : h.checkpoint != current_.checkpoint ? "holds checkpoint " + std::to_string(h.checkpoint)
                                                                    : "has the wrong length";
      std::fprintf(stderr, "lammps_resilient: rank %d: checkpoint %llu is inconsistent: part %d %s\n", world_rank_,
                   static_cast<unsigned long long>(current_.checkpoint), i, why.c_str());
      std::fflush(stderr);
      return Fetched::kCorrupt;
    }
    const std::string name = piece_name(restore_pattern_, i);
    if (!write_file(name, bytes.data() + sizeof h, n - sizeof h)) fatal("cannot write " + name);
    restore_files_.push_back(name);
  }
  return Fetched::kOk;
}

// A new LAMMPS instance on the survivors, from the files (or from the input, if no checkpoint
// was complete). False if a failure left LAMMPS.
bool Driver::start_from_files() {
  try {
    // lammps_open runs collectives too: a failure there throws like any other.
    if (!open_lammps(dcomm_)) return false;
    if (current_.checkpoint == 0) {
      start_from_input();
    } else {
      command("read_restart " + restore_pattern_);
      for (const std::string &cmd : in_.before) {
        if (replayed_after_restart(cmd)) command(cmd);
      }
      add_killer_fix();
    }
  } catch (const PeerFailure &) {
    return false;
  }
  for (const std::string &name : restore_files_) unlink(name.c_str());
  if (!restore_files_.empty()) rmdir(restore_pattern_.substr(0, restore_pattern_.rfind('/')).c_str());
  checkpoint_ = current_.checkpoint;
  if (current_.checkpoint != 0 && step() != current_.step) fatal("read_restart gave step " + std::to_string(step()));
  return true;
}

int Driver::run() {
  if (!o_.reference.empty()) {
    // A failure-free run from LAMMPS's own restart files: the reference a recovered run is
    // compared with.
    MPI_Comm_dup(MPI_COMM_WORLD, &dcomm_);
    MPI_Comm_rank(dcomm_, &rank_);
    MPI_Comm_size(dcomm_, &size_);
    if (!open_lammps(dcomm_)) fatal("MPI_Comm_dup for LAMMPS");
    // The input's run is taken to start at step 0.
    command("read_restart " + o_.reference);
    for (const std::string &cmd : in_.before) {
      if (replayed_after_restart(cmd)) command(cmd);
    }
    add_killer_fix();
    target_ = in_.run_steps;
    if (rank_ == 0) {
      std::printf("REFERENCE from step %ld (RESUMED at %.6f)\n", step(), wall_clock());
      std::fflush(stdout);
    }
    while (step() < target_) {
      if (!run_chunk()) fatal("a failure in the reference run");
    }
    close_lammps();
    return 0;
  }

  store_config_t cfg;
  store_config_init(&cfg);
  cfg.replicas = o_.replicas;
  if (o_.capacity_mib > 0) cfg.capacity_hint = static_cast<std::size_t>(o_.capacity_mib) << 20;
  cfg.recovery = o_.localized ? STORE_RECOVERY_LOCALIZED : STORE_RECOVERY_GLOBAL;
  if (o_.baseline.empty() && store_init(MPI_COMM_WORLD, &cfg, &store_) != STORE_OK) fatal("store_init");
  MPI_Comm_dup(MPI_COMM_WORLD, &dcomm_);
  MPI_Comm_set_errhandler(dcomm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(dcomm_, &rank_);
  MPI_Comm_size(dcomm_, &size_);
  for (const auto &[victim, at] : o_.kills) {
    if (victim == world_rank_) g_killer = Killer{at, o_.kill_host, o_.workdir + "/killed-at." + std::to_string(victim)};
  }
  const double t_start = now();
  if (!open_lammps(dcomm_)) fatal("MPI_Comm_dup for LAMMPS");
  start_from_input();
  // Each round: a chunk, then this process's part of a checkpoint, then one agreement that
  // every live process reaches, whatever happened in its round.
  while (true) {
    bool ok = run_chunk();
    const bool last = ok && step() >= target_;
    const std::uint64_t k = checkpoint_ + 1;
    const double t0 = now();
    if (ok && !last) ok = checkpoint_parts(k);
    const double t1 = now();
    // Rank 0 records checkpoint k as the current one only once every part of it is committed;
    // the second agreement tells everyone that it did.
    bool good = agree(ok);
    if (good && !last) good = agree(record_current(k));
    if (good && last) break;
    if (good) {
      checkpoint_ = k;
      const double seconds = now() - t0;
      ckpt_seconds_ += seconds;
      ++ckpt_count_;
      if (rank_ == 0) {
        std::printf("CKPT %llu step %ld: %.3f ms (write_restart %.3f ms, store %.3f ms, agreements %.3f ms), %zu "
                    "bytes on rank 0\n",
                    static_cast<unsigned long long>(k), step(), 1e3 * seconds, 1e3 * write_seconds_,
                    1e3 * (t1 - t0 - write_seconds_), 1e3 * (now() - t1), ckpt_bytes_);
        std::fflush(stdout);
      }
      continue;
    }
    if (o_.baseline.empty()) {
      recover();
    } else {
      fatal("a failure in a baseline run");
    }
  }
  if (rank_ == 0) {
    std::printf("DONE step %ld on %d processes: %d recoveries, %d checkpoints (%.2f ms each on average), %.3f s\n",
                step(), size_, recoveries_, ckpt_count_, ckpt_count_ ? 1e3 * ckpt_seconds_ / ckpt_count_ : 0.0,
                now() - t_start);
    std::fflush(stdout);
  }
  close_lammps();
  // What is left in the directory (the files of processes that died): every survivor removes
  // what it sees, so that node-local directories are emptied too.
  if (!o_.keep) remove_tree(o_.workdir);
  if (store_ != nullptr && store_finalize(&store_) != STORE_OK) fatal("store_finalize");
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Options o = parse(argc, argv, rank);
  if (provided < MPI_THREAD_MULTIPLE) usage_error(rank, "MPI does not provide MPI_THREAD_MULTIPLE");
  MPI_Comm_create_errhandler(lammps_comm_error, &g_throwing);
  if (o.workdir.empty()) {
    // One directory for the job, named by rank 0.
    long id = static_cast<long>(getpid());
    MPI_Bcast(&id, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    o.workdir = "/dev/shm/rmastore-lammps-" + std::to_string(id);
  }
  const Input in = read_input(o.input, rank);
  Driver d(o, in, rank);
  const int code = d.run();
  MPI_Finalize();
  return code;
}
