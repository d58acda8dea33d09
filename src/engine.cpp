#include "engine.hpp"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <optional>
#include <string>

#include "errors.hpp"
#include "fault.hpp"
#include "tsan.hpp"

namespace rmastore::internal {
namespace {

constexpr std::size_t kFirstReadBytes = 4096;

} // namespace

std::vector<CtrlMsg> Engine::ask_all(Agent &a, const std::vector<Ask> &asks) {
  a.flush();
  const std::size_t n = asks.size();
  std::vector<CtrlMsg> out(n), sent(n);
  std::vector<bool> answered(n, false);
  // Replies are matched to requests by number, not by which receive they land in: a holder
  // asked several times answers in order, but a reply to an earlier request this agent stopped
  // waiting for (a lock wait that started over) can come first and take any receive from it.
  std::deque<std::pair<int, CtrlMsg>> inbox; // (holder, reply); a deque keeps their addresses
  RequestSet rs(&a);                         // declared after the buffers: on unwinding it waits before they go
  const auto receive = [&](int holder) {
    auto &[from, reply] = inbox.emplace_back(holder, CtrlMsg{});
    MPI_Request rr;
    check_mpi(MPI_Irecv(&reply, sizeof(CtrlMsg), MPI_BYTE, from, a.reply_tag, rt_.ctrl, &rr), "MPI_Irecv");
    rs.add(rr, from, RequestSet::Kind::kRecv, sizeof(CtrlMsg));
  };
  for (std::size_t i = 0; i < n; ++i) {
    sent[i] = asks[i].msg;
    sent[i].ns = static_cast<std::uint32_t>(asks[i].id.ns);
    sent[i].key = asks[i].id.key;
    sent[i].request = a.next_request++;
    sent[i].reply_tag = a.reply_tag;
    if (asks[i].holder == rt_.rank && sent[i].type != MsgType::kRegister) {
      if (std::optional<CtrlMsg> r = table_.serve_inline(sent[i], rt_.rank)) {
        out[i] = *r;
        answered[i] = true;
        continue;
      }
    }
    receive(asks[i].holder);
    // Sent from the agent's outbox, which keeps the message for as long as MPI may read it: a
    // wait that gives up (a lock wait that starts over) leaves the send behind. A send to a
    // failed holder is dropped; its receive reports the failure.
    a.post(asks[i].holder, sent[i]);
    ++a.requests_sent;
  }
  for (std::size_t next = 0; next < inbox.size();) {
    rs.wait_all();
    replies_received();
    for (const std::size_t end = inbox.size(); next < end; ++next) {
      const auto &[from, reply] = inbox[next];
      std::size_t i = 0;
      while (i < n && (answered[i] || asks[i].holder != from || sent[i].request != reply.request)) ++i;
      if (i < n) {
        out[i] = reply;
        answered[i] = true;
        continue;
      }
      if (reply.type != MsgType::kReply || reply.request >= a.next_request) {
        throw StoreError(STORE_ERR_INTERNAL, "control reply does not match any request");
      }
      RMASTORE_TRACE("agent %d drops stale reply #%llu from %d", a.kind, (unsigned long long)reply.request, from);
      receive(from); // the reply this receive was meant for is still to come
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!answered[i] || out[i].type != MsgType::kReply) {
      throw StoreError(STORE_ERR_INTERNAL,
                       "control reply does not match its request (holder " + std::to_string(asks[i].holder) +
                           ", request type " + std::to_string(static_cast<unsigned>(sent[i].type)) + " #" +
                           std::to_string(sent[i].request) + (answered[i] ? ", answered with type " : ", unanswered") +
                           (answered[i] ? std::to_string(static_cast<unsigned>(out[i].type)) : std::string()) + ")");
    }
    if (out[i].status == ReplyStatus::kError)
      throw StoreError(STORE_ERR_INTERNAL, "a holder could not serve a request");
  }
  return out;
}

std::vector<CtrlMsg> Engine::request(Agent &a, const SlotId &id, const std::vector<int> &holders, const CtrlMsg &msg) {
  std::vector<Ask> asks;
  for (int h : holders) asks.push_back(Ask{id, h, msg});
  std::vector<CtrlMsg> out = ask_all(a, asks);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i].status == ReplyStatus::kOk && (msg.type == MsgType::kAcquireWrite || msg.type == MsgType::kLookup)) {
      cache_.install(id, holders[i], out[i], msg.type == MsgType::kAcquireWrite);
    }
  }
  return out;
}

