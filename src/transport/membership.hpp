// Who is in the store: each process's stable id and current rank, and placement over them.
//
// Readers take a View, an immutable snapshot, and keep it for the operation at hand: a thread
// that changes membership makes a new View, so no reader sees one half-changed. It changes in
// two ways: store_recover renumbers the survivors (reset), and the localized variant takes the
// failures its helper recorded out of placement (follow) while every thread carries on.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "common/config.hpp"
#include "common/placement.hpp"
#include "transport/failure.hpp"

namespace rmastore::internal {

struct View {
  std::vector<int> ids;        // current rank -> stable id
  std::vector<int> rank_of_id; // stable id -> current rank, -1 once gone from the communicator
  std::shared_ptr<const Placement> placement;
  int failures = 0; // failures of the current communicator that placement leaves out

  // Current ranks of the holders of `id`'s copies, best first.
  std::vector<int> holders_of(const SlotId &id) const { return holders_of(id, *placement); }
  std::vector<int> holders_of(const SlotId &id, const Placement &p) const;
  // Current ranks of the first `n` live processes of value `key`'s ranking, best first: its
  // holders, then its witnesses (witnesses.hpp). Fewer when fewer processes live.
  std::vector<int> ranking_of(std::uint64_t key, int n) const { return ranking_of(key, n, *placement); }
  std::vector<int> ranking_of(std::uint64_t key, int n, const Placement &p) const;
  // The `replicas` processes after the holders in that ranking: where the key's records are.
  std::vector<int> witnesses_of(std::uint64_t key) const;
  // Holders and witnesses of value `key`: every process that keeps something of it.
  std::vector<int> keepers_of(std::uint64_t key) const { return ranking_of(key, 2 * placement->replicas()); }
  int node_of_rank(int rank) const { return placement->node_of(ids[static_cast<std::size_t>(rank)]); }
  // Whether the process a stable id names is gone: out of the communicator, or failed in it.
  bool id_gone(int id, const FailureState &failed) const;
};

class Membership {
public:
  // Everyone of a communicator of `nodes.size()` processes, in rank order; nodes[r] is the
  // node of rank r. Before it, there is no view.
  void init(const std::vector<int> &nodes, int replicas);

  std::shared_ptr<const View> view() const {
    std::lock_guard lk(mu_);
    return view_;
  }
  // Failures the current view's placement leaves out; no lock.
  int failures() const { return failures_.load(std::memory_order_acquire); }
  // Leaves out of placement every process `failures` knows failed. Returns how many there are.
  int follow(const FailureState &failed);
  // After store_recover: `ids` are the stable ids of the new communicator's ranks.
  void reset(std::vector<int> ids);

private:
  mutable std::mutex mu_;
  std::shared_ptr<const View> view_;
  std::atomic<int> failures_{0};
};

} // namespace rmastore::internal
