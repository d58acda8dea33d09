#include "holder/holder.hpp"

#include <algorithm>

namespace rmastore::internal {

bool Holder::serve(const CtrlMsg &msg, int source) {
  switch (msg.type) {
  case MsgType::kAcquireWrite:
  case MsgType::kLookup:
    if (auto reply = grants.serve(msg, source)) rt_.helper->send(source, msg.reply_tag, *reply);
    return true;
  case MsgType::kInvalidateAck:
    grants.on_invalidate_ack(msg);
    return true;
  case MsgType::kReclaim:
    grants.serve_reclaim(msg, source);
    return true;
  case MsgType::kLock:
    if (auto reply = locks.serve(msg, source)) rt_.helper->send(source, msg.reply_tag, *reply);
    return true;
  case MsgType::kUnlock:
    locks.serve_unlock(msg);
    return true;
  case MsgType::kWitness:
  case MsgType::kUnwitness:
  case MsgType::kWitnessQuery:
    rt_.helper->send(source, msg.reply_tag, witnesses.serve(msg));
    return true;
  case MsgType::kList: {
    const std::vector<std::uint64_t> keys = local_keys(msg.key, msg.version, msg.length);
    std::vector<std::uint64_t> words{msg.request, keys.size()};
    words.insert(words.end(), keys.begin(), keys.end());
    rt_.helper->send_words(source, kTagList, std::move(words));
    return true;
  }
  default:
    return false;
  }
}

std::optional<CtrlMsg> Holder::serve_inline(const CtrlMsg &msg, int self) {
  if (Witnesses::is_request(msg.type)) return witnesses.serve(msg);
  if (msg.type == MsgType::kLock) return locks.serve_inline(msg, self);
  return grants.serve_inline(msg, self);
}

std::vector<std::uint64_t> Holder::local_keys(std::uint64_t first, std::uint64_t last, std::size_t limit) const {
  std::vector<std::uint64_t> keys = slots.keys_in(first, last, limit);
  const std::vector<std::uint64_t> recorded = witnesses.keys_in(first, last, limit);
  keys.insert(keys.end(), recorded.begin(), recorded.end());
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  if (keys.size() > limit) keys.resize(limit);
  return keys;
}

} // namespace rmastore::internal
