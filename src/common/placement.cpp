#include "common/placement.hpp"

#include <algorithm>
#include <stdexcept>

namespace rmastore::internal {

Placement::Placement(std::vector<int> node_of, int replicas) : node_of_(std::move(node_of)), replicas_(replicas) {
  if (replicas_ < 1 || replicas_ > size()) throw std::invalid_argument("replicas out of range");
  int max_node = 0;
  for (int n : node_of_) {
    if (n < 0) throw std::invalid_argument("negative node id");
    max_node = std::max(max_node, n);
  }
  alive_per_node_.assign(static_cast<std::size_t>(max_node) + 1, 0);
  alive_.assign(node_of_.size(), 1);
  id_salt_.resize(node_of_.size());
  for (std::size_t id = 0; id < node_of_.size(); ++id) {
    id_salt_[id] = mix64(0x9e3779b97f4a7c15ULL * (id + 1));
    if (alive_per_node_[static_cast<std::size_t>(node_of_[id])]++ == 0) ++nodes_alive_;
  }
  alive_count_ = size();
}

void Placement::remove(int id) {
  auto i = static_cast<std::size_t>(id);
  if (!alive_.at(i)) return;
  alive_[i] = 0;
  --alive_count_;
  if (--alive_per_node_[static_cast<std::size_t>(node_of_[i])] == 0) --nodes_alive_;
}

void Placement::holders(std::uint64_t key, std::span<int> out) const {
  const std::size_t r = std::min(out.size(), static_cast<std::size_t>(replicas_));
  std::fill(out.begin() + static_cast<std::ptrdiff_t>(r), out.end(), -1);
  ranking(key, out.first(r));
}

void Placement::ranking(std::uint64_t key, std::span<int> out) const {
  const std::size_t n = out.size();
  struct Cand {
    std::uint64_t score;
    int id;
  };
  std::fill(out.begin(), out.end(), -1);
  const std::uint64_t hk = mix64(key);
  if (n <= static_cast<std::size_t>(nodes_alive_)) {
    // All within round 0: the best process of each node, then the n best nodes by that score.
    // n is small (the copies), so they are kept in a short sorted list instead of sorting.
    thread_local std::vector<Cand> best;
    best.assign(alive_per_node_.size(), Cand{0, -1});
    for (std::size_t id = 0; id < node_of_.size(); ++id) {
      if (!alive_[id]) continue;
      const std::uint64_t s = mix64(hk ^ id_salt_[id]);
      Cand &b = best[static_cast<std::size_t>(node_of_[id])];
      if (b.id < 0 || s > b.score) b = Cand{s, static_cast<int>(id)};
    }
    std::vector<Cand> top;
    top.reserve(n + 1);
    for (const Cand &c : best) {
      if (c.id < 0) continue;
      auto pos = std::find_if(top.begin(), top.end(), [&](const Cand &t) { return c.score > t.score; });
      if (static_cast<std::size_t>(pos - top.begin()) >= n) continue;
      top.insert(pos, c);
      if (top.size() > n) top.pop_back();
    }
    for (std::size_t i = 0; i < top.size(); ++i) out[i] = top[i].id;
    return;
  }
  // Beyond round 0: every live process by score, then round by round.
  thread_local std::vector<Cand> all;
  all.clear();
  for (std::size_t id = 0; id < node_of_.size(); ++id) {
    if (alive_[id]) all.push_back(Cand{mix64(hk ^ id_salt_[id]), static_cast<int>(id)});
  }
  std::sort(all.begin(), all.end(), [](const Cand &a, const Cand &b) { return a.score > b.score; });
  // A process's round is how many processes of its node score better.
  std::vector<int> per_node_seen(alive_per_node_.size(), 0);
  std::vector<int> round_of(all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    round_of[i] = per_node_seen[static_cast<std::size_t>(node_of_[static_cast<std::size_t>(all[i].id)])]++;
  }
  std::size_t taken = 0;
  for (int round = 0; taken < n && taken < all.size(); ++round) {
    for (std::size_t i = 0; i < all.size() && taken < n; ++i) {
      if (round_of[i] == round) out[taken++] = all[i].id;
    }
  }
}

} // namespace rmastore::internal
