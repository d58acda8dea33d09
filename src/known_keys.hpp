// The keys this process knows were put, and the keys it was told lost every copy: what lets a
// recovery or a get report a key lost rather than not found. Thread-safe: the application,
// helper and repair threads all use it.
//
// Today every process knows every key (the first put of a key registers it everywhere,
// GlobalVariant / LocalizedVariant::register_key), so this grows with the keys of the whole job.
#pragma once

#include <cstdint>
#include <mutex>
#include <set>
#include <unordered_set>
#include <vector>

namespace rmastore::internal {

class KnownKeys {
public:
  bool known(std::uint64_t key) const {
    std::lock_guard lk(mu_);
    return known_.count(key) > 0;
  }
  // Known, or reported lost and not put again since.
  bool known_or_lost(std::uint64_t key) const {
    std::lock_guard lk(mu_);
    return known_.count(key) > 0 || lost_.count(key) > 0;
  }
  void add(std::uint64_t key) {
    std::lock_guard lk(mu_);
    known_.insert(key);
  }
  void add(const std::vector<std::uint64_t> &keys) {
    std::lock_guard lk(mu_);
    known_.insert(keys.begin(), keys.end());
  }
  // A put of `key` begins: it is no longer lost. Returns whether it was known already.
  bool put_again(std::uint64_t key) {
    std::lock_guard lk(mu_);
    lost_.erase(key);
    return known_.count(key) > 0;
  }
  void mark_lost(std::uint64_t key) {
    std::lock_guard lk(mu_);
    lost_.insert(key);
  }
  std::vector<std::uint64_t> all() const {
    std::lock_guard lk(mu_);
    return {known_.begin(), known_.end()};
  }
  // Sorted.
  std::vector<std::uint64_t> lost() const {
    std::lock_guard lk(mu_);
    return {lost_.begin(), lost_.end()};
  }

private:
  mutable std::mutex mu_;
  std::unordered_set<std::uint64_t> known_;
  std::set<std::uint64_t> lost_; // localized variant: keys the repairs reported lost
};

} // namespace rmastore::internal
