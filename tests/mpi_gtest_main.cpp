// GoogleTest main for MPI tests: every rank runs every test (test bodies are collective), rank 0
// prints the usual report, other ranks print only their failures, and each rank writes its own
// verdict file for tests/mpirun_test.sh. A fatal failure on any rank aborts the job.
#include <gtest/gtest.h>
#include <mpi.h>

#include <getopt.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "test_util.hpp"

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult &r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?", r.line_number(),
                 r.summary());
  }

private:
  int rank_;
};

// A fatal failure (ASSERT_*, FAIL) returns from the test body on this rank only; the others go
// on into the next collective and wait there until the runner's timeout (minutes). Instead the
// failing rank records FAIL and aborts the whole job at once. Non-fatal failures (EXPECT_*)
// leave the body running, so every rank still reaches the same collectives: they are only
// counted.
class AbortOnFatalFailure : public ::testing::EmptyTestEventListener {
public:
  explicit AbortOnFatalFailure(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult &r) override {
    if (!r.fatally_failed()) return;
    rmastore::test::write_verdict(false);
    std::fprintf(stderr, "[rank %d] fatal failure: aborting the job (the other ranks would wait for this one)\n",
                 rank_);
    std::fflush(stderr);
    std::fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

private:
  int rank_;
};

} // namespace

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  ::testing::InitGoogleTest(&argc, argv);
  // GoogleTest took its own --gtest_* flags out of argv; it leaves --help (and -h) there, after
  // printing its help. Anything else left is a mistake.
  const char *slash = std::strrchr(argv[0], '/');
  const std::string usage = std::string(slash != nullptr ? slash + 1 : argv[0]) + " [--gtest_* flags]";
  const rmastore::test::Cli cli{usage.c_str()};
  static const option options[] = {{"help", no_argument, nullptr, 'h'}, {nullptr, 0, nullptr, 0}};
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":h", options, nullptr)) != -1;) {
    if (c == 'h') {
      MPI_Finalize();
      return 0;
    }
    cli.bad_option(c, argv);
  }
  cli.no_operands(argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto &listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  // After the printers: the failure is reported before the job goes down.
  ::testing::UnitTest::GetInstance()->listeners().Append(new AbortOnFatalFailure(rank));
  const int rc = RUN_ALL_TESTS();
  const bool ok =
      rc == 0 && provided == MPI_THREAD_MULTIPLE && ::testing::UnitTest::GetInstance()->test_to_run_count() > 0;
  rmastore::test::write_verdict(ok);
  MPI_Finalize();
  return ok ? 0 : 1;
}
