#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "common/placement.hpp"

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

namespace {

// Node layouts the ranking tests run over: one node, one process per node, uneven nodes.
std::vector<std::vector<int>> layouts(int p) {
  std::vector<int> uneven(static_cast<std::size_t>(p));
  for (int i = 0; i < p; ++i) uneven[static_cast<std::size_t>(i)] = i < p / 2 ? 0 : 1 + i % 3;
  std::vector<int> own(static_cast<std::size_t>(p));
  for (int i = 0; i < p; ++i) own[static_cast<std::size_t>(i)] = i;
  return {one_node(p), own, uneven, even_nodes(p, std::max(1, p / 3))};
}

std::vector<int> ranking(const Placement &pl, std::uint64_t key, int n) {
  std::vector<int> r(static_cast<std::size_t>(n));
  pl.ranking(key, r);
  return r;
}

} // namespace

// holders() is now the head of ranking(): the copies must stay where they were. The hash folds
// the holders of 1,000 keys for 5 process counts, 3 node layouts, 1 to 4 copies, with and
// without a removed process, as computed by the code before ranking() existed.
TEST(Placement, HoldersAreWhereTheyWereBeforeRanking) {
  std::uint64_t h = 0;
  for (int p : {2, 3, 5, 8, 16}) {
    for (int layout = 0; layout < 3; ++layout) {
      std::vector<int> nodes(static_cast<std::size_t>(p));
      for (int i = 0; i < p; ++i)
        nodes[static_cast<std::size_t>(i)] = layout == 0 ? 0 : layout == 1 ? i : i % ((p + 1) / 2);
      for (int r = 1; r <= std::min(4, p); ++r) {
        Placement pl(nodes, r);
        for (int pass = 0; pass < 2; ++pass) {
          if (pass == 1 && p > r) pl.remove(1);
          for (std::uint64_t key = 0; key < 1000; ++key) {
            for (int x : holders(pl, key)) h = rmastore::internal::mix64(h ^ static_cast<std::uint64_t>(x + 2));
          }
        }
      }
    }
  }
  EXPECT_EQ(h, 0x8f1ac2ddb467c62fULL);
}

TEST(Placement, RankingStartsWithTheHoldersAndGrowsByPrefix) {
  for (int p = 2; p <= 16; p += 3) {
    for (const auto &nodes : layouts(p)) {
      for (int r = 1; r <= std::min(6, p); ++r) {
        Placement pl(nodes, r);
        for (std::uint64_t key = 0; key < 300; ++key) {
          const std::vector<int> full = ranking(pl, key, p);
          EXPECT_EQ(std::vector<int>(full.begin(), full.begin() + r), holders(pl, key)) << "p " << p << " key " << key;
          for (int n = 1; n < p; ++n) {
            EXPECT_EQ(ranking(pl, key, n), std::vector<int>(full.begin(), full.begin() + n)) << "n " << n;
          }
        }
      }
    }
  }
}

TEST(Placement, RankingIsEveryLiveProcessOnceNodesFirst) {
  for (int p = 2; p <= 16; p += 3) {
    for (const auto &nodes : layouts(p)) {
      Placement pl(nodes, 1);
      pl.remove(p - 1);
      for (std::uint64_t key = 0; key < 300; ++key) {
        const std::vector<int> full = ranking(pl, key, p);
        EXPECT_EQ(full.back(), -1) << "only p-1 processes are alive";
        const std::set<int> distinct(full.begin(), full.end() - 1);
        EXPECT_EQ(distinct.size(), static_cast<std::size_t>(p - 1));
        EXPECT_EQ(distinct.count(p - 1), 0u) << "a removed process is ranked";
        std::set<int> first_nodes;
        for (int i = 0; i < pl.nodes(); ++i)
          first_nodes.insert(nodes[static_cast<std::size_t>(full[static_cast<std::size_t>(i)])]);
        EXPECT_EQ(first_nodes.size(), static_cast<std::size_t>(pl.nodes())) << "the first of each node come first";
      }
    }
  }
}

// What lets a process that ranks among a key's first n keep that place while others fail: a
// removal can only move live processes forward.
TEST(Placement, RemovingAProcessNeverMovesAnotherBack) {
  std::mt19937 rng(7);
  for (int p = 3; p <= 16; p += 2) {
    for (const auto &nodes : layouts(p)) {
      Placement pl(nodes, 1);
      std::vector<int> order(static_cast<std::size_t>(p));
      for (int i = 0; i < p; ++i) order[static_cast<std::size_t>(i)] = i;
      std::shuffle(order.begin(), order.end(), rng);
      for (int step = 0; step + 1 < p; ++step) {
        std::vector<std::vector<int>> before;
        for (std::uint64_t key = 0; key < 200; ++key) before.push_back(ranking(pl, key, p));
        const int gone = order[static_cast<std::size_t>(step)];
        pl.remove(gone);
        for (std::uint64_t key = 0; key < 200; ++key) {
          const std::vector<int> after = ranking(pl, key, p);
          const std::vector<int> &was = before[key];
          for (int id = 0; id < p; ++id) {
            if (id == gone || !pl.alive(id)) continue;
            const auto pos = [id](const std::vector<int> &v) { return std::find(v.begin(), v.end(), id) - v.begin(); };
            EXPECT_LE(pos(after), pos(was)) << "p " << p << " key " << key << " process " << id << " after " << gone;
          }
        }
      }
    }
  }
}
