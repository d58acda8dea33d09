// What lets a key whose every copy died be reported lost rather than not found, kept by O(r)
// processes per key instead of by every process.
//
// A key's witnesses are the `replicas` processes that follow its holders in its placement
// ranking (View::witnesses_of). Each keeps a record "this key exists" here: the first put of a
// key writes its copies, then records it at its witnesses (kWitness); a delete removes the
// records (kUnwitness) before its copies go. Recovery and the localized repairs restore the
// records of a key at its current witnesses, like copies. A key of which neither a copy, nor a
// lost marker, nor a record survives reads as not found: docs/failures.md says which failures
// that takes.
//
// Also the keys the localized variant's repairs reported lost (kLost, sent to every process), for
// store_last_recovery. Thread-safe: the application, helper and repair threads all use it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <set>
#include <unordered_set>
#include <vector>

#include "common/protocol.hpp"

namespace rmastore::internal {

class Witnesses {
public:
  bool has(std::uint64_t key) const {
    std::lock_guard lk(mu_);
    return records_.count(key) > 0;
  }
  void add(std::uint64_t key) {
    std::lock_guard lk(mu_);
    records_.insert(key);
  }
  void remove(std::uint64_t key) {
    std::lock_guard lk(mu_);
    records_.erase(key);
  }
  std::vector<std::uint64_t> all() const {
    std::lock_guard lk(mu_);
    return {records_.begin(), records_.end()};
  }
  std::size_t count() const {
    std::lock_guard lk(mu_);
    return records_.size();
  }
  // The keys recorded here in [first, last], ascending, at most `limit` of them.
  std::vector<std::uint64_t> keys_in(std::uint64_t first, std::uint64_t last, std::size_t limit) const {
    std::vector<std::uint64_t> out;
    {
      std::lock_guard lk(mu_);
      for (std::uint64_t k : records_) {
        if (k >= first && k <= last) out.push_back(k);
      }
    }
    std::sort(out.begin(), out.end());
    if (out.size() > limit) out.resize(limit);
    return out;
  }
  // kWitness, kUnwitness or kWitnessQuery: carries it out and returns the reply.
  CtrlMsg serve(const CtrlMsg &msg) {
    CtrlMsg r = reply_to(msg);
    std::lock_guard lk(mu_);
    if (msg.type == MsgType::kWitness) {
      records_.insert(msg.key);
    } else if (msg.type == MsgType::kUnwitness) {
      records_.erase(msg.key);
    } else if (records_.count(msg.key) > 0) {
      r.flags |= kReplyLive;
    }
    return r;
  }
  static bool is_request(MsgType t) {
    return t == MsgType::kWitness || t == MsgType::kUnwitness || t == MsgType::kWitnessQuery;
  }

  // Localized variant: a repair or a get of this process found every copy of `key` lost; a put
  // or delete of it here ends that.
  void mark_lost(std::uint64_t key) {
    std::lock_guard lk(mu_);
    lost_.insert(key);
  }
  void clear_lost(std::uint64_t key) {
    std::lock_guard lk(mu_);
    lost_.erase(key);
  }
  // Sorted.
  std::vector<std::uint64_t> lost() const {
    std::lock_guard lk(mu_);
    return {lost_.begin(), lost_.end()};
  }

private:
  mutable std::mutex mu_;
  std::unordered_set<std::uint64_t> records_;
  std::set<std::uint64_t> lost_;
};

} // namespace rmastore::internal
