// The MPI objects of the current set of processes: the store's communicators, its window, the
// doorbells, the failure set and the helper thread. store_recover replaces them; nothing else
// changes them, and it does so only while no thread of the store but the application's runs.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "common/slot.hpp"
#include "transport/doorbell.hpp"
#include "transport/failure.hpp"
#include "transport/helper.hpp"
#include "transport/rma.hpp"

namespace rmastore::internal {

class Runtime {
public:
  Runtime(MPI_Comm comm, int detector, int helper_max_sleep_us);
  Runtime(const Runtime &) = delete;
  Runtime &operator=(const Runtime &) = delete;

  // Collective over comm: a control communicator, the failure set, the window (unless kept from
  // before) with `regions` attached, the doorbells and a helper thread that is not started yet.
  void build(const std::vector<SlotAllocator::Region> &regions);
  // Stops the helper thread and drops the doorbells: the local parts. The collective ones are
  // freed by the caller, who knows whether that is safe.
  void stop_helper();
  // comm has changed (store_recover shrank it): reads this process's rank and the size again.
  void renumber();
  // Frees *c, or, if it spanned a process that MPI declared failed, keeps it until
  // free_retired(): such a process may be alive (ULFM's heartbeat detector declares a stopped
  // one failed) and send on it later. Freed, its context id would go to a new communicator,
  // and ob1 aborts the job on a message from a rank beyond that one's size
  // (tests/test_false_suspicion.cpp). Sets *c to MPI_COMM_NULL.
  void retire(MPI_Comm *c, bool spanned_failed);
  // store_finalize: the kept communicators (those of the recoveries that lost processes).
  void free_retired() noexcept;

  bool detecting() const { return detector != STORE_DETECTOR_OFF; }
  bool dead(int r) const { return detecting() && failures->dead(r); }
  bool revoked() const { return detecting() && failures->revoked(); }
  // Our own helper serves our requests to ourselves: if it stopped, nobody answers them.
  void check_helper() const;

  MPI_Comm comm = MPI_COMM_NULL; // collectives of the store
  MPI_Comm ctrl = MPI_COMM_NULL; // control messages
  int rank = 0;
  int size = 0;
  std::uint32_t epoch = 0; // number of completed recoveries
  const int detector;
  const int helper_max_sleep_us;
  std::unique_ptr<RmaWindow> window;
  std::unique_ptr<Doorbells> bells;
  std::unique_ptr<FailureState> failures;
  std::unique_ptr<Helper> helper;
  std::vector<MPI_Comm> retired;
};

} // namespace rmastore::internal
