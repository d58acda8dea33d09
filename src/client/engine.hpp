// The read/write engine both recovery variants share: asking holders and waiting for their
// replies, writing a value to its copies, and reading one copy. It decides nothing about which
// copies an operation uses; the variants do (global.hpp, localized.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "client/agent.hpp"
#include "client/key_cache.hpp"
#include "common/config.hpp"
#include "holder/holder.hpp"
#include "transport/membership.hpp"
#include "transport/runtime.hpp"

namespace rmastore::internal {

class Engine {
public:
  // `id`: this process's stable id.
  Engine(const Config &config, int id, Runtime &rt, const Membership &membership, Holder &holder, KeyCache &cache)
      : config_(config), id_(id), rt_(rt), membership_(membership), holder_(holder), cache_(cache) {}

  struct Ask {
    SlotId id;
    int holder; // current rank
    CtrlMsg msg;
  };
  // Sends each message to its holder's helper (Agent::post: MPI_Isend with kTagHelper, up to
  // kMaxPack messages to one holder in one, and the holder's doorbell), or serves it inline when this process is the
  // holder and can; waits (bounded by failure detection) for all replies, on the agent's reply_tag, and returns them in
  // order. Replies to earlier requests of the agent, which it stopped waiting for, are skipped.
  std::vector<CtrlMsg> ask_all(Agent &a, const std::vector<Ask> &asks);
  // ask_all of one message to each listed holder, installing grants and lookups into the cache.
  std::vector<CtrlMsg> request(Agent &a, const SlotId &id, const std::vector<int> &holders, const CtrlMsg &msg);

  // What a write does when a holder fails under it.
  enum class OnFailure {
    kThrow, // STORE_ERR_PROC_FAILED
    kSkip,  // the copy is left out; STORE_ERR_PROC_FAILED only when no copy is left
  };
  // Writes header `h` (with version, length, flags, epoch and writer filled in) and the value to
  // every copy in `copies`: this process's own copy by memcpy, the others by MPI_Rput (rma.hpp),
  // and returns once every write completed at its target. Returns the copies written, each with
  // the half its value is in now.
  std::vector<Copy> write_copies(Agent &a, const std::vector<Copy> &copies, SlotHeader h, const void *buf,
                                 OnFailure on_failure);
  // write_copies of many slots, overlapped: the puts of every in-place value go out before any
  // is waited for (double-buffered values follow one at a time). On return each job's copies
  // are those written. kSkip drops the copies on failed holders from every job, and throws only
  // if some job has none left. `between` runs before each job's writes but the first (a fault
  // point; by default batch.between_keys).
  struct WriteJob {
    std::vector<Copy> copies;
    SlotHeader header;
    const void *buf;
  };
  void write_many(Agent &a, std::vector<WriteJob> &jobs, OnFailure on_failure, void (*between)() = nullptr);
  // A header for a value this process writes now.
  SlotHeader header(std::uint64_t key, std::uint64_t version, std::size_t length, std::uint64_t flags) const;

  ReadResult read_remote(Agent &a, const SlotId &id, const Copy &copy, void *buf, std::size_t capacity,
                         std::size_t *len);
  // Reads the copy at `holder` (our own from memory; another's address looked up unless cached).
  ReadResult read_copy(Agent &a, const SlotId &id, int holder, void *buf, std::size_t capacity, std::size_t *len);
  // read_copy of many slots, overlapped: every missing lookup in one round, then every first
  // fetch (header, and the value when it fits) before any is waited for.
  struct ReadJob {
    SlotId id;
    int holder;
    void *buf;
    std::size_t capacity;
    std::size_t len = 0;
    ReadResult result = ReadResult::kRetry;
  };
  void read_many(Agent &a, std::vector<ReadJob> &jobs);
  // store_list: the keys in [first, last] that processes `ranks` keep (a value, a lost marker, a
  // record), merged: ascending, distinct, at most `limit`. `more`: some may have more.
  std::vector<std::uint64_t> list(Agent &a, std::uint64_t first, std::uint64_t last, std::size_t limit,
                                  const std::vector<int> &ranks, bool *more);
  // `type` (kWitness, kUnwitness or kWitnessQuery) about each key to each of its processes
  // (current ranks, this one included); returns whether any reply had kReplyLive.
  struct WitnessAsk {
    std::uint64_t key;
    std::vector<int> ranks;
  };
  bool tell_witnesses(Agent &a, MsgType type, const std::vector<WitnessAsk> &asks);
  // Records that the keys exist at their witnesses (kWitness), or drops the records (kUnwitness)
  // at every keeper, wherever a recovery or a repair may have left them, as `view` places them.
  // Through tell_witnesses: returns once every live witness replied.
  void record(Agent &a, MsgType type, const std::vector<std::uint64_t> &keys, const View &view);

private:
  // STORE_DETECTOR_PING: a message to each remote holder first, which fails if it is dead.
  void ping(const std::vector<Copy> &copies);
  // A remote read in two steps: the first fetch (the header, and as much of an in-place value as
  // the last read suggests and `capacity` allows) issued into `rs`; then, once it completed, the
  // checks and whatever else the copy needs. Returns the bytes of value the first fetch asks for.
  // With `scratch` (kHeaderBytes + kInPlaceLimit bytes), header and value come in one get into
  // it, which unpack_read then copies to *h and buf; without, in two gets straight to them.
  std::size_t start_read(RequestSet &rs, const Copy &copy, SlotHeader *h, void *buf, std::size_t capacity,
                         std::byte *scratch);
  static void unpack_read(const std::byte *scratch, std::size_t fetch, SlotHeader *h, void *buf);
  ReadResult finish_read(Agent &a, const SlotId &id, const Copy &copy, const SlotHeader &h, std::size_t fetched,
                         void *buf, std::size_t capacity, std::size_t *len);

  const Config &config_;
  const int id_;
  Runtime &rt_;
  const Membership &membership_;
  Holder &holder_;
  KeyCache &cache_;
};

} // namespace rmastore::internal
