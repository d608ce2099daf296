// The Slurm host-list and tasks-per-node grammar of src/hostlist.h. These tests are the spec.
#include "hostlist.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tfb {
namespace {

using names = std::vector<std::string>;
using counts = std::vector<std::uint32_t>;

names expand_ok(std::string_view expr) {
  std::string error;
  names out = expand_hostlist(expr, error);
  EXPECT_FALSE(out.empty()) << expr << ": " << error;
  EXPECT_EQ(error, "") << expr;
  return out;
}

/// Expects expansion to fail; returns the error. first_host must fail the same way.
std::string expand_err(std::string_view expr) {
  std::string error;
  names out = expand_hostlist(expr, error);
  EXPECT_TRUE(out.empty()) << expr << " expanded to " << out.size() << " names";
  EXPECT_FALSE(error.empty()) << expr;
  std::string first_error;
  EXPECT_EQ(first_host(expr, first_error), "") << expr;
  EXPECT_EQ(first_error, error) << expr;
  return error;
}

std::string first_ok(std::string_view expr) {
  std::string error;
  std::string out = first_host(expr, error);
  EXPECT_FALSE(out.empty()) << expr << ": " << error;
  EXPECT_EQ(error, "") << expr;
  return out;
}

counts tasks_ok(std::string_view expr) {
  std::string error;
  counts out = expand_tasks_per_node(expr, error);
  EXPECT_FALSE(out.empty()) << expr << ": " << error;
  EXPECT_EQ(error, "") << expr;
  return out;
}

std::string tasks_err(std::string_view expr) {
  std::string error;
  counts out = expand_tasks_per_node(expr, error);
  EXPECT_TRUE(out.empty()) << expr << " expanded to " << out.size() << " counts";
  EXPECT_FALSE(error.empty()) << expr;
  return error;
}

// ---- plain names ----

TEST(Hostlist, SinglePlainName) { EXPECT_EQ(expand_ok("login"), names{"login"}); }

TEST(Hostlist, SingleNameWithDigitsIsNotARange) {
  EXPECT_EQ(expand_ok("node01"), names{"node01"});
  EXPECT_EQ(expand_ok("n1-4"), names{"n1-4"});
}

TEST(Hostlist, CommaSeparatedPlainNames) { EXPECT_EQ(expand_ok("a,b,c"), (names{"a", "b", "c"})); }

TEST(Hostlist, DottedAndDashedNames) {
  EXPECT_EQ(expand_ok("node1.cluster.local,gpu-a_1"), (names{"node1.cluster.local", "gpu-a_1"}));
}

// ---- one bracket group ----

TEST(Hostlist, SimpleRange) { EXPECT_EQ(expand_ok("node[1-4]"), (names{"node1", "node2", "node3", "node4"})); }

TEST(Hostlist, RangeAndSingleValueInOneGroup) {
  EXPECT_EQ(expand_ok("node[01-04,07]"), (names{"node01", "node02", "node03", "node04", "node07"}));
}

TEST(Hostlist, ZeroPaddingKeptAcrossADecade) {
  EXPECT_EQ(expand_ok("n[08-11]"), (names{"n08", "n09", "n10", "n11"}));
}

TEST(Hostlist, NoPaddingWithoutLeadingZero) { EXPECT_EQ(expand_ok("n[8-11]"), (names{"n8", "n9", "n10", "n11"})); }

TEST(Hostlist, WidthIsTheWidthOfTheLowerBound) {
  // As Slurm: the upper bound's width does not matter.
  EXPECT_EQ(expand_ok("n[8-011]"), (names{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(expand_ok("n[001-3]"), (names{"n001", "n002", "n003"}));
  // Numbers wider than the width are printed in full.
  EXPECT_EQ(expand_ok("n[98-101]"), (names{"n98", "n99", "n100", "n101"}));
  EXPECT_EQ(expand_ok("n[098-101]"), (names{"n098", "n099", "n100", "n101"}));
}

TEST(Hostlist, EachRangeHasItsOwnWidth) {
  EXPECT_EQ(expand_ok("n[1-2,003-004,05]"), (names{"n1", "n2", "n003", "n004", "n05"}));
}

TEST(Hostlist, ZeroIsAValue) {
  EXPECT_EQ(expand_ok("n[0-2]"), (names{"n0", "n1", "n2"}));
  EXPECT_EQ(expand_ok("n[00-02]"), (names{"n00", "n01", "n02"}));
  EXPECT_EQ(expand_ok("n[0]"), names{"n0"});
}

TEST(Hostlist, SingleValueInBrackets) {
  EXPECT_EQ(expand_ok("n[5]"), names{"n5"});
  EXPECT_EQ(expand_ok("n[05]"), names{"n05"});
  EXPECT_EQ(expand_ok("n[5-5]"), names{"n5"});
}

TEST(Hostlist, SeveralSingleValues) { EXPECT_EQ(expand_ok("n[1,3,5]"), (names{"n1", "n3", "n5"})); }

TEST(Hostlist, OrderIsAsWrittenNotSorted) {
  EXPECT_EQ(expand_ok("n[3,1-2]"), (names{"n3", "n1", "n2"}));
  EXPECT_EQ(expand_ok("b,a[2,1]"), (names{"b", "a2", "a1"}));
}

TEST(Hostlist, DuplicatesAreKept) { EXPECT_EQ(expand_ok("n[1-2,2],n1"), (names{"n1", "n2", "n2", "n1"})); }

TEST(Hostlist, GroupWithoutPrefix) { EXPECT_EQ(expand_ok("[1-3]"), (names{"1", "2", "3"})); }

// ---- lists ----

TEST(Hostlist, MixedPlainNamesAndRanges) {
  EXPECT_EQ(expand_ok("a,b[1-3],c"), (names{"a", "b1", "b2", "b3", "c"}));
}

TEST(Hostlist, SeveralBracketedItems) {
  EXPECT_EQ(expand_ok("gpu[01-02],cpu[1-2,9]"), (names{"gpu01", "gpu02", "cpu1", "cpu2", "cpu9"}));
}

TEST(Hostlist, CommasInsideBracketsDoNotSplitItems) {
  EXPECT_EQ(expand_ok("n[1,3],m[2]"), (names{"n1", "n3", "m2"}));
}

// ---- several bracket groups in one name ----

TEST(Hostlist, TwoGroupsLeftmostVariesSlowest) {
  EXPECT_EQ(expand_ok("rack[1-2]-n[01-02]"), (names{"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"}));
}

TEST(Hostlist, ThreeGroups) {
  EXPECT_EQ(expand_ok("r[1-2]c[1-2]n[1-2]"),
            (names{"r1c1n1", "r1c1n2", "r1c2n1", "r1c2n2", "r2c1n1", "r2c1n2", "r2c2n1", "r2c2n2"}));
}

TEST(Hostlist, AdjacentGroups) { EXPECT_EQ(expand_ok("x[1-2][7,9]"), (names{"x17", "x19", "x27", "x29"})); }

TEST(Hostlist, GroupsWithSeveralRangesEach) {
  EXPECT_EQ(expand_ok("r[1,3]-n[1-2,05]"), (names{"r1-n1", "r1-n2", "r1-n05", "r3-n1", "r3-n2", "r3-n05"}));
}

TEST(Hostlist, GroupsInSeveralItems) {
  EXPECT_EQ(expand_ok("a[1-2]b[1],c,d[1]e[1-2]"), (names{"a1b1", "a2b1", "c", "d1e1", "d1e2"}));
}

TEST(Hostlist, TextAfterTheLastGroupIsAccepted) {
  // Slurm itself rejects this form; accepting it is a harmless superset.
  EXPECT_EQ(expand_ok("n[1-2]-ib"), (names{"n1-ib", "n2-ib"}));
  EXPECT_EQ(expand_ok("node[1-2].cluster"), (names{"node1.cluster", "node2.cluster"}));
}

// ---- sizes and big numbers ----

TEST(Hostlist, ExactlyTheMaximumIsAllowed) {
  auto out = expand_ok("n[1-1000000]");
  ASSERT_EQ(out.size(), max_hostlist_hosts);
  EXPECT_EQ(out.front(), "n1");
  EXPECT_EQ(out.back(), "n1000000");
}

TEST(Hostlist, MaximumAsAProductOfGroups) {
  auto out = expand_ok("a[1-1000]b[0001-1000]");
  ASSERT_EQ(out.size(), max_hostlist_hosts);
  EXPECT_EQ(out[0], "a1b0001");
  EXPECT_EQ(out[1000], "a2b0001");
  EXPECT_EQ(out.back(), "a1000b1000");
}

TEST(Hostlist, OneRangePastTheMaximum) {
  std::string e = expand_err("n[0-1000000]");
  EXPECT_NE(e.find("more than 1000000 names"), std::string::npos) << e;
}

TEST(Hostlist, ItemsSummingPastTheMaximum) {
  std::string e = expand_err("a[1-600000],b[1-600000]");
  EXPECT_NE(e.find("more than 1000000 names"), std::string::npos) << e;
  expand_err("a[1-1000000],b");
}

TEST(Hostlist, GroupsMultiplyingPastTheMaximum) {
  std::string e = expand_err("a[1-1000]b[1-1001]");
  EXPECT_NE(e.find("more than 1000000 names"), std::string::npos) << e;
}

TEST(Hostlist, HugeProductsFailFastWithoutOverflow) {
  expand_err("a[0-999999]b[0-999999]c[0-999999]d[0-999999]e[0-999999]");
}

TEST(Hostlist, ManyRangesInOneGroupPastTheMaximum) {
  std::string expr = "n[";
  for (int i = 0; i < 11; ++i) expr += (i ? "," : "") + std::string("0-99999");
  expr += "]";
  expand_err(expr);  // 11 x 100000
}

TEST(Hostlist, TooManyBytesOfNames) {
  std::string e = expand_err(std::string(100, 'x') + "[1-1000000]");
  EXPECT_NE(e.find("MiB"), std::string::npos) << e;
}

TEST(Hostlist, LargestNumberFits) {
  EXPECT_EQ(expand_ok("n[18446744073709551615]"), names{"n18446744073709551615"});
  EXPECT_EQ(expand_ok("n[18446744073709551614-18446744073709551615]"),
            (names{"n18446744073709551614", "n18446744073709551615"}));
}

TEST(Hostlist, NumberOverflowIsAnError) {
  std::string e = expand_err("n[18446744073709551616]");
  EXPECT_NE(e.find("too large"), std::string::npos) << e;
  expand_err("n[1-99999999999999999999999]");
}

TEST(Hostlist, LongZeroPaddingIsKept) {
  EXPECT_EQ(expand_ok("n[0000000000000000000000001-2]"),
            (names{"n0000000000000000000000001", "n0000000000000000000000002"}));
}

// ---- errors ----

TEST(HostlistError, Empty) { EXPECT_EQ(expand_err(""), "bad host list \"\": it is empty"); }

TEST(HostlistError, UnclosedBracket) {
  EXPECT_EQ(expand_err("node[1-4"), "bad host list \"node[1-4\" at character 5: the '[' is never closed");
  expand_err("node[");
  expand_err("[");
  expand_err("node[1-4,");
  expand_err("node[1-");
  expand_err("a[1-2],b[3");
}

TEST(HostlistError, CloseWithoutOpen) {
  EXPECT_EQ(expand_err("node1-4]"), "bad host list \"node1-4]\" at character 8: a ']' without its '['");
  expand_err("n[1-3]]");
  expand_err("]");
}

TEST(HostlistError, NestedBrackets) {
  std::string e = expand_err("node[[1-2]]");
  EXPECT_NE(e.find("'[' inside brackets"), std::string::npos) << e;
  expand_err("node[1[2]]");
}

TEST(HostlistError, EmptyBrackets) {
  EXPECT_EQ(expand_err("node[]"), "bad host list \"node[]\" at character 5: empty brackets");
}

TEST(HostlistError, ReversedRange) {
  EXPECT_EQ(expand_err("node[5-3]"), "bad host list \"node[5-3]\" at character 6: the range 5-3 is reversed; write 3-5");
  expand_err("node[10-09]");
}

TEST(HostlistError, NonDigitRanges) {
  expand_err("node[a-c]");
  expand_err("node[1-b]");
  expand_err("node[1a]");
  expand_err("node[0x1]");
  expand_err("node[+1]");
  expand_err("node[1.5]");
  std::string e = expand_err("node[a]");
  EXPECT_NE(e.find("'a' where a digit or ']' belongs"), std::string::npos) << e;
}

TEST(HostlistError, MissingBounds) {
  std::string e = expand_err("node[-3]");
  EXPECT_NE(e.find("without its lower bound"), std::string::npos) << e;
  e = expand_err("node[1-]");
  EXPECT_NE(e.find("without its upper bound"), std::string::npos) << e;
  expand_err("node[1--3]");
  expand_err("node[1-,3]");
}

TEST(HostlistError, SecondDashInARange) {
  std::string e = expand_err("node[1-2-3]");
  EXPECT_NE(e.find("'-' where ',' or ']' belongs"), std::string::npos) << e;
}

TEST(HostlistError, EmptyRangesInAGroup) {
  EXPECT_EQ(expand_err("node[1,,2]"), "bad host list \"node[1,,2]\" at character 8: an empty range");
  expand_err("node[1,]");
  expand_err("node[,1]");
}

TEST(HostlistError, EmptyNamesInAList) {
  EXPECT_EQ(expand_err("a,,b"), "bad host list \"a,,b\" at character 3: an empty name");
  expand_err("a,");
  expand_err(",a");
  expand_err(",");
}

TEST(HostlistError, WhitespaceIsNotAllowed) {
  std::string e = expand_err("a b");
  EXPECT_NE(e.find("at character 2"), std::string::npos) << e;
  EXPECT_NE(e.find("whitespace"), std::string::npos) << e;
  expand_err(" a");
  expand_err("a ");
  expand_err("a, b");
  expand_err("a\tb");
  expand_err("a\nb");
  expand_err("n[1- 2]");
  expand_err("n[1 ,2]");
}

TEST(HostlistError, ControlBytesAreEscapedInTheMessage) {
  std::string e = expand_err(std::string("a\x01", 2));
  EXPECT_NE(e.find("\\x01"), std::string::npos) << e;
  expand_err(std::string("a\0b", 3));
}

TEST(HostlistError, LongExpressionsAreCutInTheMessage) {
  std::string e = expand_err(std::string(500, 'a') + "[");
  EXPECT_LT(e.size(), 200u) << e;
  EXPECT_NE(e.find("..."), std::string::npos) << e;
}

TEST(HostlistError, FailureClearsNothingButReturnsEmpty) {
  std::string error = "previous";
  EXPECT_TRUE(expand_hostlist("n[", error).empty());
  EXPECT_NE(error, "previous");
}

// ---- first_host ----

TEST(FirstHost, Forms) {
  EXPECT_EQ(first_ok("login"), "login");
  EXPECT_EQ(first_ok("node[01-04,07]"), "node01");
  EXPECT_EQ(first_ok("n[08-11]"), "n08");
  EXPECT_EQ(first_ok("rack[1-2]-n[01-02]"), "rack1-n01");
  EXPECT_EQ(first_ok("a,b[1-3],c"), "a");
  EXPECT_EQ(first_ok("b[2-3],a"), "b2");
  EXPECT_EQ(first_ok("n[3,1-2]"), "n3");
  EXPECT_EQ(first_ok("n[5]"), "n5");
  EXPECT_EQ(first_ok("n[1-2]-ib"), "n1-ib");
}

TEST(FirstHost, AgreesWithExpansion) {
  for (std::string_view expr : {"a", "a,b", "n[1-4]", "n[01-04,07]", "rack[1-2]-n[01-02]", "x[3,1]y[9-10]z",
                                "[7-9]", "a[1-10]b[0001-0010]"}) {
    std::string error;
    auto all = expand_hostlist(expr, error);
    ASSERT_FALSE(all.empty()) << expr;
    EXPECT_EQ(first_ok(expr), all.front()) << expr;
  }
}

TEST(FirstHost, FailsWhereExpansionFails) {
  // Malformed anywhere, even after the first name; expand_err checks first_host too.
  expand_err("a,b[");
  expand_err("a,b[3-1]");
  expand_err("a,,b");
  expand_err("a,b c");
  expand_err("a,n[0-1000000]");
}

// ---- tasks per node ----

TEST(TasksPerNode, Forms) {
  EXPECT_EQ(tasks_ok("6"), counts{6});
  EXPECT_EQ(tasks_ok("4,1(x2)"), (counts{4, 1, 1}));
  EXPECT_EQ(tasks_ok("2(x3),1"), (counts{2, 2, 2, 1}));
  EXPECT_EQ(tasks_ok("1(x4)"), (counts{1, 1, 1, 1}));
  EXPECT_EQ(tasks_ok("2(x2),3,1(x2)"), (counts{2, 2, 3, 1, 1}));
  EXPECT_EQ(tasks_ok("8,8"), (counts{8, 8}));
  EXPECT_EQ(tasks_ok("3(x1)"), counts{3});
  EXPECT_EQ(tasks_ok("0"), counts{0});
  EXPECT_EQ(tasks_ok("007"), counts{7});
}

TEST(TasksPerNode, LargestCount) {
  EXPECT_EQ(tasks_ok("4294967295"), counts{4294967295u});
  std::string e = tasks_err("4294967296");
  EXPECT_NE(e.find("too large"), std::string::npos) << e;
  tasks_err("1(x99999999999)");
}

TEST(TasksPerNode, BoundOnEntries) {
  EXPECT_EQ(tasks_ok("2(x1000000)").size(), max_hostlist_hosts);
  std::string e = tasks_err("2(x1000001)");
  EXPECT_NE(e.find("more than 1000000 entries"), std::string::npos) << e;
  tasks_err("1(x600000),1(x600000)");
  tasks_err("1(x1000000),1");
}

TEST(TasksPerNode, Errors) {
  EXPECT_EQ(tasks_err(""), "bad tasks-per-node list \"\": it is empty (write counts like \"4,1(x2)\")");
  EXPECT_EQ(tasks_err("4(x0)"),
            "bad tasks-per-node list \"4(x0)\" at character 4: a repetition of 0 (write counts like \"4,1(x2)\")");
  for (std::string_view bad : {",", "4,", ",4", "4,,1", "4(x2", "4(2)", "4(x)", "(x2)", "4 ,1", " 4", "4 ", "a",
                               "4(x2)1", "4(x2)(x3)", "-1", "+1", "4(y2)", "4(x-2)", "4(", "4(x", "4x2", "1.5",
                               "4(X2)"}) {
    tasks_err(bad);
  }
}

}  // namespace
}  // namespace tfb
