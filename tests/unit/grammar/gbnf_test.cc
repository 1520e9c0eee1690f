#include "strata/grammar/gbnf.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grammar_test_util.h"

namespace strata::grammar {
namespace {

using testing::CompileForBytes;
using testing::MatchesBytes;

struct GbnfCase {
  const char* name;
  const char* grammar;
  std::vector<std::string> accept;
  std::vector<std::string> reject;
};

class GbnfLanguage : public ::testing::TestWithParam<GbnfCase> {};

TEST_P(GbnfLanguage, AcceptsExactlyItsLanguage) {
  const GbnfCase& c = GetParam();
  testing::ExpectLanguage(ParseGbnf(c.grammar), c.accept, c.reject);
}

INSTANTIATE_TEST_SUITE_P(
    Features, GbnfLanguage,
    ::testing::Values(
        GbnfCase{"literal", R"(root ::= "abc")", {"abc"}, {"", "ab", "abcd", "abd"}},
        GbnfCase{"escapes",
                 R"(root ::= "\n\t\r\\\"\x41\u00e9\U0001F600")",
                 {"\n\t\r\\\"A\xc3\xa9\xf0\x9f\x98\x80"},
                 {"\n\t\r\\\"A"}},
        GbnfCase{"alternation", R"(root ::= "a" | "bc" | "")", {"a", "bc", ""}, {"b", "abc"}},
        GbnfCase{"class", R"(root ::= [a-c0-9_])", {"a", "c", "5", "_"}, {"d", "", "ab"}},
        GbnfCase{"negated_class", R"(root ::= [^a-c])", {"d", "\xc3\xa9", "\n"}, {"a", "b", ""}},
        GbnfCase{"class_escapes", R"(root ::= [\]\[\-\\])", {"]", "[", "-", "\\"}, {"a"}},
        GbnfCase{"dot",
                 R"(root ::= .)",
                 {"a", "\xe2\x82\xac", "\xf0\x9f\x98\x80"},
                 {"", "ab", "\xe2\x82", "\xed\xa0\x80"}},
        GbnfCase{"star", R"(root ::= "a"*)", {"", "a", "aaaa"}, {"b", "ab"}},
        GbnfCase{"plus", R"(root ::= "ab"+)", {"ab", "abab"}, {"", "a", "aba"}},
        GbnfCase{"optional", R"(root ::= "a" "b"?)", {"a", "ab"}, {"abb", ""}},
        GbnfCase{"exact_count", R"(root ::= [0-9]{3})", {"123"}, {"12", "1234"}},
        GbnfCase{"at_least", R"(root ::= "x"{2,})", {"xx", "xxxxx"}, {"x", ""}},
        GbnfCase{
            "between", R"(root ::= ("ab"){1,3})", {"ab", "abab", "ababab"}, {"", "abababab", "a"}},
        GbnfCase{"zero_count", R"(root ::= "a" "b"{0} "c")", {"ac"}, {"abc"}},
        GbnfCase{"groups_and_rules",
                 "root ::= greeting (\", \" name)+\n"
                 "greeting ::= \"hi\" | \"hello\"\n"
                 "name ::= [A-Z] [a-z]*  # a capitalised word\n",
                 {"hi, Bob", "hello, Ann, Z"},
                 {"hi", "hi, bob", "hey, Bob"}},
        GbnfCase{
            "right_recursion", "root ::= \"(\" root \")\" | \"x\"", {"x", "((x))"}, {"(x", "()"}},
        GbnfCase{"multiline_alternatives",
                 "root ::=\n  \"a\"\n  | \"b\"\nother ::= \"c\"",
                 {"a", "b"},
                 {"c"}},
        GbnfCase{"ambiguous", R"(root ::= ("a" | "ab") "b"*)", {"a", "ab", "abb"}, {"b", ""}},
        GbnfCase{"nullable_rules",
                 "root ::= e \"x\" e\ne ::= \"\" | \"y\"",
                 {"x", "yx", "xy", "yxy"},
                 {"yy", ""}},
        GbnfCase{"unicode_literal",
                 "root ::= \"h\xc3\xa9\xe2\x82\xac\"",
                 {"h\xc3\xa9\xe2\x82\xac"},
                 {"he"}}),
    [](const ::testing::TestParamInfo<GbnfCase>& info) { return std::string(info.param.name); });

struct GbnfError {
  const char* grammar;
  const char* message;  // substring of the error
};

class GbnfErrors : public ::testing::TestWithParam<GbnfError> {};

TEST_P(GbnfErrors, NameTheProblem) {
  auto g = ParseGbnf(GetParam().grammar);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find(GetParam().message), std::string::npos)
      << g.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, GbnfErrors,
    ::testing::Values(GbnfError{"root ::= foo", "line 1, column 10: undefined rule 'foo'"},
                      GbnfError{"start ::= \"a\"", "no 'root' rule"},
                      GbnfError{"root ::= root \"a\" | \"b\"", "rule 'root' is left-recursive"},
                      GbnfError{"root ::= e x\ne ::= \"\" | \"y\"\nx ::= root \"z\"",
                                "is left-recursive"},
                      GbnfError{R"(root ::= "\q")", "bad escape '\\q'"},
                      GbnfError{R"(root ::= "\x4")", "bad escape '\\x'"},
                      GbnfError{"root ::= (\"a\"", "unbalanced '('"},
                      GbnfError{"root ::= \"a\")", "unbalanced ')'"},
                      GbnfError{"root ::= [abc", "unbalanced '['"},
                      GbnfError{"root ::= \"abc", "unterminated string literal"},
                      GbnfError{"root ::= \"a\"{1001}", "above the limit 1000"},
                      GbnfError{"root ::= \"a\"{3,2}", "min > max"},
                      GbnfError{"root ::= [z-a]", "out of order"},
                      GbnfError{"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
                      GbnfError{"root = \"a\"", "expected '::='"},
                      GbnfError{"root ::= \"\xff\"", "invalid UTF-8"}));

TEST(Gbnf, NestingDeeperThanTheLimitIsAnError) {
  const std::string deep = "root ::= " + std::string(40, '(') + "\"a\"" + std::string(40, ')');
  auto g = ParseGbnf(deep);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("nested deeper than 32"), std::string::npos);
}

TEST(Gbnf, NestedRepetitionStaysLinearOrFailsOnTheElementLimit) {
  // 1000 x 1000 x 1000 would be 10^9 elements if bodies were copied; factored, it is ~3000.
  auto g = ParseGbnf(R"(root ::= (("a"{1000}){1000}){1000})");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_LT(g->NumElements(), 10000);
}

TEST(Gbnf, OversizedInputIsAnError) {
  const std::string big = "root ::= \"" + std::string(70000, 'a') + "\"";
  auto g = ParseGbnf(big);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("more than the limit 65536"), std::string::npos);
}

TEST(Gbnf, LongRepetitionDoesNotGrowTheStack) {
  auto g = ParseGbnf("root ::= (\"ab\" | \"c\")*");
  ASSERT_TRUE(g.ok());
  auto compiled = CompileForBytes(*g);
  EXPECT_TRUE(MatchesBytes(compiled, std::string(20000, 'c')));
}

}  // namespace
}  // namespace strata::grammar
