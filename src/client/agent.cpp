#include "client/agent.hpp"

#include "common/clock.hpp"
#include "common/errors.hpp"
#include "common/fault.hpp"
#include "common/slot.hpp"

namespace rmastore::internal {

Agent::Agent(const Runtime &rt, int id, Kind k)
    : kind(k), reply_tag(k == kApplication ? kTagReply : kTagRepairReply), rt_(rt), id_(id) {
  staging.resize(kWriterBytes + kInPlaceLimit);
}

// A lock wait also ends when the failure count changed since it started (see LockClient).
bool Agent::revoked() const {
  if (stop != nullptr && stop->load(std::memory_order_acquire)) return true;
  if (!rt_.detecting()) return false;
  return rt_.failures->revoked() || (lock_view >= 0 && rt_.failures->failures() != lock_view);
}

std::uint64_t Agent::lock_word() {
  return internal::lock_word(id_, ++acquisitions_, kind);
}

void Agent::post(int dest, const CtrlMsg *msgs, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    RMASTORE_TRACE("agent %d posts type %u #%llu %llu/%u flags %u to %d", kind, static_cast<unsigned>(msgs[i].type),
                   (unsigned long long)msgs[i].request, (unsigned long long)msgs[i].key, msgs[i].ns, msgs[i].flags,
                   dest);
  }
  Outgoing &o = outbox_.emplace_back();
  o.msgs.assign(msgs, msgs + n);
  o.dest = dest;
  const int rc =
      MPI_Isend(o.msgs.data(), static_cast<int>(n * sizeof(CtrlMsg)), MPI_BYTE, dest, kTagHelper, rt_.ctrl, &o.request);
  if (rc != MPI_SUCCESS) {
    outbox_.pop_back();
    if (is_failure_error(rc)) return; // to a failed process: dropped
    check_mpi(rc, "MPI_Isend");
  }
  rt_.bells->ring(dest);
}

void Agent::flush() {
  for (auto it = outbox_.begin(); it != outbox_.end();) {
    int done = 0;
    const int rc = MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS && !is_failure_error(rc)) check_mpi(rc, "MPI_Test");
    if (rc == MPI_SUCCESS && !done && !dead(it->dest)) {
      ++it;
      continue;
    }
    auto next = std::next(it);
    if (rc == MPI_SUCCESS && !done) {
      abandoned_sends_.splice(abandoned_sends_.end(), outbox_, it); // MPI keeps the request, and its buffer
    } else {
      outbox_.erase(it);
    }
    it = next;
  }
}

void Agent::drain() {
  Backoff backoff;
  const std::int64_t give_up = monotonic_ns() + 10'000'000'000;
  for (flush(); !outbox_.empty() && monotonic_ns() < give_up; flush()) backoff.pause();
}

} // namespace rmastore::internal
