#include "holder/grant_server.hpp"

#include <algorithm>

#include "common/errors.hpp"
#include "common/fault.hpp"

namespace rmastore::internal {
namespace {

bool contains(const std::vector<int> &v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

} // namespace

std::optional<CtrlMsg> GrantServer::serve(const CtrlMsg &msg, int source) {
  std::lock_guard lk(slots_.mutex());
  return serve_locked(msg, source, false);
}

std::optional<CtrlMsg> GrantServer::serve_inline(const CtrlMsg &msg, int self) {
  std::lock_guard lk(slots_.mutex());
  return serve_locked(msg, self, true);
}

std::optional<CtrlMsg> GrantServer::serve_locked(const CtrlMsg &msg, int source, bool inline_call) {
  const SlotId id = slot_of(msg);
  CtrlMsg refused;
  SlotAllocator::Block *block = slots_.find_or_create_locked(id, msg, &refused);
  if (block == nullptr) return refused;
  Grant &g = grants_[id];
  if (g.pending_acks > 0) {
    if (!inline_call) g.queued.push_back(Deferred{msg, source});
    return std::nullopt;
  }
  if (inline_call) {
    // The application thread may not wait on its own helper for acks: hand over if needed.
    const bool moves = msg.type == MsgType::kAcquireWrite && block->capacity < msg.length;
    const bool other_writer = msg.type == MsgType::kAcquireWrite && g.writer >= 0 && g.writer != source;
    if (other_writer || (moves && !g.readers.empty())) return std::nullopt;
  }
  return grant_or_defer_locked(id, *block, g, msg, source);
}

std::optional<CtrlMsg> GrantServer::grant_or_defer_locked(const SlotId &id, SlotAllocator::Block &block, Grant &g,
                                                          const CtrlMsg &msg, int source) {
  std::vector<int> invalidate;
  const CtrlMsg r = or_refusal(msg, [&] { return grant_locked(id, block, g, msg, source, invalidate); });
  if (r.status != ReplyStatus::kOk) return r;
  if (invalidate.empty()) {
    slots_.release_locked(g.retired);
    g.retired = {};
    return r;
  }
  g.pending_acks = static_cast<int>(invalidate.size());
  g.stashed_reply = std::make_unique<Deferred>(Deferred{r, source});
  for (int target : invalidate) {
    CtrlMsg inv;
    inv.type = MsgType::kInvalidate;
    inv.ns = msg.ns;
    inv.key = msg.key;
    inv.grant = r.grant - 1;
    send(target, kTagHelper, inv);
  }
  return std::nullopt;
}

CtrlMsg GrantServer::grant_locked(const SlotId &id, SlotAllocator::Block &block, Grant &g, const CtrlMsg &msg,
                                  int source, std::vector<int> &invalidate) {
  if (msg.type == MsgType::kAcquireWrite) {
    if (g.writer >= 0 && g.writer != source) invalidate.push_back(g.writer);
    if (block.capacity < msg.length) {
      // The slot moves. The old copy stays readable until every cached reader has let go, and
      // its value comes along so the key keeps its last complete value if the writer dies.
      g.retired = slots_.move_locked(id, block, msg.length);
      for (int reader : g.readers) {
        if (reader != source && !contains(invalidate, reader)) invalidate.push_back(reader);
      }
      g.readers.clear();
    }
    g.writer = source;
    g.writer_id = membership_.view()->ids[static_cast<std::size_t>(source)];
  } else if (!contains(g.readers, source)) {
    g.readers.push_back(source);
  }
  SlotHeader h;
  CtrlMsg r = copy_reply(msg, block, h);
  // A writer learns here whether the key's records exist already (witnesses.hpp); a reader
  // does not need to.
  if (msg.type == MsgType::kAcquireWrite &&
      classify_copy(h, block.base, block.capacity, msg.key, static_cast<Ns>(msg.ns)) == CopyState::kComplete)
    r.flags |= kReplyLive;
  r.grant = ++grant_clock_;
  return r;
}

void GrantServer::on_invalidate_ack(const CtrlMsg &msg) {
  std::lock_guard lk(slots_.mutex());
  const SlotId id = slot_of(msg);
  auto it = grants_.find(id);
  if (it == grants_.end() || it->second.pending_acks == 0) return;
  Grant &g = it->second;
  if (--g.pending_acks > 0) return;
  // Retire the old slot before the writer hears back: from then on a reader that still used
  // the old address sees the mark and looks again, instead of returning an outdated value.
  slots_.release_locked(g.retired);
  g.retired = {};
  send(g.stashed_reply->source, g.stashed_reply->msg.reply_tag, g.stashed_reply->msg);
  g.stashed_reply.reset();
  // The slot cannot have gone meanwhile: a reclaim leaves a slot with acks pending alone.
  if (SlotAllocator::Block *block = slots_.find_locked(id)) dispatch_queued_locked(id, *block, g);
}

void GrantServer::dispatch_queued_locked(const SlotId &id, SlotAllocator::Block &block, Grant &g) {
  while (g.pending_acks == 0 && !g.queued.empty()) {
    const Deferred d = g.queued.front();
    g.queued.erase(g.queued.begin());
    if (auto r = grant_or_defer_locked(id, block, g, d.msg, d.source)) send(d.source, d.msg.reply_tag, *r);
  }
}

void GrantServer::serve_reclaim(const CtrlMsg &msg, int source) {
  std::lock_guard lk(slots_.mutex());
  // Only what the deleter still holds alone: a writer that took a grant after the delete (its
  // request came first) keeps the slot, and writes over the tombstone.
  const auto alone = [&](const SlotId &id) {
    auto it = grants_.find(id);
    if (it == grants_.end()) return true;
    const Grant &g = it->second;
    return (g.writer < 0 || g.writer == source) && g.pending_acks == 0 && g.queued.empty();
  };
  const auto reclaim = [&](const SlotId &id) {
    slots_.erase_locked(id);
    grants_.erase(id);
  };
  const SlotId vid{msg.key, Ns::kValue}, pid{msg.key, Ns::kPending};
  if (const SlotAllocator::Block *block = slots_.find_locked(vid)) {
    const SlotHeader h = load_header(block->base);
    const bool tombstone = classify_copy(h, block->base, block->capacity, msg.key, Ns::kValue) == CopyState::kDeleted &&
                           h.version == msg.version;
    if (!tombstone || !alone(vid)) return;
    reclaim(vid);
  }
  if (slots_.find_locked(pid) != nullptr && alone(pid)) reclaim(pid);
}

// Numbering changed, and the writers and readers may be gone. A slot whose writer failed is
// moved to fresh memory and never reused, so data it sent before failing cannot land in memory
// given to someone else.
void GrantServer::reset() {
  std::lock_guard lk(slots_.mutex());
  const std::shared_ptr<const View> view = membership_.view(); // leaves the failed processes out
  for (auto &[id, g] : grants_) {
    if (g.retired.base != nullptr) slots_.retire_locked(g.retired);
    const bool failed_writer = g.writer_id >= 0 && view->rank_of_id[static_cast<std::size_t>(g.writer_id)] < 0;
    SlotAllocator::Block *block = slots_.find_locked(id);
    if (failed_writer && block != nullptr) slots_.quarantine_locked(id, *block, 0);
  }
  grants_.clear();
}

} // namespace rmastore::internal
