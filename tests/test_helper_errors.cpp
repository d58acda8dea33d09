// A helper that cannot serve a request still answers it. Otherwise the requester waits for a
// reply that never comes, until some unrelated failure ends its wait.
//
// Rank 0's helper runs a handler that throws for every message. Rank 1 sends it each request
// type that expects a reply (a write grant, a lookup, a lock for the application thread and one
// for the repair thread, whose replies go to their own tag, and the three witness requests from
// either thread) and must get, for
// each, an error reply on the tag the requester listens on, within a bound scaled with
// RMASTORE_TEST_TIME_SCALE. The premise, that the handler threw for each request, is counted.
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "common/protocol.hpp"
#include "test_util.hpp"
#include "transport/doorbell.hpp"
#include "transport/failure.hpp"
#include "transport/helper.hpp"

using namespace rmastore::internal;
using namespace rmastore::test;

namespace {

struct Case {
  const char *name;
  MsgType type;
  int reply_tag;
};

// Waits for the reply to `request` on `tag`, bounded. Returns false on timeout.
bool await_reply(MPI_Comm comm, int tag, std::uint64_t request, CtrlMsg &reply) {
  MPI_Request r = MPI_REQUEST_NULL;
  CHECK(MPI_Irecv(&reply, sizeof reply, MPI_BYTE, 0, tag, comm, &r) == MPI_SUCCESS, "MPI_Irecv");
  const auto until = std::chrono::steady_clock::now() + scaled(5000);
  int done = 0;
  while (!done && std::chrono::steady_clock::now() < until) {
    CHECK(MPI_Test(&r, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS, "MPI_Test");
    if (!done) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (!done) {
    MPI_Cancel(&r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    return false;
  }
  return reply.request == request;
}

} // namespace

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int rank = world_rank();
  CHECK(world_size() == 2, "needs 2 processes");
  MPI_Comm comm = MPI_COMM_NULL;
  CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm) == MPI_SUCCESS, "MPI_Comm_dup");
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);

  const Case cases[] = {{"write grant", MsgType::kAcquireWrite, kTagReply},
                        {"lookup", MsgType::kLookup, kTagReply},
                        {"lock", MsgType::kLock, kTagReply},
                        {"repair lock", MsgType::kLock, kTagRepairReply},
                        {"witness record", MsgType::kWitness, kTagReply},
                        {"witness removal", MsgType::kUnwitness, kTagRepairReply},
                        {"witness query", MsgType::kWitnessQuery, kTagReply},
                        {"repair's witness query", MsgType::kWitnessQuery, kTagRepairReply}};
  constexpr int kCases = sizeof cases / sizeof cases[0];
  std::atomic<int> thrown{0};
  {
    Doorbells bells(comm);
    FailureState failures(2);
    Helper helper(comm, bells, failures, STORE_DETECTOR_NOTIFY, 1000);
    helper.start([&](const CtrlMsg &, int) {
      thrown.fetch_add(1);
      throw std::runtime_error("this handler serves nothing (test)");
    });
    if (rank == 1) {
      for (int i = 0; i < kCases; ++i) {
        CtrlMsg m;
        m.type = cases[i].type;
        m.key = 42;
        m.request = 100 + static_cast<std::uint64_t>(i);
        m.reply_tag = cases[i].reply_tag;
        CHECK(MPI_Send(&m, sizeof m, MPI_BYTE, 0, kTagHelper, comm) == MPI_SUCCESS, "MPI_Send");
        CtrlMsg reply;
        const bool got = await_reply(comm, cases[i].reply_tag, m.request, reply);
        CHECK(got, "no reply to a %s request the helper could not serve", cases[i].name);
        CHECK(!got || (reply.type == MsgType::kReply && reply.status == ReplyStatus::kError),
              "the reply to a %s request is not an error (type %u, status %u)", cases[i].name,
              static_cast<unsigned>(reply.type), static_cast<unsigned>(reply.status));
      }
    }
    CHECK(MPI_Barrier(comm) == MPI_SUCCESS, "MPI_Barrier");
    if (rank == 0) CHECK(thrown.load() == kCases, "the handler threw %d times, not %d", thrown.load(), kCases);
    helper.stop();
  }
  write_verdict(check_failures == 0);
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return check_failures == 0 ? 0 : 1;
}