void Engine::announce(Agent &a, std::uint64_t key, const std::vector<int> &others) {
  CtrlMsg m;
  m.type = MsgType::kRegister;
  request(a, SlotId{key, Ns::kValue}, others, m);
}

void Engine::ping(const std::vector<Copy> &copies) {
  if (config_.detector != STORE_DETECTOR_PING) return;
  for (const Copy &c : copies) {
    if (c.holder == rt_.rank) continue;
    char ping = 0;
    const int rc = MPI_Send(&ping, 1, MPI_BYTE, c.holder, kTagPing, rt_.ctrl);
    if (is_failure_error(rc)) {
      absorb_failures(rt_.ctrl, *rt_.failures);
      throw StoreError(STORE_ERR_PROC_FAILED, "ping to a holder failed");
    }
    check_mpi(rc, "MPI_Send");
  }
}

SlotHeader Engine::header(std::uint64_t key, std::uint64_t version, std::size_t length, std::uint64_t flags) const {
  SlotHeader h{};
  h.key = key;
  h.version = version;
  h.length = length;
  h.flags = flags;
  h.epoch = rt_.epoch;
  h.writer = static_cast<std::uint32_t>(id_);
  return h;
}

std::vector<Copy> Engine::write_copies(Agent &a, const std::vector<Copy> &copies, SlotHeader h, const void *buf,
                                       OnFailure on_failure) {
  const std::size_t len = h.length;
  std::vector<Copy> hcs = copies;
  std::vector<bool> half_b(hcs.size(), false);
  ping(hcs);
  RequestSet rs(&a);
  // Waits for the copies written so far. kSkip: copies on processes that failed are dropped
  // from the rest of the protocol; an error if none is left.
  const auto complete = [&] {
    try {
      rs.wait_all();
    } catch (const StoreError &e) {
      if (on_failure != OnFailure::kSkip || e.status() != STORE_ERR_PROC_FAILED || rt_.failures->revoked()) throw;
      for (std::size_t i = hcs.size(); i-- > 0;) {
        if (!rt_.failures->dead(hcs[i].holder)) continue;
        hcs.erase(hcs.begin() + static_cast<std::ptrdiff_t>(i));
        half_b.erase(half_b.begin() + static_cast<std::ptrdiff_t>(i));
      }
      if (hcs.empty()) throw;
    }
  };
  // Writes `bytes` at `offset` of one copy: a remote one by RMA, our own by memcpy.
  const auto write = [&](const Copy &c, std::size_t offset, const void *src, std::size_t bytes) {
    if (c.holder == rt_.rank) {
      copy_to_window(reinterpret_cast<std::byte *>(c.address) + offset, src, bytes);
      std::atomic_thread_fence(std::memory_order_release);
    } else if (bytes > 0) {
      rs.put(*rt_.window, c.holder, static_cast<MPI_Aint>(c.address + offset), src, bytes);
    }
  };
  if (in_place(len)) {
    // One put per copy: header and value side by side in a staging buffer.
    h.checksum = slot_checksum(h, buf);
    std::byte *staging = a.staging.data();
    std::memcpy(staging, reinterpret_cast<const std::byte *>(&h) + kWriterOffset, kWriterBytes);
    if (len > 0) std::memcpy(staging + kWriterBytes, buf, len);
    if (RMASTORE_FAULT_ARMED("put.stale")) {
      // Test build: this process dies with its write to every copy unsent; the test lands the
      // write after the recovery, as a delayed put would.
      const std::shared_ptr<const View> view = membership_.view();
      for (const Copy &c : hcs) {
        fault_save_write(view->ids[static_cast<std::size_t>(c.holder)], c.address + kWriterOffset, staging,
                         kWriterBytes + len);
      }
      raise(SIGKILL);
    }
    for (std::size_t i = 0; i < hcs.size(); ++i) {
      if (i > 0) RMASTORE_FAULT_POINT("put.between_copies");
      write(hcs[i], kWriterOffset, staging, kWriterBytes + len);
    }
    complete();
    for (std::size_t i = 0; i < hcs.size(); ++i) hcs[i].half_b = false;
  } else {
    // The value goes to the half each copy's header does not point to; only when every copy
    // has it do the headers switch over.
    for (std::size_t i = 0; i < hcs.size(); ++i) {
      if (i > 0) RMASTORE_FAULT_POINT("put.between_copies");
      half_b[i] = !hcs[i].half_b;
      write(hcs[i], kHeaderBytes + (half_b[i] ? hcs[i].capacity : 0), buf, len);
    }
    complete();
    RMASTORE_FAULT_POINT("put.before_switch");
    SlotHeader ha = h, hb = h;
    hb.flags |= kFlagHalfB;
    ha.checksum = header_checksum(ha);
    hb.checksum = header_checksum(hb);
    for (std::size_t i = 0; i < hcs.size(); ++i) {
      const SlotHeader &hh = half_b[i] ? hb : ha;
      write(hcs[i], kWriterOffset, reinterpret_cast<const std::byte *>(&hh) + kWriterOffset, kWriterBytes);
    }
    complete();
    for (std::size_t i = 0; i < hcs.size(); ++i) hcs[i].half_b = half_b[i];
  }
  return hcs;
}

