// Control messages between processes: slot requests to a holder's helper thread, its replies to
// the requesting application thread, and cache invalidations between helper threads.
//
// Tags separate the two receivers on the control communicator: helpers receive kTagHelper from
// any source; an application thread receives kTagReply from the one holder it is waiting on.
#pragma once

#include <cstdint>

namespace rmastore::internal {

inline constexpr int kTagHelper = 1;
inline constexpr int kTagReply = 2;
inline constexpr int kTagPing = 3; // STORE_DETECTOR_PING only

enum class MsgType : std::uint32_t {
  // app -> holder helper: make the sender the key's writer, with a slot of >= `length` bytes.
  kAcquireWrite = 1,
  // app -> holder helper: where is the key's copy? (registers the sender as a cached reader)
  kLookup = 2,
  // holder helper -> cacher helper: forget cached addresses of `key` at the sender up to `grant`.
  kInvalidate = 3,
  // cacher helper -> holder helper: done.
  kInvalidateAck = 4,
  // holder helper -> app: answer to kAcquireWrite, kLookup or kRegister.
  kReply = 5,
  // app -> every helper: `key` exists (its first put is under way). Answered with kReply.
  kRegister = 6,
};

enum class ReplyStatus : std::uint32_t { kOk = 0, kNotFound = 1, kNoMemory = 2, kError = 3 };

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
  std::uint64_t request = 0;  // echoed in the reply, to catch protocol mix-ups.
};

} // namespace rmastore::internal
