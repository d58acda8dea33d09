// Control messages between processes: requests to a holder's helper thread, its replies to the
// requesting agent (the application thread, or the localized variant's repair thread), and cache
// invalidations between helper threads.
//
// Tags separate the receivers on the control communicator: helpers receive kTagHelper from any
// source; an agent receives its replies on its own tag (the request's reply_tag), from the
// holders it is waiting on.
#pragma once

#include <cstdint>
#include <new>

#include "common/errors.hpp"

namespace rmastore::internal {

inline constexpr int kTagHelper = 1;
inline constexpr int kTagReply = 2;       // replies to the application thread
inline constexpr int kTagPing = 3;        // STORE_DETECTOR_PING only
inline constexpr int kTagRepairReply = 4; // replies to the repair thread (localized variant)
inline constexpr int kTagList = 5;        // replies to kList: {request, n, n keys}

enum class MsgType : std::uint32_t {
  // app -> holder helper: make the sender the key's writer, with a slot of >= `length` bytes.
  kAcquireWrite = 1,
  // app -> holder helper: where is the key's copy? (registers the sender as a cached reader)
  kLookup = 2,
  // holder helper -> cacher helper: forget cached addresses of `key` at the sender up to `grant`.
  kInvalidate = 3,
  // cacher helper -> holder helper: done.
  kInvalidateAck = 4,
  // holder helper -> app: answer to kAcquireWrite, kLookup, kLock or a witness request.
  kReply = 5,
  // writer or repairer -> witness helper: keep a record that `key` exists (witnesses.hpp).
  // Answered with kReply on the requester's reply_tag, as are kUnwitness and kWitnessQuery.
  kWitness = 6,
  // Localized variant (locks.cpp, repair.cpp):
  // locker -> holder helper: take the slot's lock for `owner`, with a slot of >= `length` bytes.
  // Answered with kReply when granted (kBusy for a kTry request that would have to wait).
  kLock = 7,
  // locker -> holder helper: release the lock `owner` holds, or withdraw its queued request.
  kUnlock = 8,
  // holder helper -> coordinator helper: the slot's lock holder failed; repair the key.
  kRepairNeeded = 9,
  // coordinator repair thread -> every helper: every copy of `key` was lost.
  kLost = 10,
  // deleter or repairer -> witness helper: drop the record of `key`.
  kUnwitness = 11,
  // reader or repairer -> witness helper: is there a record of `key`? (kReplyLive if so)
  kWitnessQuery = 12,
  // global deleter -> holder helper: free the slots of `key` if they still hold its tombstone of
  // `version` and no other writer took them meanwhile. No reply.
  kReclaim = 13,
  // app -> every helper: the keys in [key, version] this process keeps (a value, a lost marker or
  // a record), at most `length` of them, smallest first. Answered on kTagList.
  kList = 14,
  // holder helper -> lock owner's helper: another locker waits for the lock `owner` holds on the
  // slot; release it if it is only cached (locks.hpp). No reply.
  kRevoke = 15,
};

enum class ReplyStatus : std::uint32_t { kOk = 0, kNotFound = 1, kNoMemory = 2, kError = 3, kBusy = 4 };

// CtrlMsg::flags of kLock and kUnlock requests.
inline constexpr std::uint32_t kLockTry = 1;           // answer kBusy rather than queue
inline constexpr std::uint32_t kLockRepair = 2;        // a repair: may take over a failed holder's lock
inline constexpr std::uint32_t kLockPending = 4;       // also make a pending slot of >= `length` bytes
inline constexpr std::uint32_t kUnlockDropPending = 8; // free the key's pending slot
// CtrlMsg::flags of a kLock reply.
inline constexpr std::uint32_t kReplyValid = 1;        // the value copy is complete and untorn
inline constexpr std::uint32_t kReplyLost = 2;         // the copy is a "lost" marker
inline constexpr std::uint32_t kReplyHasPending = 4;   // the pending_* fields describe one
inline constexpr std::uint32_t kReplyPendingValid = 8; // ... that is complete and untorn
inline constexpr std::uint32_t kReplyBroken = 16;      // the lock was taken from a failed holder
// CtrlMsg::flags of a kReply to kAcquireWrite or kLock: the copy holds a complete value (not
// empty, lost, deleted or torn), so its key is recorded at its witnesses already (witnesses.hpp).
// Of a kReply to kWitnessQuery: the witness has a record of the key.
inline constexpr std::uint32_t kReplyLive = 32;
// Of a kReply to kLock: the value copy, or the pending one, is a tombstone (store_delete).
inline constexpr std::uint32_t kReplyDeleted = 64;
inline constexpr std::uint32_t kReplyPendingDeleted = 128;
// CtrlMsg::flags of kAcquireWrite and kLock requests: make no slot; a holder without one answers
// kNotFound (a delete has nothing to do there).
inline constexpr std::uint32_t kRequestNoCreate = 16;
// CtrlMsg::flags of a kUnlock: the key was deleted; free its slots unless a locker waits.
inline constexpr std::uint32_t kUnlockReclaim = 32;

struct CtrlMsg {
  MsgType type{};
  ReplyStatus status = ReplyStatus::kOk;
  std::uint32_t ns = 0;   // Ns of the slot
  std::uint32_t half = 0; // kReply: 1 if the copy's value is in the second half
  std::uint64_t key = 0;
  std::uint64_t length = 0;   // kAcquireWrite: needed capacity. kReply: the copy's value length.
  std::uint64_t address = 0;  // kReply: address of the slot header in the holder's memory.
  std::uint64_t capacity = 0; // kReply: value capacity of the slot.
  std::uint64_t version = 0;  // kReply: the copy's version.
  std::uint64_t grant = 0;    // kReply: grant number; kInvalidate: highest grant to forget.
  std::uint64_t request = 0;  // echoed in the reply, to tell stale replies from current ones.
  // Localized variant.
  std::uint64_t owner = 0; // kLock, kUnlock: the requester's lock word
  std::uint32_t flags = 0;
  std::int32_t reply_tag = kTagReply; // a request: where its (possibly deferred) reply goes
  std::uint32_t writer = 0;           // kReply to kLock: stable id in the copy's header
  std::uint32_t pending_half = 0;     // kReply to kLock: the pending slot, as for the value
  std::uint64_t pending_address = 0;
  std::uint64_t pending_capacity = 0;
  std::uint64_t pending_version = 0;
  std::uint64_t pending_length = 0;
  std::uint64_t pending_tx = 0;
  std::uint32_t pending_writer = 0; // the committer
  std::uint32_t reserved = 0;
};

// A control message on the wire is an array of 1 to kMaxPack CtrlMsgs: an agent packs its
// requests to one holder into as few messages as it can (a batch of 512 keys would otherwise
// cost a message each, served one at a time), and a helper answers what it served from one
// message in one message. Receivers post buffers of kMaxPack entries with type 0 and read
// entries up to the first that is still 0 (MsgType starts at 1). 28 entries (4,032 bytes) keep a
// full message under Open MPI's shared-memory eager limit (btl_sm_eager_limit, 4,096 bytes with
// its header): 32 made every full message a rendezvous, one more exchange.
inline constexpr std::size_t kMaxPack = 28;
static_assert(kMaxPack * sizeof(CtrlMsg) <= 4096 - 64, "a full control message must stay eager over shared memory");

// A reply to `msg`: it names the same slot, echoes the request number and keeps the tag it is
// sent on, so that a reply deferred by its holder still finds its agent.
inline CtrlMsg reply_to(const CtrlMsg &msg, ReplyStatus status = ReplyStatus::kOk) {
  CtrlMsg r;
  r.type = MsgType::kReply;
  r.status = status;
  r.ns = msg.ns;
  r.key = msg.key;
  r.request = msg.request;
  r.reply_tag = msg.reply_tag;
  return r;
}

// A grant that needs memory the holder cannot get (allocation, or the window refused another
// region) is answered with a kNoMemory reply instead.
template <class Grant> CtrlMsg or_refusal(const CtrlMsg &msg, Grant grant) {
  try {
    return grant();
  } catch (const std::bad_alloc &) {
    return reply_to(msg, ReplyStatus::kNoMemory);
  } catch (const StoreError &) {
    return reply_to(msg, ReplyStatus::kNoMemory);
  }
}

} // namespace rmastore::internal
