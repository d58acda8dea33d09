#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "placement.hpp"

using rmastore::internal::Placement;

namespace {

std::vector<int> one_node(int p) {
  return std::vector<int>(static_cast<std::size_t>(p), 0);
}

std::vector<int> even_nodes(int p, int nodes) {
  std::vector<int> v(static_cast<std::size_t>(p));
  for (int i = 0; i < p; ++i) v[static_cast<std::size_t>(i)] = i * nodes / p;
  return v;
}

std::vector<int> holders(const Placement &pl, std::uint64_t key) {
  std::vector<int> h(static_cast<std::size_t>(pl.replicas()));
  pl.holders(key, h);
  return h;
}

} // namespace

TEST(Placement, CopiesSitOnDistinctProcesses) {
  std::mt19937_64 rng(1);
  for (int p = 1; p <= 16; ++p) {
    for (int r = 1; r <= p; ++r) {
      Placement pl(one_node(p), r);
      for (int i = 0; i < 500; ++i) {
        auto h = holders(pl, rng());
        std::set<int> distinct(h.begin(), h.end());
        ASSERT_EQ(distinct.size(), static_cast<std::size_t>(r)) << "p=" << p << " r=" << r;
        for (int id : h) ASSERT_TRUE(id >= 0 && id < p);
      }
    }
  }
}

TEST(Placement, IsDeterministic) {
  Placement a(one_node(8), 3), b(one_node(8), 3);
  for (std::uint64_t k = 0; k < 1000; ++k) EXPECT_EQ(holders(a, k), holders(b, k));
}

TEST(Placement, LoadWithinTenPercentOfMean) {
  std::mt19937_64 rng(2);
  for (int p : {2, 3, 4, 5, 8, 12, 16}) {
    for (int r : {1, 2, 3, 6}) {
      if (r > p) continue;
      for (int nodes : {1, 2, 4}) {
        if (p % nodes != 0) continue;
        Placement pl(even_nodes(p, nodes), r);
        const int keys = 10000 * std::max(1, p / 8);
        std::vector<int> load(static_cast<std::size_t>(p), 0);
        for (int i = 0; i < keys; ++i) {
          for (int id : holders(pl, rng())) ++load[static_cast<std::size_t>(id)];
        }
        const double mean = static_cast<double>(keys) * r / p;
        for (int id = 0; id < p; ++id) {
          EXPECT_NEAR(load[static_cast<std::size_t>(id)], mean, 0.10 * mean)
              << "p=" << p << " r=" << r << " nodes=" << nodes << " id=" << id;
        }
      }
    }
  }
}

TEST(Placement, CopiesSitOnDistinctNodesWhenThereAreEnough) {
  std::mt19937_64 rng(3);
  for (int nodes : {2, 3, 4, 8}) {
    const int p = nodes * 2;
    const auto node_of = even_nodes(p, nodes);
    for (int r = 1; r <= nodes; ++r) {
      Placement pl(node_of, r);
      EXPECT_EQ(pl.nodes(), nodes);
      for (int i = 0; i < 2000; ++i) {
        std::set<int> used;
        for (int id : holders(pl, rng())) used.insert(node_of[static_cast<std::size_t>(id)]);
        ASSERT_EQ(used.size(), static_cast<std::size_t>(r)) << "nodes=" << nodes << " r=" << r;
      }
    }
  }
}

TEST(Placement, FewerNodesThanCopiesStillUsesEveryNode) {
  // 2 nodes of 4, 3 copies: two nodes must both be used, on 3 distinct processes.
  const auto node_of = even_nodes(8, 2);
  Placement pl(node_of, 3);
  std::mt19937_64 rng(4);
  for (int i = 0; i < 2000; ++i) {
    auto h = holders(pl, rng());
    std::set<int> procs(h.begin(), h.end()), used;
    for (int id : h) used.insert(node_of[static_cast<std::size_t>(id)]);
    ASSERT_EQ(procs.size(), 3u);
    ASSERT_EQ(used.size(), 2u);
  }
}

TEST(Placement, RemovingAProcessMovesOnlyItsKeys) {
  Placement before(one_node(8), 2), after(one_node(8), 2);
  after.remove(5);
  EXPECT_EQ(after.alive_count(), 7);
  int moved = 0;
  for (std::uint64_t k = 0; k < 20000; ++k) {
    auto a = holders(before, k), b = holders(after, k);
    const bool had5 = std::find(a.begin(), a.end(), 5) != a.end();
    EXPECT_EQ(std::find(b.begin(), b.end(), 5), b.end());
    if (!had5) {
      EXPECT_EQ(a, b) << "key " << k << " moved although its holders are alive";
    } else {
      // The surviving holder keeps its copy; exactly one new holder is added.
      std::set<int> sa(a.begin(), a.end()), sb(b.begin(), b.end());
      sa.erase(5);
      for (int id : sa) EXPECT_TRUE(sb.count(id));
      ++moved;
    }
  }
  EXPECT_NEAR(moved, 20000 * 2 / 8, 20000 * 2 / 8 / 10);
}

TEST(Placement, RejectsBadArguments) {
  EXPECT_THROW(Placement(one_node(3), 0), std::invalid_argument);
  EXPECT_THROW(Placement(one_node(3), 4), std::invalid_argument);
  EXPECT_THROW(Placement(std::vector<int>{0, -1}, 1), std::invalid_argument);
}
