// Fault-injection scenarios: processes are killed with SIGKILL; the survivors must get a failure
// status (never hang), recover, and find every key at its latest committed value with its full
// number of copies; then the store must work on. A run is a series of episodes: operations
// until a failure, recovery, checks, and the survivors taking over the dead ranks' keys.
//
//   test_failure --replicas R --victims a,b [--killers a] [--kill-at N] [--tx 0|1] [--keys K]
//                [--rounds N] [--detector notify|ping] [--localized 0|1] [--compact 0|1]
//                [--expect-loss 0|1] [--host-loss 0|1] [--delete 0|1] [--batch 0|1|2]
//   test_failure --seed S --kills K [--localized 0|1]
//   test_failure --seed S --in-recovery 1 [--localized 0|1]
//
// With --localized 1 the store uses the localized recovery variant: no call may report the
// failure, the survivors carry on through it, and the checks run once the background repair
// has settled (the test shrinks its own communicator to coordinate them). --compact 1 then also
// calls store_recover (compaction) at the end of each episode.
//
// --expect-loss 1 lets as many processes die as there are copies: the keys whose every copy sat
// on the victims must then be reported, by store_get (STORE_ERR_DATA_LOST) and in lost_count
// of store_last_recovery, and every other key must be whole.
//
// --delete 1: some operations of the rounds delete a key instead of putting it (in the
// transaction with --tx 1); a deleted key must read as not found, unless the delete was under
// way when the failure struck (then it may also hold its value from before).
//
// --batch 1: each round's puts of a rank go out as one store_put_many; --batch 2: as
// store_put_nb, then store_wait for each (with the same guarantees as store_put).
//
// --host-loss 1 (across simulated hosts, scripts/multihost.sh): the victims must be exactly the
// ranks of one host; the first kills that host's Open MPI daemon and dies, the others die with
// it, as when a machine goes away. With copies on distinct hosts nothing may be lost.
//
// In the first form there is one episode. Victims die either at a library fault point
// (RMASTORE_FAULT, set by the test registration) or, the killers among them, by raising
// SIGKILL before their N-th operation. With --tx 1 each round of a rank writes all its keys in
// one transaction, and survivors also check atomicity: all keys of a rank hold one version.
//
// In the second form (the randomized driver) the seed decides everything else: replicas,
// how the K deaths spread over episodes, who dies, how (own hand at a random operation, or a
// random fault point in puts, enlargements, commits or recovery itself), and transactions.
// In the third, one process dies inside the survivors' first store_recover (docs/soak.md).
//
// Every rank records in node-shared memory, for each of its keys, the last version whose put
// returned STORE_OK and the version of a put under way, so that survivors can check even a
// dead writer's keys exactly: after recovery a key holds one of the two.
//
// The fixed scenarios are the rows of tests/failure/scenarios.txt. The parts: failure/scenario.hpp
// (a scenario's options, options.cpp the command line, schedule.cpp the seeds' draws and the
// deaths the runner must see), failure/run.hpp (the operations, deaths, recovery and checks of
// one rank), failure/peers.hpp (the survivors' collectives); here, the episodes.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/ulfm.hpp"
#include "failure/run.hpp"
#include "ping_count.hpp"
#include "test_util.hpp"

