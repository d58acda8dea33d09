// Doorbells: lets a process wake the sleeping helper thread of another process on the same node.
//
// Open MPI emulates RMA between processes of one node with active messages that the target
// must handle in its progress engine, and only the helper thread can do that while the
// application thread computes. A helper that spins shares a core with that computation and gets
// it only once per scheduler time slice (milliseconds); a helper that sleeps and is woken
// preempts it within microseconds. So the helper sleeps on a futex in node-shared memory, and a
// process whose put or request has not completed after a short spin rings the target's bell.
// No MPI message is involved. Processes on other nodes have no bell: their puts wait for the
// helper's periodic wake-up, which on a real network with RDMA hardware is not needed at all.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <vector>

namespace rmastore::internal {

class Doorbells {
public:
  // Collective over comm. Without node-shared memory, every bell is absent and wait() sleeps.
  explicit Doorbells(MPI_Comm comm);
  ~Doorbells();
  Doorbells(const Doorbells &) = delete;
  Doorbells &operator=(const Doorbells &) = delete;

  // Helper thread: take a ticket before polling MPI, then wait(ticket) sleeps until rung or
  // `timeout_ns` passed. A ring after the ticket was taken makes wait return at once, so work
  // that arrived while the helper was polling is never slept through.
  std::uint32_t ticket() const { return mine_ ? mine_->seq.load(std::memory_order_acquire) : 0; }
  void wait(std::uint32_t ticket, std::int64_t timeout_ns);
  // Any thread: wakes `rank`'s helper if it sleeps. Returns false if it has no bell.
  bool ring(int rank);
  bool has_bell(int rank) const { return bells_[static_cast<std::size_t>(rank)] != nullptr; }

private:
  struct alignas(64) Bell {
    std::atomic<std::uint32_t> seq;
    std::atomic<std::uint32_t> sleeping;
  };
  void *segment_ = nullptr;
  std::size_t segment_bytes_ = 0;
  Bell *mine_ = nullptr;
  std::vector<Bell *> bells_; // by rank in comm; nullptr for other nodes
};

} // namespace rmastore::internal
