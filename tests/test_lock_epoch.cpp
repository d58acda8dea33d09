// A slot lock is released with the lock word it was taken with, even when the word the agent
// would use now differs (today each acquisition has its own word; before, the word held the
// epoch, the count of completed recoveries). An earlier version recomputed the word at release: a
// lock taken under one epoch and released under the next was never freed, and its live owner
// held it for good (the repair thread could start before store_recover moved the epoch). The
// race window was a few instructions wide, so this test moves the epoch by hand between taking
// and releasing, on one process, with the real LockClient and LockServer.
#include "client/core.hpp"
#include "test_util.hpp"
#include "variants/localized/locks.hpp"

using namespace rmastore::internal;
using namespace rmastore::test;

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  CHECK(world_size() == 1, "needs 1 process");
  MPI_Comm comm = MPI_COMM_NULL;
  CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm) == MPI_SUCCESS, "MPI_Comm_dup");
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  Config cfg;
  cfg.replicas = 1;
  cfg.recovery = STORE_RECOVERY_LOCALIZED;
  {
    Core c(comm, cfg);
    c.membership.init({0}, 1);
    c.rt.build(c.holder.slots.regions());
    LockClient locks(c);
    const SlotId id{7, Ns::kValue};
    const std::vector<LockRequest> reqs = locks.requests(id, 8, 0);
    CHECK(reqs.size() == 1 && reqs[0].holder == 0, "one copy, held here");
    const std::vector<Lock> held = locks.acquire(c.app, reqs, nullptr);
    SlotHeader h{};
    std::vector<std::byte> value;
    c.holder.slots.read_local_copy(id.key, h, value);
    CHECK(!held.empty() && h.owner == held.front().owner, "premise: the lock is held (owner word %#llx)",
          static_cast<unsigned long long>(h.owner));
    ++c.rt.epoch; // what store_recover does; the old race let a lock straddle it
    CHECK(c.app.lock_word() != held.front().owner, "premise: the agent's lock word changed");
    locks.release(c.app, held);
    c.holder.slots.read_local_copy(id.key, h, value);
    CHECK(h.owner == kOwnerFree, "the lock is still held after its release (owner word %#llx)",
          static_cast<unsigned long long>(h.owner));
    c.rt.stop_helper();
    c.rt.window->close();
    c.rt.window.reset();
    c.holder.slots.clear();
    MPI_Comm_free(&c.rt.ctrl);
  }
  write_verdict(check_failures == 0);
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return check_failures == 0 ? 0 : 1;
}
