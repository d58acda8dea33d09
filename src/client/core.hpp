// The parts of one process's store, each owning one concern and its lock, put together once.
// The variants (global.hpp, localized.hpp), the repair thread and store_recover work on these;
// Store (store.hpp) is the façade that creates them and that the C API calls.
#pragma once

#include <mpi.h>

#include "client/agent.hpp"
#include "client/engine.hpp"
#include "client/key_cache.hpp"
#include "common/config.hpp"
#include "holder/holder.hpp"
#include "transport/membership.hpp"
#include "transport/runtime.hpp"

namespace rmastore::internal {

struct Core {
  // comm: the store's own communicator; this process's rank in it is its stable id. Makes no
  // collective call: membership and the runtime are set up by Store::create.
  Core(MPI_Comm comm, const Config &cfg)
      : config(cfg), rt(comm, cfg.detector, cfg.helper_max_sleep_us), id(rt.rank), holder(config, rt, membership),
        cache(rt, membership, id), engine(config, id, rt, membership, holder, cache), app(rt, id, Agent::kApplication) {
  }
  Core(const Core &) = delete;
  Core &operator=(const Core &) = delete;

  const Config config;
  Runtime rt;
  const int id; // stable id of this process
  Membership membership;
  Holder holder; // what this process keeps for others, and its answers to them
  KeyCache cache;
  Engine engine;
  Agent app; // the application thread's
};

} // namespace rmastore::internal
