#include "common/decide.hpp"

#include <algorithm>

namespace rmastore::internal {

CopyState classify_copy(const SlotHeader &h, const std::byte *base, std::uint64_t capacity, std::uint64_t key, Ns ns) {
  if (h.key != key || flags_ns(h.flags) != ns) return CopyState::kTorn;
  if (slot_empty(h)) return CopyState::kEmpty;
  if (slot_lost(h)) return CopyState::kLost;
  if (h.version == kNoVersion || h.length > capacity) return CopyState::kTorn;
  // Unsummed double-buffered copies: the header alone is checked (the value half it names was
  // complete before the header was written), and here nobody writes it while it is read.
  if (!in_place(h.length) && !slot_summed(h)) return buffered_valid(h, h) ? CopyState::kComplete : CopyState::kTorn;
  const CopyState whole = slot_deleted(h) ? CopyState::kDeleted : CopyState::kComplete;
  const std::byte *value = base + value_offset(h, capacity);
#if defined(RMASTORE_WORDWISE_WINDOW_COPIES)
  // The ThreadSanitizer build reads window memory only word by word (slot.hpp): into a copy.
  std::vector<std::byte> copy(h.length);
  copy_from_window(copy.data(), value, static_cast<std::size_t>(h.length));
  value = copy.data();
#endif
  // Elsewhere the checksum reads the slot in place: a value changing meanwhile fails it, as a
  // copy of it would. Every lock grant comes here, so no copy of the value on the way.
  if (slot_summed(h)) return summed_valid(h, value) ? CopyState::kComplete : CopyState::kTorn;
  return slot_valid(h, value) ? whole : CopyState::kTorn;
}

namespace {

bool whole(CopyState s) {
  return s == CopyState::kComplete || s == CopyState::kDeleted;
}

} // namespace

SlotDecision decide_slot(bool is_value, const std::vector<int> &holders, const std::vector<CopyReport> &copies,
                         const std::vector<CopyReport> &pending, bool known, const CommittedFn &committed) {
  SlotDecision d;
  bool any_written = false;
  for (const CopyReport &c : copies) {
    any_written = any_written || c.state != CopyState::kEmpty;
    if (whole(c.state) && (d.version == kNoVersion || c.version > d.version)) {
      d.version = c.version;
      d.length = c.length;
      d.writer = c.writer;
      d.deleted = c.state == CopyState::kDeleted;
    }
  }
  const CopyReport *forward = nullptr;
  if (is_value) {
    std::vector<const CopyReport *> newer;
    for (const CopyReport &p : pending) {
      if (whole(p.state) && p.version != kNoVersion && p.version > d.version) newer.push_back(&p);
    }
    std::sort(newer.begin(), newer.end(), [](const CopyReport *a, const CopyReport *b) {
      return a->version != b->version ? a->version > b->version : a->holder < b->holder;
    });
    d.drop_pending = !newer.empty();
    // One transaction's copies share version, committer and sequence number: ask once for each.
    const CopyReport *asked = nullptr;
    for (const CopyReport *p : newer) {
      if (asked != nullptr && p->version == asked->version && p->writer == asked->writer && p->tx == asked->tx)
        continue;
      asked = p;
      if (committed(p->writer, p->tx)) {
        forward = p;
        break;
      }
    }
    d.roll_back = forward == nullptr && !newer.empty();
  }
  if (forward != nullptr) {
    d.roll_forward = true;
    d.version = forward->version;
    d.length = forward->length;
    d.writer = forward->writer;
    d.deleted = forward->state == CopyState::kDeleted;
    for (const CopyReport &p : pending) {
      if (p.state == forward->state && p.version == forward->version && p.writer == forward->writer &&
          p.tx == forward->tx) {
        d.sources.push_back(p.holder);
      }
    }
    d.targets = holders;
    d.outcome = SlotDecision::Outcome::kRestore;
    return d;
  }
  if (d.version == kNoVersion) {
    if (is_value && (known || any_written)) d.outcome = SlotDecision::Outcome::kLost;
    return d;
  }
  d.outcome = SlotDecision::Outcome::kRestore;
  for (const CopyReport &c : copies) {
    if (whole(c.state) && c.version == d.version) d.sources.push_back(c.holder);
  }
  for (int h : holders) {
    if (std::find(d.sources.begin(), d.sources.end(), h) == d.sources.end()) d.targets.push_back(h);
  }
  return d;
}

} // namespace rmastore::internal
