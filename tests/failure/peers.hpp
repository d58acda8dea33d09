// The survivors' collectives of test_failure (see below why not an MPI communicator).
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace rmastore::test::failure {

// The survivors' collectives, built from point-to-point messages among known-live ranks of a
// communicator that may hold dead ones. The localized variant needs no survivors'
// communicator, and making one for the test is not reliable in Open MPI 5.0.7: the agreement
// inside MPIX_Comm_shrink crashed (segfault in era_iagree_req_complete_cb) in 1 of about 13
// runs (with two threads in MPI: scripts/openmpi-patches/0010), MPI_Comm_create_group refuses
// a parent with failed processes, and MPI_Comm_create_from_group hung in ompi_comm_activate in
// 1 of 3.
class Peers {
public:
  Peers() = default;
  Peers(MPI_Comm comm, std::vector<int> members) : comm_(comm), members_(std::move(members)) {
    int me = 0;
    MPI_Comm_rank(comm_, &me);
    index_ = static_cast<int>(std::find(members_.begin(), members_.end(), me) - members_.begin());
  }
  bool valid() const { return comm_ != MPI_COMM_NULL && index_ < size(); }
  int size() const { return static_cast<int>(members_.size()); }
  int index() const { return index_; } // 0 on one of them: the one that prints
  std::uint64_t sum(std::uint64_t v) {
    return combine(v, [](std::uint64_t a, std::uint64_t b) { return a + b; });
  }
  std::uint64_t max(std::uint64_t v) {
    return combine(v, [](std::uint64_t a, std::uint64_t b) { return std::max(a, b); });
  }
  void barrier() {
    combine(0, [](std::uint64_t a, std::uint64_t) { return a; });
  }
  // Everyone's value, in member order.
  std::vector<std::uint64_t> gather(std::uint64_t v) {
    std::vector<std::uint64_t> all(members_.size(), 0);
    if (index_ == 0) {
      all[0] = v;
      for (std::size_t i = 1; i < members_.size(); ++i)
        MPI_Recv(&all[i], 1, MPI_UINT64_T, members_[i], kTag, comm_, MPI_STATUS_IGNORE);
      for (std::size_t i = 1; i < members_.size(); ++i)
        MPI_Send(all.data(), size(), MPI_UINT64_T, members_[i], kTag, comm_);
    } else {
      MPI_Send(&v, 1, MPI_UINT64_T, members_[0], kTag, comm_);
      MPI_Recv(all.data(), size(), MPI_UINT64_T, members_[0], kTag, comm_, MPI_STATUS_IGNORE);
    }
    return all;
  }

private:
  static constexpr int kTag = 4242;
  template <class Op> std::uint64_t combine(std::uint64_t v, Op op) {
    const std::vector<std::uint64_t> all = gather(v);
    std::uint64_t r = all[0];
    for (std::size_t i = 1; i < all.size(); ++i) r = op(r, all[i]);
    return r;
  }
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<int> members_;
  int index_ = 0;
};

inline Peers everyone(MPI_Comm comm) {
  int n = 0;
  MPI_Comm_size(comm, &n);
  std::vector<int> all(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) all[static_cast<std::size_t>(i)] = i;
  return Peers(comm, all);
}

} // namespace rmastore::test::failure
