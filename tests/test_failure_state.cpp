#include <gtest/gtest.h>

#include "transport/failure.hpp"

using rmastore::internal::FailureState;

TEST(FailureState, RecordsDeathsOnceAndRevocation) {
  FailureState f(5);
  EXPECT_FALSE(f.any());
  EXPECT_EQ(f.first_seen_ns(), 0);
  f.mark_dead(3);
  f.mark_dead(3);
  EXPECT_TRUE(f.dead(3));
  EXPECT_FALSE(f.dead(2));
  EXPECT_EQ(f.failures(), 1) << "a death is counted once";
  EXPECT_TRUE(f.any());
  EXPECT_GT(f.first_seen_ns(), 0);
  const auto first = f.first_seen_ns();
  f.mark_dead(-1);
  f.mark_dead(5);
  EXPECT_EQ(f.failures(), 1) << "ranks out of range are ignored";
  EXPECT_FALSE(f.revoked());
  f.mark_revoked();
  EXPECT_TRUE(f.revoked());
  EXPECT_EQ(f.first_seen_ns(), first) << "the first sighting stays";
}

TEST(FailureState, RevocationAloneNeedsRecovery) {
  FailureState f(2);
  f.mark_revoked();
  EXPECT_TRUE(f.any());
  EXPECT_EQ(f.failures(), 0);
}
