// store_put returns only at remote completion: right after it returns, and with no further MPI
// call by the writer, every holder finds the new value in its own memory.
//
// The writer tells the holders "my put returned" through a POSIX shared-memory word (all ranks
// of this test run on one machine, also across the simulated hosts of scripts/multihost.sh,
// which share /dev/shm but talk MPI over TCP), not through MPI. A holder then reads its copy exactly once,
// with no retry: if the data were still in flight, the check would fail.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "capi/test_access.hpp"
#include "test_util.hpp"

using namespace rmastore::test;
using rmastore::internal::SlotHeader;

namespace {

struct Channel {
  std::atomic<std::uint64_t> put_returned; // sequence number of the last put that returned
  std::atomic<std::uint64_t> checked;      // holders that checked it
};

Channel *open_channel() {
  // The name comes from rank 0 so that concurrent jobs do not share a channel.
  long id = static_cast<long>(getpid());
  MPI_Bcast(&id, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  const std::string name = "/rmastore-test-rc-" + std::to_string(id);
  if (world_rank() == 0) {
    int fd = shm_open(name.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, sizeof(Channel)) != 0) return nullptr;
    close(fd);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) return nullptr;
  void *p = mmap(nullptr, sizeof(Channel), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) shm_unlink(name.c_str());
  return p == MAP_FAILED ? nullptr : static_cast<Channel *>(p);
}

bool wait_for(const std::atomic<std::uint64_t> &word, std::uint64_t value) {
  const auto deadline = std::chrono::steady_clock::now() + scaled(30000);
  while (word.load(std::memory_order_acquire) < value) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

} // namespace

TEST(RemoteCompletion, HoldersSeeTheValueAsSoonAsPutReturns) {
  ASSERT_GE(world_size(), 2) << "a holder other than the writer needs two processes (registered from np2)";
  const int p = world_size(), me = world_rank();
  Channel *ch = open_channel();
  ASSERT_NE(ch, nullptr);
  store_t s = make_store(std::min(3, p));
  ASSERT_NE(s, nullptr);
  auto *impl = rmastore::internal::impl(s);
  const int r = impl->placement()->replicas();
  std::vector<int> holders(static_cast<std::size_t>(r));

  const auto hosts = host_of_rank();
  std::uint64_t seq = 0, checks_expected = 0, across_hosts = 0;
  // Small values (one put with the header), large ones (value and header as separate puts),
  // first puts (slot allocation) and repeat puts (pure RMA), from every rank in turn.
  for (int writer = 0; writer < p; ++writer) {
    for (std::size_t len : {8u, 1000u, 40000u, 1u << 20}) {
      for (std::uint64_t version = 1; version <= 3; ++version) {
        const auto key = static_cast<store_key_t>(writer * 1000 + len);
        impl->placement()->holders(key, holders);
        const bool holder = std::find(holders.begin(), holders.end(), me) != holders.end();
        ++seq;
        checks_expected += static_cast<std::uint64_t>(r);
        if (me == writer) {
          const auto v = make_value(key, version, len);
          ASSERT_EQ(store_put(s, key, v.data(), v.size()), STORE_OK);
          ch->put_returned.store(seq, std::memory_order_release); // no MPI call after the put
        }
        if (holder) {
          ASSERT_TRUE(wait_for(ch->put_returned, seq)) << "writer never signalled";
          SlotHeader h;
          std::vector<std::byte> got;
          const bool valid = impl->read_local_copy(key, h, got);
          EXPECT_TRUE(valid) << "copy of key " << key << " not complete when put returned";
          EXPECT_EQ(h.version, version) << "key " << key;
          EXPECT_EQ(got, make_value(key, version, len)) << "key " << key;
          if (hosts[static_cast<std::size_t>(me)] != hosts[static_cast<std::size_t>(writer)]) ++across_hosts;
          ch->checked.fetch_add(1, std::memory_order_acq_rel);
        }
        // Everyone waits for all holders before the next put: keeps the rounds apart.
        ASSERT_TRUE(wait_for(ch->checked, checks_expected)) << "holders did not check";
      }
    }
  }
  // Across hosts the checks must have covered copies written over TCP, not only local ones.
  std::uint64_t total_across = 0;
  MPI_Allreduce(&across_hosts, &total_across, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (std::getenv("RMASTORE_TEST_HOSTS") != nullptr) {
    EXPECT_GT(total_across, 0u) << "no holder on another host than the writer was checked";
  }
  if (me == 0)
    std::printf("remote completion: %llu checks by holders on another host\n",
                static_cast<unsigned long long>(total_across));
  EXPECT_EQ(store_finalize(&s), STORE_OK);
  munmap(ch, sizeof(Channel));
}
