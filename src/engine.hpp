// The read/write engine both recovery variants share: asking holders and waiting for their
// replies, writing a value to its copies, and reading one copy. It decides nothing about which
// copies an operation uses; the variants do (global.hpp, localized.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "agent.hpp"
#include "config.hpp"
#include "key_cache.hpp"
#include "membership.hpp"
#include "runtime.hpp"
#include "slot_table.hpp"

namespace rmastore::internal {

class Engine {
public:
  // `id`: this process's stable id.
  Engine(const Config &config, int id, Runtime &rt, const Membership &membership, SlotTable &table, KeyCache &cache)
      : config_(config), id_(id), rt_(rt), membership_(membership), table_(table), cache_(cache) {}

  // Sends each message to its holder's helper (served inline for this process when possible)
  // and waits for all replies, which it returns in order. Replies to earlier requests of the
  // agent, which it stopped waiting for, are skipped.
  struct Ask {
    SlotId id;
    int holder; // current rank
    CtrlMsg msg;
  };
  std::vector<CtrlMsg> ask_all(Agent &a, const std::vector<Ask> &asks);
  // ask_all of one message to each listed holder, installing grants and lookups into the cache.
  std::vector<CtrlMsg> request(Agent &a, const SlotId &id, const std::vector<int> &holders, const CtrlMsg &msg);

  // What a write does when a holder fails under it.
  enum class OnFailure {
    kThrow, // STORE_ERR_PROC_FAILED
    kSkip,  // the copy is left out; STORE_ERR_PROC_FAILED only when no copy is left
  };
  // Writes header `h` (with version, length, flags, epoch and writer filled in) and the value to
  // every copy in `copies`. Returns the copies written, each with the half its value is in now.
  std::vector<Copy> write_copies(Agent &a, const std::vector<Copy> &copies, SlotHeader h, const void *buf,
                                 OnFailure on_failure);
  // A header for a value this process writes now.
  SlotHeader header(std::uint64_t key, std::uint64_t version, std::size_t length, std::uint64_t flags) const;

  ReadResult read_remote(Agent &a, const SlotId &id, const Copy &copy, void *buf, std::size_t capacity,
                         std::size_t *len);
  // Reads the copy at `holder` (our own from memory; another's address looked up unless cached).
  ReadResult read_copy(Agent &a, const SlotId &id, int holder, void *buf, std::size_t capacity, std::size_t *len);
  // kRegister to every process in `others`: they learn that `key` exists.
  void announce(Agent &a, std::uint64_t key, const std::vector<int> &others);

private:
  // STORE_DETECTOR_PING: a message to each remote holder first, which fails if it is dead.
  void ping(const std::vector<Copy> &copies);

  const Config &config_;
  const int id_;
  Runtime &rt_;
  const Membership &membership_;
  SlotTable &table_;
  KeyCache &cache_;
};

} // namespace rmastore::internal
