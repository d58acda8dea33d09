// Placement: which processes hold the copies of a key.
//
// Rendezvous (highest-random-weight) hashing over stable process ids: every process scores every
// key, and the r best-scoring processes hold its copies. Scores depend only on (key, id), so when
// a process leaves, only the keys it held move, each to the next process in its own ranking.
// Copies go to distinct nodes when there are at least r nodes, else to distinct processes on as
// many nodes as there are.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace rmastore::internal {

class Placement {
public:
  // node_of[id] is the node of process `id`; ids are 0..size-1.
  Placement(std::vector<int> node_of, int replicas);

  int replicas() const { return replicas_; }
  int size() const { return static_cast<int>(node_of_.size()); }
  int nodes() const { return nodes_alive_; }
  int node_of(int id) const { return node_of_[static_cast<std::size_t>(id)]; }
  bool alive(int id) const { return alive_[static_cast<std::size_t>(id)] != 0; }
  int alive_count() const { return alive_count_; }

  // Writes the holders of `key` into out[0..replicas), best first. With fewer live processes
  // than replicas, only alive_count() entries are written and the rest are set to -1. They are
  // the first `replicas` processes of the key's ranking.
  void holders(std::uint64_t key, std::span<int> out) const;

  // Writes the first out.size() live processes of `key`'s ranking into `out`, best first; with
  // fewer live processes, the rest is set to -1. Round k of the ranking takes the k-th best live
  // process of every node, in the order of their scores: the first min(n, nodes()) are on
  // distinct nodes, a shorter ranking is a prefix of a longer one, and removing a process never
  // moves another live process to a later position (tests/test_placement.cpp).
  void ranking(std::uint64_t key, std::span<int> out) const;

  // Removes a process from placement (it failed). Idempotent.
  void remove(int id);

private:
  std::vector<int> node_of_;
  std::vector<std::uint64_t> id_salt_;
  std::vector<char> alive_;
  std::vector<int> alive_per_node_;
  int replicas_;
  int nodes_alive_ = 0;
  int alive_count_ = 0;
};

// A strong 64-bit mixer (the SplitMix64 finaliser). Public for tests and for the checksum.
inline std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

} // namespace rmastore::internal
