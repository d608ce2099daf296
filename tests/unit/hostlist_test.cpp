// The Slurm host-list grammar of src/core/hostlist.h: first_host checks the whole
// expression and returns its first name. These tests are the spec.
#include "hostlist.h"

#include <gtest/gtest.h>

#include <string>

namespace tfb {
namespace {

/// Expects first_host to fail; returns the error.
std::string first_err(std::string_view expr) {
  std::string error;
  EXPECT_EQ(first_host(expr, error), "") << expr;
  EXPECT_FALSE(error.empty()) << expr;
  return error;
}

std::string first_ok(std::string_view expr) {
  std::string error;
  std::string out = first_host(expr, error);
  EXPECT_FALSE(out.empty()) << expr << ": " << error;
  EXPECT_EQ(error, "") << expr;
  return out;
}

TEST(FirstHost, SizesUpToTheMaximumAreAccepted) {
  EXPECT_EQ(first_ok("n[1-1000000]"), "n1");
  EXPECT_EQ(first_ok("a[1-1000]b[0001-1000]"), "a1b0001");
  EXPECT_EQ(first_ok("n[18446744073709551615]"), "n18446744073709551615");
  EXPECT_EQ(first_ok("n[0000000000000000000000001-2]"), "n0000000000000000000000001");
  EXPECT_EQ(first_ok("[1-3]"), "1");
  EXPECT_EQ(first_ok("node[1-2].cluster"), "node1.cluster");
}



// ---- one bracket group ----

// ---- lists ----

// ---- several bracket groups in one name ----

// ---- sizes and big numbers ----

TEST(Hostlist, OneRangePastTheMaximum) {
  std::string e = first_err("n[0-1000000]");
  EXPECT_NE(e.find("more than 1000000 names"), std::string::npos) << e;
}

TEST(Hostlist, ItemsSummingPastTheMaximum) {
  std::string e = first_err("a[1-600000],b[1-600000]");
  EXPECT_NE(e.find("more than 1000000 names"), std::string::npos) << e;
  first_err("a[1-1000000],b");
}

TEST(Hostlist, GroupsMultiplyingPastTheMaximum) {
  std::string e = first_err("a[1-1000]b[1-1001]");
  EXPECT_NE(e.find("more than 1000000 names"), std::string::npos) << e;
}

TEST(Hostlist, HugeProductsFailFastWithoutOverflow) {
  first_err("a[0-999999]b[0-999999]c[0-999999]d[0-999999]e[0-999999]");
}

TEST(Hostlist, ManyRangesInOneGroupPastTheMaximum) {
  std::string expr = "n[";
  for (int i = 0; i < 11; ++i) expr += (i ? "," : "") + std::string("0-99999");
  expr += "]";
  first_err(expr);  // 11 x 100000
}

TEST(Hostlist, TooManyBytesOfNames) {
  std::string e = first_err(std::string(100, 'x') + "[1-1000000]");
  EXPECT_NE(e.find("MiB"), std::string::npos) << e;
}

TEST(Hostlist, NumberOverflowIsAnError) {
  std::string e = first_err("n[18446744073709551616]");
  EXPECT_NE(e.find("too large"), std::string::npos) << e;
  first_err("n[1-99999999999999999999999]");
}

// ---- errors ----

TEST(HostlistError, Empty) { EXPECT_EQ(first_err(""), "bad host list \"\": it is empty"); }

TEST(HostlistError, UnclosedBracket) {
  EXPECT_EQ(first_err("node[1-4"), "bad host list \"node[1-4\" at character 5: the '[' is never closed");
  first_err("node[");
  first_err("[");
  first_err("node[1-4,");
  first_err("node[1-");
  first_err("a[1-2],b[3");
}

TEST(HostlistError, CloseWithoutOpen) {
  EXPECT_EQ(first_err("node1-4]"), "bad host list \"node1-4]\" at character 8: a ']' without its '['");
  first_err("n[1-3]]");
  first_err("]");
}

TEST(HostlistError, NestedBrackets) {
  std::string e = first_err("node[[1-2]]");
  EXPECT_NE(e.find("'[' inside brackets"), std::string::npos) << e;
  first_err("node[1[2]]");
}

TEST(HostlistError, EmptyBrackets) {
  EXPECT_EQ(first_err("node[]"), "bad host list \"node[]\" at character 5: empty brackets");
}

TEST(HostlistError, ReversedRange) {
  EXPECT_EQ(first_err("node[5-3]"), "bad host list \"node[5-3]\" at character 6: the range 5-3 is reversed; write 3-5");
  first_err("node[10-09]");
}

TEST(HostlistError, NonDigitRanges) {
  first_err("node[a-c]");
  first_err("node[1-b]");
  first_err("node[1a]");
  first_err("node[0x1]");
  first_err("node[+1]");
  first_err("node[1.5]");
  std::string e = first_err("node[a]");
  EXPECT_NE(e.find("'a' where a digit or ']' belongs"), std::string::npos) << e;
}

TEST(HostlistError, MissingBounds) {
  std::string e = first_err("node[-3]");
  EXPECT_NE(e.find("without its lower bound"), std::string::npos) << e;
  e = first_err("node[1-]");
  EXPECT_NE(e.find("without its upper bound"), std::string::npos) << e;
  first_err("node[1--3]");
  first_err("node[1-,3]");
}

TEST(HostlistError, SecondDashInARange) {
  std::string e = first_err("node[1-2-3]");
  EXPECT_NE(e.find("'-' where ',' or ']' belongs"), std::string::npos) << e;
}

TEST(HostlistError, EmptyRangesInAGroup) {
  EXPECT_EQ(first_err("node[1,,2]"), "bad host list \"node[1,,2]\" at character 8: an empty range");
  first_err("node[1,]");
  first_err("node[,1]");
}

TEST(HostlistError, EmptyNamesInAList) {
  EXPECT_EQ(first_err("a,,b"), "bad host list \"a,,b\" at character 3: an empty name");
  first_err("a,");
  first_err(",a");
  first_err(",");
}

TEST(HostlistError, WhitespaceIsNotAllowed) {
  std::string e = first_err("a b");
  EXPECT_NE(e.find("at character 2"), std::string::npos) << e;
  EXPECT_NE(e.find("whitespace"), std::string::npos) << e;
  first_err(" a");
  first_err("a ");
  first_err("a, b");
  first_err("a\tb");
  first_err("a\nb");
  first_err("n[1- 2]");
  first_err("n[1 ,2]");
}

TEST(HostlistError, ControlBytesAreEscapedInTheMessage) {
  std::string e = first_err(std::string("a\x01", 2));
  EXPECT_NE(e.find("\\x01"), std::string::npos) << e;
  first_err(std::string("a\0b", 3));
}

TEST(HostlistError, LongExpressionsAreCutInTheMessage) {
  std::string e = first_err(std::string(500, 'a') + "[");
  EXPECT_LT(e.size(), 200u) << e;
  EXPECT_NE(e.find("..."), std::string::npos) << e;
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

TEST(FirstHost, FailsWhereExpansionFails) {
  // Malformed anywhere, even after the first name; first_err checks first_host too.
  first_err("a,b[");
  first_err("a,b[3-1]");
  first_err("a,,b");
  first_err("a,b c");
  first_err("a,n[0-1000000]");
}


}  // namespace
}  // namespace tfb
