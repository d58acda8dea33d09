#include "client/engine.hpp"

#include <signal.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include "common/errors.hpp"
#include "common/fault.hpp"
#include "common/tsan.hpp"

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
  // answers a message's requests in one message, and later ones it had to defer one by one; and
  // a reply to an earlier request this agent stopped waiting for (a lock wait that started over)
  // can come first and take any receive from it.
  struct Received {
    int holder;
    std::array<CtrlMsg, kMaxPack> msgs;
  };
  std::deque<Received> inbox;      // a deque keeps their addresses
  std::map<int, std::size_t> owed; // holder -> replies still to come from it
  RequestSet rs(&a);               // declared after the buffers: on unwinding it waits before they go
  const auto receive = [&](int holder) {
    Received &r = inbox.emplace_back();
    r.holder = holder;
    for (CtrlMsg &m : r.msgs) m.type = MsgType{};
    MPI_Request rr;
    check_mpi(MPI_Irecv(r.msgs.data(), static_cast<int>(sizeof r.msgs), MPI_BYTE, holder, a.reply_tag, rt_.ctrl, &rr),
              "MPI_Irecv");
    rs.add(rr, holder, RequestSet::Kind::kRecv, sizeof r.msgs);
  };
  std::map<int, std::vector<CtrlMsg>> to; // holder -> its requests, in order
  for (std::size_t i = 0; i < n; ++i) {
    sent[i] = asks[i].msg;
    sent[i].ns = static_cast<std::uint32_t>(asks[i].id.ns);
    sent[i].key = asks[i].id.key;
    sent[i].request = a.next_request++;
    sent[i].reply_tag = a.reply_tag;
    if (asks[i].holder == rt_.rank) {
      if (std::optional<CtrlMsg> r = holder_.serve_inline(sent[i], rt_.rank)) {
        out[i] = *r;
        answered[i] = true;
        continue;
      }
    }
    to[asks[i].holder].push_back(sent[i]);
  }
  for (const auto &[holder, msgs] : to) {
    owed[holder] = msgs.size();
    for (std::size_t first = 0; first < msgs.size(); first += kMaxPack) {
      // Each message brings at least one message back: the replies to what was served at once,
      // or, if the holder deferred all of them, the first of those.
      receive(holder);
      // Sent from the agent's outbox, which keeps the message for as long as MPI may read it: a
      // wait that gives up (a lock wait that starts over) leaves the send behind. A send to a
      // failed holder is dropped; its receive reports the failure.
      a.post(holder, msgs.data() + first, std::min(kMaxPack, msgs.size() - first));
      ++a.requests_sent;
    }
  }
  for (std::size_t next = 0; next < inbox.size();) {
    rs.wait_all();
    replies_received();
    for (const std::size_t end = inbox.size(); next < end; ++next) {
      const Received &r = inbox[next];
      for (const CtrlMsg &reply : r.msgs) {
        if (reply.type == MsgType{}) break;
        // This call numbered its requests consecutively: a reply names its ask directly (a scan
        // made a batch of k keys cost O(k^2)).
        const std::uint64_t i = reply.request - sent.front().request; // an older one wraps out of range
        if (i < n && !answered[i] && asks[i].holder == r.holder && sent[i].request == reply.request) {
          out[i] = reply;
          answered[i] = true;
          --owed[r.holder];
          continue;
        }
        if (reply.type != MsgType::kReply || reply.request >= a.next_request) {
          throw StoreError(STORE_ERR_INTERNAL, "control reply does not match any request");
        }
        RMASTORE_TRACE("agent %d drops stale reply #%llu from %d", a.kind, (unsigned long long)reply.request, r.holder);
      }
    }
    // Replies still owed (deferred ones, or the ones stale replies took the receive of) come in
    // messages of their own: one more receive each round until none is owed.
    for (const auto &[holder, left] : owed) {
      if (left > 0) receive(holder);
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

void Engine::record(Agent &a, MsgType type, const std::vector<std::uint64_t> &keys, const View &view) {
  if (keys.empty()) return;
  std::vector<WitnessAsk> asks;
  asks.reserve(keys.size());
  for (std::uint64_t key : keys)
    asks.push_back(WitnessAsk{key, type == MsgType::kWitness ? view.witnesses_of(key) : view.keepers_of(key)});
  tell_witnesses(a, type, asks);
}

bool Engine::tell_witnesses(Agent &a, MsgType type, const std::vector<WitnessAsk> &asks) {
  std::vector<Ask> all;
  CtrlMsg m;
  m.type = type;
  for (const WitnessAsk &w : asks) {
    for (int rank : w.ranks) all.push_back(Ask{SlotId{w.key, Ns::kValue}, rank, m});
  }
  if (all.empty()) return false;
  bool live = false;
  for (const CtrlMsg &r : ask_all(a, all)) live = live || (r.flags & kReplyLive) != 0;
  return live;
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
    // The headers' checksums are computed while the value is on its way.
    SlotHeader ha = h, hb = h;
    if (summed_length(len)) ha.flags |= kFlagSummed;
    hb.flags = ha.flags | kFlagHalfB;
    if (slot_summed(ha)) {
      const std::uint64_t sum = value_sum(buf, len);
      ha.checksum = slot_checksum_of_sum(ha, sum);
      hb.checksum = slot_checksum_of_sum(hb, sum);
    } else {
      ha.checksum = header_checksum(ha);
      hb.checksum = header_checksum(hb);
    }
    complete();
    RMASTORE_FAULT_POINT("put.before_switch");
    for (std::size_t i = 0; i < hcs.size(); ++i) {
      const SlotHeader &hh = half_b[i] ? hb : ha;
      write(hcs[i], kWriterOffset, reinterpret_cast<const std::byte *>(&hh) + kWriterOffset, kWriterBytes);
    }
    complete();
    for (std::size_t i = 0; i < hcs.size(); ++i) hcs[i].half_b = half_b[i];
  }
  return hcs;
}

std::vector<std::uint64_t> Engine::list(Agent &a, std::uint64_t first, std::uint64_t last, std::size_t limit,
                                        const std::vector<int> &ranks, bool *more) {
  a.flush();
  std::vector<std::uint64_t> all = holder_.local_keys(first, last, limit);
  bool full = all.size() >= limit;
  const std::uint64_t request = a.next_request++;
  std::vector<std::vector<std::uint64_t>> replies;
  replies.reserve(ranks.size());
  {
    RequestSet rs(&a); // after the buffers: on unwinding it waits before they go
    for (int r : ranks) {
      if (r == rt_.rank) continue;
      std::vector<std::uint64_t> &buf = replies.emplace_back(limit + 2, 0);
      MPI_Request rr;
      check_mpi(MPI_Irecv(buf.data(), static_cast<int>(buf.size()), MPI_UINT64_T, r, kTagList, rt_.ctrl, &rr),
                "MPI_Irecv");
      rs.add(rr, r, RequestSet::Kind::kRecv, buf.size() * 8);
      CtrlMsg m;
      m.type = MsgType::kList;
      m.key = first;
      m.version = last;
      m.length = limit;
      m.request = request;
      m.reply_tag = kTagList;
      a.post(r, m);
      ++a.requests_sent;
    }
    rs.wait_all();
  }
  for (const std::vector<std::uint64_t> &buf : replies) {
    // Every reply to a list this agent gave up on went to a process it then knew dead, or came
    // after a revocation: what arrives now answers this request.
    if (buf[0] != request || buf[1] > limit)
      throw StoreError(STORE_ERR_INTERNAL, "list reply does not match its request");
    all.insert(all.end(), buf.begin() + 2, buf.begin() + 2 + static_cast<std::ptrdiff_t>(buf[1]));
    full = full || buf[1] >= limit;
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  if (all.size() > limit) all.resize(limit);
  // A process that answered `limit` keys may have more after them.
  *more = (full || all.size() >= limit) && !all.empty() && all.back() < last;
  return all;
}

void Engine::write_many(Agent &a, std::vector<WriteJob> &jobs, OnFailure on_failure, void (*between)()) {
  bool started = false;
  const auto next = [&] {
    if (started) {
      if (between != nullptr) {
        between();
      } else {
        RMASTORE_FAULT_POINT("batch.between_keys");
      }
    }
    started = true;
  };
  std::vector<std::vector<std::byte>> staging(jobs.size());
  {
    RequestSet rs(&a);
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      WriteJob &job = jobs[j];
      SlotHeader &h = job.header;
      if (!in_place(h.length)) continue;
      ping(job.copies);
      h.checksum = slot_checksum(h, job.buf);
      std::vector<std::byte> &st = staging[j];
      st.resize(kWriterBytes + h.length);
      std::memcpy(st.data(), reinterpret_cast<const std::byte *>(&h) + kWriterOffset, kWriterBytes);
      if (h.length > 0) std::memcpy(st.data() + kWriterBytes, job.buf, h.length);
      next();
      bool first_copy = true;
      for (Copy &c : job.copies) {
        if (!first_copy) RMASTORE_FAULT_POINT("put.between_copies");
        first_copy = false;
        c.half_b = false;
        if (c.holder == rt_.rank) {
          copy_to_window(reinterpret_cast<std::byte *>(c.address) + kWriterOffset, st.data(), st.size());
          std::atomic_thread_fence(std::memory_order_release);
        } else {
          rs.put(*rt_.window, c.holder, static_cast<MPI_Aint>(c.address + kWriterOffset), st.data(), st.size());
        }
      }
    }
    try {
      rs.wait_all();
    } catch (const StoreError &e) {
      if (on_failure != OnFailure::kSkip || e.status() != STORE_ERR_PROC_FAILED || rt_.failures->revoked()) throw;
      for (WriteJob &job : jobs) {
        if (!in_place(job.header.length)) continue;
        std::erase_if(job.copies, [&](const Copy &c) { return rt_.failures->dead(c.holder); });
        if (job.copies.empty()) throw;
      }
    }
  }
  for (WriteJob &job : jobs) {
    if (in_place(job.header.length)) continue;
    next();
    job.copies = write_copies(a, job.copies, job.header, job.buf, on_failure);
  }
}

std::size_t Engine::start_read(RequestSet &rs, const Copy &hc, SlotHeader *h, void *buf, std::size_t capacity,
                               std::byte *scratch) {
  const MPI_Aint header_at = static_cast<MPI_Aint>(hc.address);
  // An in-place value is fetched with its header in one round trip (guessing its length from
  // the last read); a double-buffered one must be read after its header, which says where.
  std::size_t fetch = 0;
  if (in_place(hc.length_hint)) {
    fetch = std::min<std::size_t>({capacity, static_cast<std::size_t>(hc.capacity),
                                   std::max<std::size_t>(hc.length_hint, kFirstReadBytes), kInPlaceLimit});
  }
  if (fetch > 0 && scratch != nullptr) {
    // Header and value lie side by side: one get instead of two (each a system call over shared
    // memory, which this machine makes expensive). unpack_read copies them out.
    rs.get(*rt_.window, hc.holder, header_at, scratch, kHeaderBytes + fetch);
    return fetch;
  }
  rs.get(*rt_.window, hc.holder, header_at, h, sizeof *h);
  if (fetch > 0) rs.get(*rt_.window, hc.holder, header_at + static_cast<MPI_Aint>(kHeaderBytes), buf, fetch);
  return fetch;
}

void Engine::unpack_read(const std::byte *scratch, std::size_t fetch, SlotHeader *h, void *buf) {
  if (fetch == 0) return;
  std::memcpy(h, scratch, kHeaderBytes);
  std::memcpy(buf, scratch + kHeaderBytes, fetch);
}

ReadResult Engine::finish_read(Agent &a, const SlotId &id, const Copy &hc, const SlotHeader &h, std::size_t fetch,
                               void *buf, std::size_t capacity, std::size_t *len) {
  const std::uint64_t key = id.key;
  const MPI_Aint header_at = static_cast<MPI_Aint>(hc.address);
  if (h.owner == kSlotRetired || h.capacity != hc.capacity) return ReadResult::kStale;
  // Another key's slot: ours moved away and the slot was reused. Look the key up again.
  if (h.key != key || flags_ns(h.flags) != id.ns) return ReadResult::kStale;
  if (slot_empty(h)) return ReadResult::kNotFound;
  if (slot_lost(h)) return ReadResult::kLost;
  if (h.version == kNoVersion || h.length > h.capacity) return ReadResult::kRetry;

  std::vector<std::byte> whole;
  RequestSet rs(&a); // after `whole`: on unwinding it waits before the buffer goes
  if (slot_summed(h)) {
    // The checksum covers the value: no second look at the header. A value too large for the
    // caller's buffer is still read whole, to validate the length it reports (at most
    // kSummedLimit bytes).
    if (!summed_length(h.length)) return ReadResult::kRetry;
    void *dst = buf;
    if (h.length > capacity) {
      whole.resize(h.length);
      dst = whole.data();
    }
    rs.get(*rt_.window, hc.holder, header_at + static_cast<MPI_Aint>(value_offset(h, hc.capacity)), dst, h.length);
    rs.wait_all();
    if (!summed_valid(h, dst)) return ReadResult::kRetry;
    *len = h.length;
    return h.length > capacity ? ReadResult::kTruncated : ReadResult::kOk;
  }
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
  if (slot_deleted(h)) return ReadResult::kDeleted;
  *len = h.length;
  return h.length > capacity ? ReadResult::kTruncated : ReadResult::kOk;
}

ReadResult Engine::read_remote(Agent &a, const SlotId &id, const Copy &hc, void *buf, std::size_t capacity,
                               std::size_t *len) {
  SlotHeader h;
  std::size_t fetch = 0;
  alignas(64) std::byte scratch[kHeaderBytes + kInPlaceLimit];
  {
    RequestSet rs(&a);
    ping({hc});
    fetch = start_read(rs, hc, &h, buf, capacity, scratch);
    rs.wait_all();
  }
  unpack_read(scratch, fetch, &h, buf);
  return finish_read(a, id, hc, h, fetch, buf, capacity, len);
}

void Engine::read_many(Agent &a, std::vector<ReadJob> &jobs) {
  // Lookups of the copies not cached, all in one round.
  std::vector<Ask> asks;
  std::vector<std::size_t> asked;
  std::vector<HolderCache> where(jobs.size());
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    ReadJob &job = jobs[j];
    if (job.holder == rt_.rank) {
      job.result = holder_.slots.read_local(job.id, job.buf, job.capacity, &job.len);
      continue;
    }
    where[j] = cache_.at(job.id, job.holder);
    if (where[j].can_read) continue;
    CtrlMsg m;
    m.type = MsgType::kLookup;
    asks.push_back(Ask{job.id, job.holder, m});
    asked.push_back(j);
  }
  if (!asks.empty()) {
    const std::vector<CtrlMsg> replies = ask_all(a, asks);
    for (std::size_t i = 0; i < asked.size(); ++i) {
      ReadJob &job = jobs[asked[i]];
      const CtrlMsg &r = replies[i];
      if (r.status == ReplyStatus::kNotFound) {
        job.result = ReadResult::kNotFound;
        continue;
      }
      if (r.status != ReplyStatus::kOk) throw StoreError(STORE_ERR_INTERNAL, "lookup failed");
      cache_.install(job.id, job.holder, r, false);
      HolderCache &hc = where[asked[i]];
      hc.holder = job.holder;
      hc.address = r.address;
      hc.capacity = r.capacity;
      hc.length_hint = r.length;
      hc.can_read = true;
    }
  }
  // Every first fetch, then the rest of each read.
  std::vector<SlotHeader> headers(jobs.size());
  std::vector<std::size_t> fetched(jobs.size(), 0);
  std::vector<bool> started(jobs.size(), false);
  {
    RequestSet rs(&a);
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      if (jobs[j].holder == rt_.rank || !where[j].can_read) continue;
      ping({where[j]});
      fetched[j] = start_read(rs, where[j], &headers[j], jobs[j].buf, jobs[j].capacity, nullptr);
      started[j] = true;
    }
    rs.wait_all();
  }
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    if (!started[j]) continue;
    ReadJob &job = jobs[j];
    job.result = finish_read(a, job.id, where[j], headers[j], fetched[j], job.buf, job.capacity, &job.len);
    if (job.result == ReadResult::kStale) cache_.after_read(job.id, job.holder, where[j].address, true, 0);
    if (job.result == ReadResult::kOk) cache_.after_read(job.id, job.holder, where[j].address, false, job.len);
  }
}

ReadResult Engine::read_copy(Agent &a, const SlotId &id, int holder, void *buf, std::size_t capacity,
                             std::size_t *len) {
  if (holder == rt_.rank) return holder_.slots.read_local(id, buf, capacity, len);
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
