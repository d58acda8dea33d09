// Across hosts (RMASTORE_TEST_HOSTS=N, scripts/multihost.sh): the ranks really are spread over N
// hosts, the store sees them as N nodes, and every key's copies physically sit in the memory of
// processes on distinct hosts, for every replica count up to N.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "capi/test_access.hpp"
#include "test_util.hpp"

using namespace rmastore::test;
using rmastore::internal::SlotHeader;

namespace {

// Simulated hosts (tests/multihost.cmake), or the nodes of a Slurm job on them (tests/slurm.cmake).
int hosts_expected() {
  const char *v = std::getenv("RMASTORE_TEST_HOSTS");
  if (v == nullptr) v = std::getenv("RMASTORE_TEST_SLURM");
  return v ? std::atoi(v) : 0;
}

std::string first_line(const char *path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The group the kernel's fair scheduler puts this process in: its cgroup v1 CPU cgroup, or, in
// the root one with autogroups on, its session's autogroup. A cgroup v2 path tells nothing of
// the cpu controller (a namespace's ranks cannot read /sys/fs/cgroup), so only the group that
// scripts/multihost.sh makes where the controller is handed down counts there.
std::string scheduling_group() {
  std::ifstream in("/proc/self/cgroup");
  std::string line, group;
  while (std::getline(in, line)) {
    // v1: "N:cpu,cpuacct:/path"; v2: "0::/path".
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",", path = line.substr(b + 1);
    if (controllers.find(",cpu,") != std::string::npos) {
      if (path != "/") group = "cgroup v1 " + path;
      break;
    }
    if (controllers == ",," && path == "/rmastore-hosts") group = "cgroup v2 " + path;
  }
  if (!group.empty()) return group;
  if (first_line("/proc/sys/kernel/sched_autogroup_enabled") != "1") return "no group";
  const std::string ag = first_line("/proc/self/autogroup");
  return ag.substr(0, ag.find(' '));
}

} // namespace

TEST(Hosts, RanksSpanTheHostsAndTheStoreSeesThem) {
  const int n = hosts_expected();
  ASSERT_GE(n, 2)
      << "run across simulated hosts: RMASTORE_TEST_HOSTS=N or RMASTORE_TEST_SLURM=N (tests/multihost.cmake)";
  const auto hosts = host_of_rank();
  const std::set<std::string> distinct(hosts.begin(), hosts.end());
  ASSERT_EQ(static_cast<int>(distinct.size()), std::min(n, world_size())) << "ranks are not spread over the hosts";
  store_t s = make_store(2);
  ASSERT_NE(s, nullptr);
  store_info_t info;
  store_info_init(&info);
  ASSERT_EQ(store_get_info(s, &info), STORE_OK);
  EXPECT_EQ(info.nodes, static_cast<int>(distinct.size()));
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}

class HostsPlacement : public ::testing::TestWithParam<int> {};

TEST_P(HostsPlacement, EveryCopyOnADistinctHost) {
  const int r = GetParam(), me = world_rank(), p = world_size();
  const auto hosts = host_of_rank();
  const int n = static_cast<int>(std::set<std::string>(hosts.begin(), hosts.end()).size());
  ASSERT_GE(n, r) << "needs at least as many hosts as copies";
  store_t s = make_store(r);
  ASSERT_NE(s, nullptr);
  constexpr int kKeys = 64;
  for (int i = 0; i < kKeys; ++i) {
    const auto key = static_cast<store_key_t>(me * kKeys + i);
    const auto v = make_value(key, 1, 40);
    ASSERT_EQ(store_put(s, key, v.data(), v.size()), STORE_OK);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // Which keys this process holds in its own memory, whatever the placement code says.
  auto *impl = rmastore::internal::impl(s);
  std::vector<char> held(static_cast<std::size_t>(kKeys * p));
  for (int k = 0; k < kKeys * p; ++k) {
    SlotHeader h;
    std::vector<std::byte> got;
    if (impl->read_local_copy(static_cast<store_key_t>(k), h, got)) {
      EXPECT_EQ(got, make_value(static_cast<std::uint64_t>(k), 1, 40)) << "key " << k;
      held[static_cast<std::size_t>(k)] = 1;
    }
  }
  std::vector<char> all(held.size() * static_cast<std::size_t>(p));
  MPI_Allgather(held.data(), static_cast<int>(held.size()), MPI_CHAR, all.data(), static_cast<int>(held.size()),
                MPI_CHAR, MPI_COMM_WORLD);
  for (int k = 0; k < kKeys * p; ++k) {
    std::multiset<std::string> where;
    for (int rank = 0; rank < p; ++rank) {
      if (all[static_cast<std::size_t>(rank) * held.size() + static_cast<std::size_t>(k)]) {
        where.insert(hosts[static_cast<std::size_t>(rank)]);
      }
    }
    EXPECT_EQ(static_cast<int>(where.size()), r) << "key " << k << ": copies in memory";
    EXPECT_EQ(std::set<std::string>(where.begin(), where.end()).size(), where.size())
        << "key " << k << " has two copies on one host";
  }
  EXPECT_EQ(store_finalize(&s), STORE_OK);
}

INSTANTIATE_TEST_SUITE_P(Replicas, HostsPlacement, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int> &p) { return "r" + std::to_string(p.param); });

// The simulated hosts share this machine's cores. Scheduled as rival groups (one autogroup per
// prted session), runnable threads of one host waited seconds behind a spinning thread of
// another (docs/operations.md, "The stalls were the simulation's scheduling");
// scripts/multihost.sh keeps them in one group.
TEST(Hosts, TheHostsShareOneSchedulingGroup) {
  const std::string group = scheduling_group();
  const auto groups = all_strings(group), hosts = host_of_rank();
  for (int r = 0; r < world_size(); ++r)
    EXPECT_EQ(groups[static_cast<std::size_t>(r)], group)
        << "rank " << r << " on " << hosts[static_cast<std::size_t>(r)] << " is scheduled in another group than rank "
        << world_rank() << " on " << hosts[static_cast<std::size_t>(world_rank())]
        << " (scripts/multihost.sh up warns why it could not make one CPU cgroup for the hosts)";
}
