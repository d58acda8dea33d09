// Names every module of the core shares: the store's settings, a slot's name, and where a copy
// lies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/placement.hpp"
#include "common/protocol.hpp"
#include "common/slot.hpp"
#include "rmastore/store.h"

namespace rmastore::internal {

struct Config {
  int replicas = 2;
  std::size_t initial_slot_size = 64;
  std::size_t capacity_hint = std::size_t{1} << 20;
  int node_id = -1;
  int helper_max_sleep_us = 1000;
  int detector = STORE_DETECTOR_NOTIFY;
  int recovery = STORE_RECOVERY_GLOBAL;
  std::string snapshot_dir;       // empty: no durable tier
  std::string snapshot_name;      // empty: none
  std::string snapshot_local_dir; // the local level, "%h" not yet replaced; empty: one level
  int snapshot_keep = 2;
  bool restore = false;
};

// Largest capacity_hint accepted: it sizes address space, and 1 TiB is far beyond any node.
inline constexpr std::size_t kMaxCapacityHint = std::size_t{1} << 40;

// A slot is named by a key and a namespace: the application's values, and internal records.
struct SlotId {
  std::uint64_t key;
  Ns ns;
  bool operator==(const SlotId &) const = default;
  bool operator<(const SlotId &o) const { return key != o.key ? key < o.key : ns < o.ns; }
};
struct SlotIdHash {
  std::size_t operator()(const SlotId &s) const { return mix64(s.key ^ (std::uint64_t(s.ns) << 56)); }
};
inline SlotId slot_of(const CtrlMsg &m) {
  return SlotId{m.key, static_cast<Ns>(m.ns)};
}

// One copy of a slot: its holder (current rank) and where its slot lies in the holder's window.
struct Copy {
  int holder = -1;
  std::uint64_t address = 0;
  std::uint64_t capacity = 0;
  std::uint64_t length_hint = 0; // the value's length when last seen: sizes a read's first fetch
  bool half_b = false;           // a double-buffered value is in the second half
};

} // namespace rmastore::internal
