#include "transport/membership.hpp"

#include <algorithm>

namespace rmastore::internal {

std::vector<int> View::holders_of(const SlotId &id, const Placement &p) const {
  // Transaction records are placed by a hash of their key, apart from the values they name.
  const std::uint64_t where = id.ns == Ns::kTxRecord ? mix64(id.key ^ 0x7472616e73616374ULL) : id.key;
  std::vector<int> of(static_cast<std::size_t>(p.replicas()));
  p.holders(where, of);
  std::vector<int> ranks;
  for (int i : of) {
    if (i >= 0) ranks.push_back(rank_of_id[static_cast<std::size_t>(i)]);
  }
  return ranks;
}

std::vector<int> View::ranking_of(std::uint64_t key, int n, const Placement &p) const {
  std::vector<int> of(static_cast<std::size_t>(n));
  p.ranking(key, of);
  std::vector<int> ranks;
  for (int i : of) {
    if (i >= 0) ranks.push_back(rank_of_id[static_cast<std::size_t>(i)]);
  }
  return ranks;
}

std::vector<int> View::witnesses_of(std::uint64_t key) const {
  const int r = placement->replicas();
  std::vector<int> ranks = ranking_of(key, 2 * r);
  ranks.erase(ranks.begin(), ranks.begin() + std::min<std::ptrdiff_t>(r, static_cast<std::ptrdiff_t>(ranks.size())));
  return ranks;
}

bool View::id_gone(int id, const FailureState &failed) const {
  if (id < 0 || static_cast<std::size_t>(id) >= rank_of_id.size()) return true;
  const int rank = rank_of_id[static_cast<std::size_t>(id)];
  return rank < 0 || failed.dead(rank);
}

void Membership::init(const std::vector<int> &nodes, int replicas) {
  auto v = std::make_shared<View>();
  v->ids.resize(nodes.size());
  v->rank_of_id.resize(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) v->ids[i] = v->rank_of_id[i] = static_cast<int>(i);
  v->placement = std::make_shared<Placement>(nodes, replicas);
  std::lock_guard lk(mu_);
  view_ = std::move(v);
}

int Membership::follow(const FailureState &failed) {
  // Every put and get asks; the failure set rarely changes, so the common answer takes no lock.
  if (failed.failures() == failures_.load(std::memory_order_acquire)) return failures_;
  std::lock_guard lk(mu_);
  if (failed.failures() == failures_.load()) return failures_;
  auto next = std::make_shared<View>(*view_);
  auto p = std::make_shared<Placement>(*view_->placement);
  int n = 0;
  for (std::size_t r = 0; r < next->ids.size(); ++r) {
    if (failed.dead(static_cast<int>(r))) {
      p->remove(next->ids[r]);
      ++n;
    }
  }
  next->placement = std::move(p);
  next->failures = n;
  view_ = std::move(next);
  failures_.store(n, std::memory_order_release);
  return n;
}

void Membership::reset(std::vector<int> ids) {
  std::lock_guard lk(mu_);
  auto next = std::make_shared<View>();
  next->rank_of_id.assign(view_->rank_of_id.size(), -1);
  for (std::size_t r = 0; r < ids.size(); ++r) next->rank_of_id[static_cast<std::size_t>(ids[r])] = static_cast<int>(r);
  next->ids = std::move(ids);
  auto p = std::make_shared<Placement>(*view_->placement);
  for (std::size_t i = 0; i < next->rank_of_id.size(); ++i) {
    if (next->rank_of_id[i] < 0) p->remove(static_cast<int>(i));
  }
  next->placement = std::move(p);
  view_ = std::move(next);
  failures_.store(0, std::memory_order_release);
}

} // namespace rmastore::internal
