// The repair thread of the localized variant (repair.cpp).
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "store.hpp"

namespace rmastore::internal {

class Store::Repairer {
public:
  explicit Repairer(Store &s);
  ~Repairer();
  Repairer(const Repairer &) = delete;
  Repairer &operator=(const Repairer &) = delete;

  void start();
  // Makes every wait of the thread give up, and joins it.
  void stop();
  // Any thread: repair `id` soon.
  void request(const SlotId &id);
  // Any thread: placement changed; repair what it moved.
  void view_changed();
  void stats(store_info_t &out) const;
  void add_bytes(std::uint64_t n) { repaired_bytes_.fetch_add(n); }

private:
  void loop();
  // Slots whose holders differ between the placement of the last complete pass and `now`, and
  // of which this process is the first holder now.
  std::vector<SlotId> candidates(const Placement &now);

  Store &s_;
  Agent agent_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::set<SlotId> requested_;
  bool view_dirty_ = false;
  std::atomic<bool> stop_{false};
  std::shared_ptr<const Placement> repaired_; // placement the last complete pass repaired for
  int repaired_failures_ = 0;
  std::atomic<std::uint64_t> backlog_{0}, repaired_slots_{0}, repaired_bytes_{0};
};

} // namespace rmastore::internal
