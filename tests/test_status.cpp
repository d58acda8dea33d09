#include <gtest/gtest.h>

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
