#include "transport/doorbell.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <string>

#include "common/errors.hpp"

namespace rmastore::internal {
namespace {

long futex(std::atomic<std::uint32_t> *addr, int op, std::uint32_t val, const timespec *timeout) {
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  return syscall(SYS_futex, reinterpret_cast<std::uint32_t *>(addr), op, val, timeout, nullptr, 0);
}

} // namespace

Doorbells::Doorbells(MPI_Comm comm) {
  int rank = 0, size = 0;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  bells_.assign(static_cast<std::size_t>(size), nullptr);

  MPI_Comm node;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  int nrank = 0, nsize = 0;
  int rc = MPI_Comm_rank(node, &nrank);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_size(node, &nsize);
  std::vector<int> ranks(static_cast<std::size_t>(nsize));
  if (rc == MPI_SUCCESS) rc = MPI_Allgather(&rank, 1, MPI_INT, ranks.data(), 1, MPI_INT, node);
  // The node leader creates one segment with a bell per local process; the others map it.
  char name[64] = {};
  if (rc == MPI_SUCCESS && nrank == 0) {
    std::random_device rd;
    std::snprintf(name, sizeof name, "/rmastore-bells-%d-%08x%08x", static_cast<int>(getpid()), rd(), rd());
  }
  if (rc == MPI_SUCCESS) rc = MPI_Bcast(name, sizeof name, MPI_CHAR, 0, node);
  segment_bytes_ = sizeof(Bell) * static_cast<std::size_t>(nsize);
  int fd = -1;
  if (rc == MPI_SUCCESS && nrank == 0) {
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0 && ftruncate(fd, static_cast<off_t>(segment_bytes_)) != 0) {
      close(fd);
      shm_unlink(name);
      fd = -1;
    }
    if (fd >= 0) close(fd);
  }
  int created = fd >= 0 ? 1 : 0;
  if (rc == MPI_SUCCESS) rc = MPI_Bcast(&created, 1, MPI_INT, 0, node);
  int mapped = 0;
  if (rc == MPI_SUCCESS && created) {
    fd = shm_open(name, O_RDWR, 0600);
    if (fd >= 0) {
      void *p = mmap(nullptr, segment_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      close(fd);
      if (p != MAP_FAILED) {
        segment_ = p;
        mapped = 1;
      }
    }
  }
  int all_mapped = 0;
  if (rc == MPI_SUCCESS) rc = MPI_Allreduce(&mapped, &all_mapped, 1, MPI_INT, MPI_MIN, node);
  if (created && nrank == 0) shm_unlink(name); // the mappings keep it alive
  const int free_rc = MPI_Comm_free(&node);
  check_mpi(rc, "doorbell set-up");
  check_mpi(free_rc, "MPI_Comm_free");
  if (!all_mapped) {
    if (segment_ != nullptr) munmap(segment_, segment_bytes_);
    segment_ = nullptr;
    return; // no bells: helpers fall back to timed sleeps
  }
  auto *bells = static_cast<Bell *>(segment_);
  for (int i = 0; i < nsize; ++i) bells_[static_cast<std::size_t>(ranks[static_cast<std::size_t>(i)])] = &bells[i];
  mine_ = &bells[nrank];
}

Doorbells::~Doorbells() {
  if (segment_ != nullptr) munmap(segment_, segment_bytes_);
}

void Doorbells::wait(std::uint32_t ticket, std::int64_t timeout_ns) {
  const timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000), static_cast<long>(timeout_ns % 1'000'000'000)};
  if (mine_ == nullptr) {
    nanosleep(&ts, nullptr);
    return;
  }
  mine_->sleeping.store(1, std::memory_order_seq_cst);
  // The kernel compares seq with the ticket atomically: a ring since the ticket returns at once.
  futex(&mine_->seq, FUTEX_WAIT, ticket, &ts);
  mine_->sleeping.store(0, std::memory_order_relaxed);
}

bool Doorbells::ring(int rank) {
  Bell *b = bells_[static_cast<std::size_t>(rank)];
  if (b == nullptr) return false;
  // Always move seq, so a helper about to sleep notices; the system call only if it sleeps.
  b->seq.fetch_add(1, std::memory_order_seq_cst);
  if (b->sleeping.load(std::memory_order_seq_cst) != 0) futex(&b->seq, FUTEX_WAKE, 1, nullptr);
  return true;
}

} // namespace rmastore::internal
