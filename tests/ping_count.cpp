// Counts the pings of STORE_DETECTOR_PING that this process sends, by interposing MPI_Send in the
// test executable (the MPI profiling interface): the library's calls reach this definition
// before Open MPI's. Only executables that link this file count.
#include <mpi.h>

#include <atomic>

#include "common/protocol.hpp"
#include "ping_count.hpp"

namespace {
std::atomic<std::uint64_t> g_pings{0};
}

extern "C" int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  // Tag kTagPing is used for nothing else, on the store's control communicator.
  if (tag == rmastore::internal::kTagPing) g_pings.fetch_add(1, std::memory_order_relaxed);
  return PMPI_Send(buf, count, type, dest, tag, comm);
}

namespace rmastore::test {
std::uint64_t pings_sent() {
  return g_pings.load(std::memory_order_relaxed);
}
} // namespace rmastore::test
