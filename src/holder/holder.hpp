// The holder side of one process: what it keeps for others, and its answers to their requests.
//
//   slots     (slot_store.hpp)   - the memory of the copies held here, quarantine, local reads;
//   grants    (grant_server.hpp) - the global variant's write grants and lookups;
//   locks     (lock_server.hpp)  - the localized variant's slot locks;
//   witnesses (witnesses.hpp)    - the records that keys exist.
//
// The helper thread (transport/helper.hpp) receives every request from another process on a
// standing MPI_Irecv (kTagHelper) and hands it to serve(); the reply goes back through
// Helper::send, packed with the others to the same process into one MPI_Isend on the request's
// reply_tag. This process's own agents ask serve_inline(), which answers without a message when
// it can. The bytes of the writers' MPI_Rput land in the slots while the helper polls MPI: no
// code here runs for them.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "common/config.hpp"
#include "holder/grant_server.hpp"
#include "holder/lock_server.hpp"
#include "holder/slot_store.hpp"
#include "holder/witnesses.hpp"
#include "transport/membership.hpp"
#include "transport/runtime.hpp"

namespace rmastore::internal {

class Holder {
public:
  Holder(const Config &config, Runtime &rt, Membership &membership)
      : slots(config, rt), grants(slots, rt, membership), locks(slots, rt, membership), rt_(rt) {}
  Holder(const Holder &) = delete;
  Holder &operator=(const Holder &) = delete;

  // A request from `source`, on the helper thread: served, and its reply sent to its reply_tag,
  // now or later. kAcquireWrite, kLookup, kInvalidateAck, kReclaim: grants (GrantServer::serve
  // makes the slot in the window's memory and grants it); kLock, kUnlock: locks (LockServer);
  // kWitness, kUnwitness, kWitnessQuery: witnesses; kList: local_keys. False if `msg` is not a
  // request to a holder (the caller handles it).
  bool serve(const CtrlMsg &msg, int source);
  // A request of this process's own agent for a slot or record here: the reply, or nullopt if
  // it needs other processes or a queue (the agent then asks its helper).
  std::optional<CtrlMsg> serve_inline(const CtrlMsg &msg, int self);
  // The keys in [first, last] that this process holds a copy or a record of, ascending, at most
  // `limit` of them (store_list).
  std::vector<std::uint64_t> local_keys(std::uint64_t first, std::uint64_t last, std::size_t limit) const;
  // store_recover, no other thread running: forgets every grant and lock; quarantines what a
  // failed process could still write into.
  void reset_after_failures() {
    locks.reset();
    grants.reset();
  }

  SlotStore slots;
  GrantServer grants;
  LockServer locks;
  Witnesses witnesses;

private:
  Runtime &rt_;
};

} // namespace rmastore::internal
