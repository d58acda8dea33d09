#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <set>
#include <string>

#include "rmastore/store.h"

TEST(Status, EveryCodeHasItsOwnMessage) {
  std::set<std::string> seen;
  for (int s = STORE_STATUS_MIN; s <= STORE_OK; ++s) {
    const char *m = store_strerror(static_cast<store_status_t>(s));
    ASSERT_NE(m, nullptr);
    EXPECT_STRNE(m, "unknown status") << "status " << s;
    EXPECT_TRUE(seen.insert(m).second) << "message shared by two codes: " << m;
  }
  EXPECT_STREQ(store_strerror(static_cast<store_status_t>(1)), "unknown status");
  EXPECT_STREQ(store_strerror(static_cast<store_status_t>(STORE_STATUS_MIN - 1)), "unknown status");
}

TEST(Status, OkIsZeroAndErrorsAreNegative) {
  EXPECT_EQ(STORE_OK, 0);
  for (int s = STORE_STATUS_MIN; s < STORE_OK; ++s) EXPECT_LT(s, 0);
}

TEST(Config, InitGivesDocumentedDefaults) {
  store_config_t c;
  ASSERT_EQ(store_config_init(&c), STORE_OK);
  EXPECT_EQ(c.struct_size, sizeof c);
  EXPECT_EQ(c.replicas, 2);
  EXPECT_EQ(c.initial_slot_size, 64u);
  EXPECT_EQ(c.capacity_hint, std::size_t{1} << 20);
  EXPECT_EQ(c.node_id, -1);
  EXPECT_EQ(c.helper_max_sleep_us, 1000);
  EXPECT_EQ(c.detector, STORE_DETECTOR_NOTIFY);
  EXPECT_EQ(store_config_init(nullptr), STORE_ERR_ARG);
  store_info_t i;
  EXPECT_EQ(store_info_init(&i), STORE_OK);
  EXPECT_EQ(i.struct_size, sizeof i);
  EXPECT_EQ(store_info_init(nullptr), STORE_ERR_ARG);
}

// Programs built before store_recovery_init became inline call the exported
// rmastore_store_recovery_init: it must not write past their struct, which ended before
// bytes_quarantined.
extern "C" store_status_t rmastore_store_recovery_init(store_recovery_t *report);

TEST(Recovery, InitWritesOnlyTheCallersStruct) {
  store_recovery_t r;
  std::memset(&r, 0xab, sizeof r);
  ASSERT_EQ(store_recovery_init(&r), STORE_OK);
  EXPECT_EQ(r.struct_size, sizeof r);
  EXPECT_EQ(r.bytes_quarantined, 0u);

  std::memset(&r, 0xab, sizeof r);
  ASSERT_EQ(rmastore_store_recovery_init(&r), STORE_OK);
  EXPECT_EQ(r.struct_size, offsetof(store_recovery_t, bytes_quarantined));
  EXPECT_EQ(r.tx_rolled_back, 0u);
  EXPECT_EQ(r.bytes_quarantined, 0xababababababababull) << "wrote past an older caller's struct";

  EXPECT_EQ(store_recovery_init_size(&r, sizeof r + 8), STORE_ERR_ARG);
  EXPECT_EQ(store_recovery_init_size(&r, 4), STORE_ERR_ARG);
  EXPECT_EQ(store_recovery_init_size(nullptr, sizeof r), STORE_ERR_ARG);
}
