#include "placement.hpp"

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
  // r is small, so the r best are kept in a short sorted list instead of sorting all scores.
  const int r = replicas_;
  const bool spread_nodes = nodes_alive_ >= r;
  struct Cand {
    std::uint64_t score;
    int id;
  };
  std::fill(out.begin(), out.end(), -1);
  const std::uint64_t hk = mix64(key);
  if (spread_nodes) {
    // Best process of each node, then the r best nodes by that score.
    thread_local std::vector<Cand> best;
    best.assign(alive_per_node_.size(), Cand{0, -1});
    for (std::size_t id = 0; id < node_of_.size(); ++id) {
      if (!alive_[id]) continue;
      const std::uint64_t s = mix64(hk ^ id_salt_[id]);
      Cand &b = best[static_cast<std::size_t>(node_of_[id])];
      if (b.id < 0 || s > b.score) b = Cand{s, static_cast<int>(id)};
    }
    std::vector<Cand> top;
    top.reserve(static_cast<std::size_t>(r) + 1);
    for (const Cand &c : best) {
      if (c.id < 0) continue;
      auto pos = std::find_if(top.begin(), top.end(), [&](const Cand &t) { return c.score > t.score; });
      if (pos - top.begin() >= r) continue;
      top.insert(pos, c);
      if (static_cast<int>(top.size()) > r) top.pop_back();
    }
    for (std::size_t i = 0; i < top.size(); ++i) out[i] = top[i].id;
    return;
  }
  // Fewer nodes than copies: distinct processes, taking one per node before a second from any.
  thread_local std::vector<Cand> all;
  all.clear();
  for (std::size_t id = 0; id < node_of_.size(); ++id) {
    if (alive_[id]) all.push_back(Cand{mix64(hk ^ id_salt_[id]), static_cast<int>(id)});
  }
  std::sort(all.begin(), all.end(), [](const Cand &a, const Cand &b) { return a.score > b.score; });
  // Round k takes the k-th best process of every node, best score first.
  std::vector<int> per_node_seen(alive_per_node_.size(), 0);
  std::vector<int> round_of(all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    round_of[i] = per_node_seen[static_cast<std::size_t>(node_of_[static_cast<std::size_t>(all[i].id)])]++;
  }
  std::size_t n = 0;
  for (int round = 0; n < static_cast<std::size_t>(r) && n < all.size(); ++round) {
    for (std::size_t i = 0; i < all.size() && n < static_cast<std::size_t>(r); ++i) {
      if (round_of[i] == round) out[n++] = all[i].id;
    }
  }
}

} // namespace rmastore::internal