using namespace rmastore::test;
using namespace rmastore::test::failure;

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const Options opt = parse(argc, argv);
  // A seed's fault points; read by the library at its first fault point.
  if (!opt.fault.empty()) setenv("RMASTORE_FAULT", opt.fault.c_str(), 1);
  if (opt.timer_us >= 0) setenv("RMASTORE_FAULT_TIMER_US", std::to_string(opt.timer_us).c_str(), 1);
  const int me = world_rank(), p = world_size();
  if (opt.host_loss) {
    // The premise: the victims are one whole host, and other hosts survive it.
    const std::vector<std::string> hosts = host_of_rank();
    const Episode &e = opt.episodes.front();
    const std::string lost = hosts[static_cast<std::size_t>(e.victims.front())];
    int on_host = 0;
    for (int r = 0; r < p; ++r) on_host += hosts[static_cast<std::size_t>(r)] == lost ? 1 : 0;
    bool whole = on_host == static_cast<int>(e.victims.size()) && on_host < p;
    for (int v : e.victims) whole = whole && hosts[static_cast<std::size_t>(v)] == lost;
    if (in(e.victims, me) && !watch_host_daemon(e.victims)) whole = false;
    MPI_Allreduce(MPI_IN_PLACE, &whole, 1, MPI_CXX_BOOL, MPI_LAND, MPI_COMM_WORLD);
    CHECK(whole, "--host-loss: the victims are not exactly the ranks of one host of several, under its prted");
    if (!whole) {
      write_verdict(false);
      MPI_Finalize();
      return 1;
    }
  }
  if (me == 0) expect_deaths(expected_deaths(opt));
  // Under Slurm the lost host's Slurm daemons die with it (die_with_host): the runner checks it.
  if (me == 0 && opt.host_loss && slurm_node_loss()) {
    expect_deaths({"host-lost@" + std::to_string(opt.episodes.front().victims.front())});
  }
  if (me == 0 && opt.seed != 0) {
    std::printf("seed %llu: replicas %d, %s, %d keys, %d rounds, faults '%s'", (unsigned long long)opt.seed,
                opt.replicas, opt.tx ? "transactions" : "single puts", opt.keys, opt.rounds, opt.fault.c_str());
    if (opt.timer_us >= 0) std::printf(" after %d us", opt.timer_us);
    std::printf(", episodes:");
    for (const Episode &e : opt.episodes) {
      std::printf(" [victims");
      for (int v : e.victims) std::printf(" %d%s", v, in(e.killers, v) ? "*" : "");
      std::printf(" at op %d]", e.kill_at);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  const auto t_start = Clock::now();
  KeyRecord *rec = shared_records(p, opt.keys);
  CHECK(rec != nullptr, "no shared memory");
  store_config_t cfg;
  store_config_init(&cfg);
  cfg.replicas = std::min(opt.replicas, p);
  cfg.detector = opt.detector;
  cfg.recovery = opt.localized ? STORE_RECOVERY_LOCALIZED : STORE_RECOVERY_GLOBAL;
  store_t s = nullptr;
  CHECK(store_init(MPI_COMM_WORLD, &cfg, &s) == STORE_OK, "store_init failed");
  if (rec == nullptr || s == nullptr) {
    write_verdict(false);
    MPI_Finalize();
    return 1;
  }
  Run run(opt, rec, s);
  // The localized variant's survivors talk on a copy of the world made while all are alive.
  MPI_Comm world = MPI_COMM_NULL;
  CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &world) == MPI_SUCCESS, "MPI_Comm_dup");
  MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);

  // Every key gets a first value (fault points may already fire here).
  bool early = !run.write_all(1, false);
  if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS) early = true;
  if (opt.localized) early = false; // nobody stops: every rank goes on with its operations

  std::vector<int> dead;
  // The global variant's survivors' communicator comes from store_recover.
  MPI_Comm comm = MPI_COMM_NULL;
  store_recovery_t report{};
  const auto print_recovery = [&](Peers &g, std::size_t e, const char *what) {
    if (g.index() != 0) return;
    std::printf("episode %zu: %s %d attempt(s), %.1f ms (shrink %.1f, window %.1f, re-replication %.1f), "
                "%llu B lost, %llu B moved, %llu keys repaired of %llu, transactions: %llu keys forward, %llu "
                "back\n",
                e, what, report.attempts, report.total_seconds * 1e3, report.shrink_seconds * 1e3,
                report.window_seconds * 1e3, report.rereplicate_seconds * 1e3, (unsigned long long)report.bytes_lost,
                (unsigned long long)report.bytes_moved, (unsigned long long)report.keys_repaired,
                (unsigned long long)report.keys, (unsigned long long)report.tx_rolled_forward,
                (unsigned long long)report.tx_rolled_back);
    std::fflush(stdout);
  };
  const auto give_up = [&] {
    write_verdict(false);
    return 1; // without MPI_Finalize: the others cannot finish with us anyway
  };
  std::size_t compacted = 0; // deaths before the last store_recover (in the localized variant, a compaction)
  for (std::size_t e = 0; e < opt.episodes.size(); ++e) {
    const Episode &ep = opt.episodes[e];
    if (!(e == 0 && early)) {
      run.operate(ep, 2 + 100 * e);
    } else {
      // A death during the first puts: the episode's other victims must not live on into the
      // recovery (a data-path fault point they did not reach yet would fire after it).
      run.saw_failure(ep);
      run.victim_dies(ep);
    }
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
    if (opt.localized) {
      // The survivors carried on. Once the background repair settled, every key must be whole
      // again, without any collective call on the store.
      for (int v : ep.victims) {
        if (!dies_in_recovery(v)) dead.push_back(v);
      }
      Peers g = run.settle(world, dead, dead.size() - compacted);
      CHECK(g.valid(), "this rank is not among the survivors");
      if (!g.valid()) return give_up();
      int survivors = g.size();
      CHECK(survivors == p - static_cast<int>(dead.size()), "%d survivors", survivors);
      CHECK(!opt.expect_loss || run.lost_keys(dead) > 0, "no key had every copy on the victims");
      store_info_t info;
      store_info_init(&info);
      store_get_info(s, &info);
      const std::uint64_t repaired = g.sum(info.repaired_bytes);
      if (g.index() == 0) {
        std::printf("episode %zu: background repair settled, %llu B written by repairs so far\n", e,
                    (unsigned long long)repaired);
        std::fflush(stdout);
      }
      run.verify(g, survivors, dead);
      // After the gets: a process's list holds at least what its gets found lost (the notices of
      // the repairs may be late, RMASTORE_FAULT_OFF=lost_notice).
      store_recovery_init(&report);
      store_last_recovery(s, &report);
      std::string why;
      CHECK(run.unexplained_lost(report, &why) == 0, "listed lost, but neither found lost nor put again:%s",
            why.c_str());
      CHECK(report.lost_count >= run.lost_seen(), "%llu keys reported lost, %llu found lost",
            (unsigned long long)report.lost_count, (unsigned long long)run.lost_seen());
      CHECK(!opt.expect_loss || run.lost_seen() > 0, "no key was lost");
      run.take_over(g, dead, 90 + 100 * e);
      if (!opt.compact) continue;
      // Compaction: optional, it must leave everything as it was (victims of recover.* points
      // die inside it).
      for (int v : ep.victims) {
        if (dies_in_recovery(v)) dead.push_back(v);
      }
      comm = run.recover(report);
      if (comm == MPI_COMM_NULL) return give_up();
      Peers c = everyone(comm);
      survivors = c.size();
      CHECK(survivors == p - static_cast<int>(dead.size()), "%d survivors after compaction", survivors);
      CHECK(report.survivors == survivors && report.failed == static_cast<int>(dead.size() - compacted),
            "the report says %d survivors and %d failed", report.survivors, report.failed);
      compacted = dead.size();
      CHECK(report.lost_count == 0, "%llu keys lost in compaction", (unsigned long long)report.lost_count);
      run.verify(c, survivors, dead);
      print_recovery(c, e, "compaction");
      continue;
    }
    dead.insert(dead.end(), ep.victims.begin(), ep.victims.end());
    comm = run.recover(report);
    if (comm == MPI_COMM_NULL) return give_up();
    Peers g = everyone(comm);
    const int survivors = g.size();
    CHECK(survivors == p - static_cast<int>(dead.size()), "%d survivors", survivors);
    CHECK(report.survivors == survivors && report.failed == static_cast<int>(dead.size() - compacted),
          "the report says %d survivors and %d failed", report.survivors, report.failed);
    compacted = dead.size();
    CHECK(report.lost_count == run.lost_keys(dead), "%llu keys reported lost, %llu expected",
          (unsigned long long)report.lost_count, (unsigned long long)run.lost_keys(dead));
    CHECK(!opt.expect_loss || run.lost_keys(dead) > 0, "no key had every copy on the victims");
    run.verify(g, survivors, dead);
    CHECK(run.lost_seen() == run.lost_keys(dead), "%llu keys found lost, %llu expected",
          (unsigned long long)run.lost_seen(), (unsigned long long)run.lost_keys(dead));
    run.take_over(g, dead, 90 + 100 * e);
    print_recovery(g, e, "recovery");
  }
  // A job that must outlive what its batch system does about a lost node (tests/slurm.cmake): the
  // survivors wait until RMASTORE_TEST_HOLD_UNTIL (a shell command, run by the first survivor)
  // succeeds, e.g. until Slurm declared the node down, then read every key again.
  if (const char *until = std::getenv("RMASTORE_TEST_HOLD_UNTIL"); until != nullptr && comm != MPI_COMM_NULL) {
    Peers g = everyone(comm);
    int held = 0;
    if (g.index() == 0) {
      const auto start = Clock::now(), deadline = start + scaled(60000);
      while (!(held = std::system(until) == 0 ? 1 : 0) && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
      }
      std::printf("hold: '%s' %s after %.1f s\n", until, held ? "held" : "did not hold",
                  std::chrono::duration<double>(Clock::now() - start).count());
      std::fflush(stdout);
    }
    CHECK(MPI_Bcast(&held, 1, MPI_INT, 0, comm) == MPI_SUCCESS && held, "RMASTORE_TEST_HOLD_UNTIL never held");
    run.verify(g, g.size(), dead);
  }
  // The ping detector sends its pings (tests/test_ping.cpp shows that they alone detect).
  if (opt.detector == STORE_DETECTOR_PING) {
    CHECK(pings_sent() > 0, "the ping detector sent no ping");
  } else {
    CHECK(pings_sent() == 0, "%llu pings sent without the ping detector", (unsigned long long)pings_sent());
  }
  // MPI may only know processes as failed that did die: a live process counted as failed is
  // excluded from every recovery while it goes on (issue 23: a split of the survivors).
  {
    std::vector<int> victims;
    for (const Episode &ep : opt.episodes) victims.insert(victims.end(), ep.victims.begin(), ep.victims.end());
    MPI_Group failed = MPI_GROUP_NULL, all = MPI_GROUP_NULL;
    int n = 0;
    if (MPIX_Comm_get_failed(world, &failed) == MPI_SUCCESS && MPI_Group_size(failed, &n) == MPI_SUCCESS && n > 0 &&
        MPI_Comm_group(world, &all) == MPI_SUCCESS) {
      std::vector<int> in_failed(static_cast<std::size_t>(n)), ranks(static_cast<std::size_t>(n));
      for (int i = 0; i < n; ++i) in_failed[static_cast<std::size_t>(i)] = i;
      MPI_Group_translate_ranks(failed, n, in_failed.data(), all, ranks.data());
      for (int r : ranks) CHECK(in(victims, r), "MPI counts rank %d as failed, but it is no victim", r);
      MPI_Group_free(&all);
    }
    if (failed != MPI_GROUP_NULL) MPI_Group_free(&failed);
  }
  // Printed on every run so that loops can measure stalls shorter than the bound below.
  std::printf("[rank %d] longest call %.3f s (%s)\n", me, run.longest_call(), run.longest_what());
  CHECK(run.longest_call() < kCallMs * time_scale() / 1000, "a call took %.1f s (%s)", run.longest_call(),
        run.longest_what());
  CHECK(store_finalize(&s) == STORE_OK, "store_finalize");
  const double total_s = std::chrono::duration<double>(Clock::now() - t_start).count();
  CHECK(total_s < kScenarioMs * time_scale() / 1000, "the scenario took %.1f s", total_s);
  write_verdict(check_failures == 0);
  if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  MPI_Comm_free(&world);
  MPI_Finalize();
  return check_failures == 0 ? 0 : 1;
}