ReadResult Engine::read_remote(Agent &a, const SlotId &id, const Copy &hc, void *buf, std::size_t capacity,
                               std::size_t *len) {
  const std::uint64_t key = id.key;
  const MPI_Aint header_at = static_cast<MPI_Aint>(hc.address);
  // An in-place value is fetched with its header in one round trip (guessing its length from
  // the last read); a double-buffered one must be read after its header, which says where.
  std::size_t fetch = 0;
  if (in_place(hc.length_hint)) {
    fetch = std::min<std::size_t>({capacity, static_cast<std::size_t>(hc.capacity),
                                   std::max<std::size_t>(hc.length_hint, kFirstReadBytes), kInPlaceLimit});
  }
  SlotHeader h;
  RequestSet rs(&a);
  ping({hc});
  rs.get(*rt_.window, hc.holder, header_at, &h, sizeof h);
  if (fetch > 0) rs.get(*rt_.window, hc.holder, header_at + static_cast<MPI_Aint>(kHeaderBytes), buf, fetch);
  rs.wait_all();
  if (h.owner == kSlotRetired || h.capacity != hc.capacity) return ReadResult::kStale;
  // Another key's slot: ours moved away and the slot was reused. Look the key up again.
  if (h.key != key || flags_ns(h.flags) != id.ns) return ReadResult::kStale;
  if (slot_empty(h)) return ReadResult::kNotFound;
  if (slot_lost(h)) return ReadResult::kLost;
  if (h.version == kNoVersion || h.length > h.capacity) return ReadResult::kRetry;

  if (!in_place(h.length)) {
    SlotHeader again;
    if (h.length <= capacity) {
      rs.get(*rt_.window, hc.holder, header_at + static_cast<MPI_Aint>(value_offset(h, hc.capacity)), buf, h.length);
      rs.wait_all();
    }
    rs.get(*rt_.window, hc.holder, header_at, &again, sizeof again);
    rs.wait_all();
    if (!buffered_valid(h, again)) return ReadResult::kRetry;
    *len = h.length;
    return h.length > capacity ? ReadResult::kTruncated : ReadResult::kOk;
  }

  std::byte tmp[kInPlaceLimit];
  std::byte *dst = static_cast<std::byte *>(buf);
  std::size_t have = fetch;
  if (h.length > capacity) {
    dst = tmp; // the checksum needs all of it
    have = 0;
  }
  if (h.length > have) {
    rs.get(*rt_.window, hc.holder, header_at + static_cast<MPI_Aint>(kHeaderBytes + have), dst + have, h.length - have);
    rs.wait_all();
  }
  if (!slot_valid(h, dst)) return ReadResult::kRetry;
  *len = h.length;
  return h.length > capacity ? ReadResult::kTruncated : ReadResult::kOk;
}

ReadResult Engine::read_copy(Agent &a, const SlotId &id, int holder, void *buf, std::size_t capacity,
                             std::size_t *len) {
  if (holder == rt_.rank) return table_.read_local(id, buf, capacity, len);
  HolderCache hc = cache_.at(id, holder);
  if (!hc.can_read) {
    CtrlMsg m;
    m.type = MsgType::kLookup;
    // The reply is used for this read even if an invalidation overtook it (then it is not
    // cached): a moved slot is marked retired, which the read below detects.
    const CtrlMsg reply = request(a, id, {holder}, m).front();
    if (reply.status == ReplyStatus::kNotFound) return ReadResult::kNotFound;
    if (reply.status != ReplyStatus::kOk) throw StoreError(STORE_ERR_INTERNAL, "lookup failed");
    hc.holder = holder;
    hc.address = reply.address;
    hc.capacity = reply.capacity;
    hc.length_hint = reply.length;
  }
  const ReadResult r = read_remote(a, id, hc, buf, capacity, len);
  if (r == ReadResult::kStale) cache_.after_read(id, holder, hc.address, true, 0);
  if (r == ReadResult::kOk) cache_.after_read(id, holder, hc.address, false, *len);
  return r;
}

} // namespace rmastore::internal
