// test_failure's command line: a fixed scenario's options, or a seed to draw one from.
#include <getopt.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "scenario.hpp"

namespace rmastore::test::failure {

std::vector<std::string> split(const std::string &s, char sep) {
  std::vector<std::string> parts;
  for (std::size_t p = 0; p < s.size();) {
    std::size_t end = s.find(sep, p);
    if (end == std::string::npos) end = s.size();
    if (end > p) parts.push_back(s.substr(p, end - p));
    p = end + 1;
  }
  return parts;
}

namespace {

constexpr char kUsage[] =
    "test_failure --replicas R --victims A[,B...] [--killers A[,B...]] [--kill-at N] [--tx 0|1] [--keys K] "
    "[--rounds N] [--detector notify|ping] [--localized 0|1] [--compact 0|1] [--expect-loss 0|1] [--host-loss 0|1] "
    "[--delete 0|1] [--batch 0|1|2]\n"
    "       test_failure --seed S --kills K [--localized 0|1]\n"
    "       test_failure --seed S --in-recovery 1 [--localized 0|1]";

// A comma-separated list of world ranks.
std::vector<int> parse_ranks(const Cli &cli, const char *option, const char *text, int p) {
  std::vector<int> list;
  for (const std::string &item : split(text, ','))
    list.push_back(static_cast<int>(cli.integer(option, item.c_str(), 0, p - 1)));
  if (list.empty()) cli.error(std::string(option) + " needs one or more ranks, not '" + text + "'");
  return list;
}

} // namespace

Options parse(int argc, char **argv) {
  enum {
    kReplicas = 256,
    kKillAt,
    kKeys,
    kRounds,
    kTx,
    kExpectLoss,
    kHostLoss,
    kDetector,
    kLocalized,
    kCompact,
    kVictims,
    kKillers,
    kSeed,
    kKills,
    kDelete,
    kBatch,
    kInRecovery
  };
  static const option options[] = {{"replicas", required_argument, nullptr, kReplicas},
                                   {"kill-at", required_argument, nullptr, kKillAt},
                                   {"keys", required_argument, nullptr, kKeys},
                                   {"rounds", required_argument, nullptr, kRounds},
                                   {"tx", required_argument, nullptr, kTx},
                                   {"expect-loss", required_argument, nullptr, kExpectLoss},
                                   {"host-loss", required_argument, nullptr, kHostLoss},
                                   {"detector", required_argument, nullptr, kDetector},
                                   {"localized", required_argument, nullptr, kLocalized},
                                   {"compact", required_argument, nullptr, kCompact},
                                   {"victims", required_argument, nullptr, kVictims},
                                   {"killers", required_argument, nullptr, kKillers},
                                   {"seed", required_argument, nullptr, kSeed},
                                   {"kills", required_argument, nullptr, kKills},
                                   {"delete", required_argument, nullptr, kDelete},
                                   {"batch", required_argument, nullptr, kBatch},
                                   {"in-recovery", required_argument, nullptr, kInRecovery},
                                   {"help", no_argument, nullptr, 'h'},
                                   {nullptr, 0, nullptr, 0}};
  const Cli cli{kUsage};
  const int p = world_size();
  Options o;
  Episode e;
  int kills = 0;
  bool fixed = false; // an option of the first form was given
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, ":h", options, nullptr)) != -1;) {
    const auto flag = [&](const char *name) { return cli.integer(name, optarg, 0, 1) != 0; };
    switch (c) {
    case kReplicas:
      o.replicas = static_cast<int>(cli.integer("--replicas", optarg, 1, p));
      break;
    case kKillAt:
      e.kill_at = static_cast<int>(cli.integer("--kill-at", optarg, 0, INT_MAX));
      fixed = true;
      break;
    case kKeys:
      o.keys = static_cast<int>(cli.integer("--keys", optarg, 1, 999));
      break;
    case kRounds:
      o.rounds = static_cast<int>(cli.integer("--rounds", optarg, 1, 100000));
      break;
    case kTx:
      o.tx = flag("--tx");
      break;
    case kExpectLoss:
      o.expect_loss = flag("--expect-loss");
      break;
    case kHostLoss:
      o.host_loss = flag("--host-loss");
      break;
    case kDelete:
      o.deletes = flag("--delete");
      break;
    case kBatch:
      o.batch = static_cast<int>(cli.integer("--batch", optarg, 0, 2));
      break;
    case kInRecovery:
      o.in_recovery = flag("--in-recovery");
      break;
    case kDetector:
      if (std::strcmp(optarg, "ping") == 0) {
        o.detector = STORE_DETECTOR_PING;
      } else if (std::strcmp(optarg, "notify") == 0) {
        o.detector = STORE_DETECTOR_NOTIFY;
      } else {
        cli.error(std::string("--detector needs notify or ping, not '") + optarg + "'");
      }
      break;
    case kLocalized:
      o.localized = flag("--localized");
      break;
    case kCompact:
      o.compact = flag("--compact");
      break;
    case kVictims:
      e.victims = parse_ranks(cli, "--victims", optarg, p);
      fixed = true;
      break;
    case kKillers:
      e.killers = parse_ranks(cli, "--killers", optarg, p);
      fixed = true;
      break;
    case kSeed:
      o.seed = cli.unsigned_integer("--seed", optarg, 1, UINT64_MAX);
      break;
    case kKills:
      kills = static_cast<int>(cli.integer("--kills", optarg, 1, std::max(1, p - 1)));
      break;
    case 'h':
      cli.help();
    default:
      cli.bad_option(c, argv);
    }
  }
  cli.no_operands(argc, argv);
  if (o.seed != 0) {
    if (fixed) cli.error("--seed draws the deaths itself: give no --victims, --killers or --kill-at with it");
    if (o.deletes) cli.error("--seed draws --delete itself");
    if (o.in_recovery) {
      if (kills != 0) cli.error("--in-recovery draws its deaths itself: give no --kills with it");
      if (p < 4) cli.error("--in-recovery needs 4 processes or more");
      draw_in_recovery(o, p);
      return o;
    }
    if (kills == 0) cli.error("--seed needs --kills");
    draw(o, kills, p);
  } else {
    if (o.in_recovery) cli.error("--in-recovery needs --seed");
    if (kills != 0) cli.error("--kills needs --seed");
    if (e.victims.empty()) cli.error("needs --victims (or --seed)");
    if (e.killers.empty() && e.kill_at >= 0) e.killers = e.victims;
    o.episodes.push_back(e);
  }
  return o;
}

} // namespace rmastore::test::failure
