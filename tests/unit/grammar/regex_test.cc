// GCC 12 reports a false -Wmaybe-uninitialized inside libstdc++'s <regex> automaton when built
// with sanitizers; the reference std::regex is only test code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "strata/grammar/regex.h"

#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <string>
#include <vector>

#include "grammar_test_util.h"

namespace strata::grammar {
namespace {

using testing::CompileForBytes;
using testing::MatchesBytes;

struct RegexCase {
  const char* name;
  const char* pattern;
  std::vector<std::string> accept;
  std::vector<std::string> reject;
};

class RegexLanguage : public ::testing::TestWithParam<RegexCase> {};

TEST_P(RegexLanguage, MatchesWholeOutputsOnly) {
  const RegexCase& c = GetParam();
  testing::ExpectLanguage(RegexToGrammar(c.pattern), c.accept, c.reject);
}

INSTANTIATE_TEST_SUITE_P(
    Features, RegexLanguage,
    ::testing::Values(
        RegexCase{"literal", "abc", {"abc"}, {"ab", "abcd", "xabc"}},
        RegexCase{"digits", R"(\d{3}-\d{4})", {"555-1234"}, {"55-1234", "555-12345", "abc-defg"}},
        RegexCase{"non_digit", R"(\D+)", {"ab", "\xc3\xa9"}, {"a1", ""}},
        RegexCase{"word", R"(\w+\W\w+)", {"ab_1 c", "x-y"}, {"ab", "a  b"}},
        RegexCase{"space",
                  R"(a\sb\Sc)",
                  {"a b-c", "a\tbxc",
                   "a\xc2\xa0"
                   "bxc"},
                  {"a b c"}},
        RegexCase{"escapes",
                  R"(\n\r\t\f\v\.\\\/\*\x41\u00e9)",
                  {"\n\r\t\f\v.\\/*A\xc3\xa9"},
                  {"\n\r\t\f\vx\\/*A\xc3\xa9"}},
        RegexCase{"class", "[a-cx-z_]+", {"abc", "z_y"}, {"d", ""}},
        RegexCase{"negated_class", R"([^\d\s]+)", {"ab", "\xe2\x82\xac"}, {"a1", "a b"}},
        RegexCase{"class_escapes", R"([\]\\\-\d])", {"]", "\\", "-", "7"}, {"a"}},
        RegexCase{"dot",
                  "a.c",
                  {"abc",
                   "a\xe2\x82\xac"
                   "c"},
                  {"a\nc", "a\rc", "ac"}},
        RegexCase{"groups", "(ab)+(?:cd)?(?<tail>e|f)", {"abe", "ababcdf"}, {"cde", "abcd"}},
        RegexCase{"alternation", "cat|dog|", {"cat", "dog", ""}, {"catdog"}},
        RegexCase{
            "quantifiers", "a*b+c?d{2}e{1,}f{1,2}", {"bddef", "aabbcddeeff"}, {"bdef", "bddefff"}},
        RegexCase{"lazy_quantifiers", "a+?b*?c??", {"a", "aabbc"}, {"b"}},
        RegexCase{"anchors", "^(ab|cd)$", {"ab", "cd"}, {"abcd"}},
        RegexCase{"anchored_alternatives", "^a|b$", {"a", "b"}, {"ab"}},
        RegexCase{"nested", "((a|b)c){2}", {"acbc", "acac"}, {"ac", "acbcac"}},
        RegexCase{"unicode",
                  "\xc3\xa9+[\xe2\x82\xac-\xe2\x82\xaf]",
                  {"\xc3\xa9\xe2\x82\xac"},
                  {"e\xe2\x82\xac"}},
        RegexCase{"braced_unicode", R"(\u{1F600})", {"\xf0\x9f\x98\x80"}, {"x"}},
        RegexCase{"literal_brackets", "a]b}", {"a]b}"}, {"ab"}}),
    [](const ::testing::TestParamInfo<RegexCase>& info) { return std::string(info.param.name); });

struct RegexError {
  const char* pattern;
  const char* message;
};

class RegexErrors : public ::testing::TestWithParam<RegexError> {};

TEST_P(RegexErrors, NameTheConstruct) {
  auto g = RegexToGrammar(GetParam().pattern);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find(GetParam().message), std::string::npos)
      << g.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RegexErrors,
    ::testing::Values(
        RegexError{R"((a)\1)", "at offset 3: backreference '\\1' is not supported"},
        RegexError{R"((?<x>a)\k<x>)", "backreference '\\k'"},
        RegexError{"a(?=b)", "lookaround assertions are not supported"},
        RegexError{"a(?!b)", "lookaround"}, RegexError{"(?<=a)b", "lookaround"},
        RegexError{"a^b", "anchor '^' is only supported at the start"},
        RegexError{"a$b", "anchor '$' is only supported at the end"},
        RegexError{R"(a\bc)", "word boundary '\\b'"}, RegexError{"(ab", "unbalanced '('"},
        RegexError{"ab)", "unbalanced ')'"}, RegexError{"[ab", "unbalanced '['"},
        RegexError{"*a", "quantifier '*' has nothing to repeat"}, RegexError{"a{2,1}", "min > max"},
        RegexError{"a{1001}", "above the limit 1000"}, RegexError{"a{x}", "invalid quantifier '{'"},
        RegexError{"a**", "quantifier after a quantifier"}, RegexError{R"(\q)", "bad escape '\\q'"},
        RegexError{R"(\x4g)", "expected hex digits"},
        RegexError{"[z-a]", "class range out of order"},
        RegexError{"ab\\", "pattern ends with '\\'"}));

TEST(Regex, PatternLongerThanTheLimitIsAnError) {
  auto g = RegexToGrammar(std::string(5000, 'a'));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("more than the limit 4096"), std::string::npos);
}

TEST(Regex, DeepNestingIsAnError) {
  auto g = RegexToGrammar(std::string(100, '(') + "a" + std::string(100, ')'));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("nested deeper than 32"), std::string::npos);
}

TEST(Regex, JsonStringEmbeddingEscapesWhatJsonMustEscape) {
  Grammar g;
  RegexEmbedOptions options;
  options.json_string = true;
  auto root = AddRegexRules(R"(a"\\\n.)", "p", options, {}, &g);
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  g.root = *root;
  auto compiled = CompileForBytes(g);
  EXPECT_TRUE(MatchesBytes(compiled, R"(a\"\\\nb)"));
  EXPECT_TRUE(MatchesBytes(compiled, R"(a\"\\\n\")"));
  EXPECT_TRUE(MatchesBytes(compiled, R"(a\"\\\n\u0001)"));
  EXPECT_FALSE(MatchesBytes(compiled, "a\"\\\nb"));  // raw quote, backslash, newline
  EXPECT_FALSE(MatchesBytes(compiled, "a\\\"\\\\\\n\x01"));
}

TEST(Regex, SearchModePadsUnanchoredSides) {
  Grammar g;
  RegexEmbedOptions options;
  options.search = true;
  auto root = AddRegexRules("^ab|cd", "p", options, {}, &g);
  ASSERT_TRUE(root.ok());
  g.root = *root;
  auto compiled = CompileForBytes(g);
  EXPECT_TRUE(MatchesBytes(compiled, "abxyz"));
  EXPECT_TRUE(MatchesBytes(compiled, "xxcdyy"));
  EXPECT_FALSE(MatchesBytes(compiled, "xab"));
}

// Differential check against std::regex (ECMAScript), on ASCII text (std::regex works on bytes).
const char* const kDifferentialPatterns[] = {
    R"(\d{1,3}(\.\d{1,3}){3})",
    "(a|ab)(c|bcd)(d*)",
    "[a-f0-9]{2,4}-?[^a-z\\s]*",
    R"(\w+@\w+\.(com|org))",
    "(x+x+)+y",
    "(?:ab|a)*?b{0,2}",
    R"([\x20-\x7e]{0,5}!)",
    R"(\s*[A-Z][a-z]+\s*)",
    "(a|b|c)?(b|c)*d{0,3}",
    "colou?r|gr(a|e)y",
};

class RegexDifferential : public ::testing::TestWithParam<int> {};

TEST_P(RegexDifferential, AgreesWithStdRegex) {
  const char* pattern = kDifferentialPatterns[GetParam()];
  auto g = RegexToGrammar(pattern);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto compiled = CompileForBytes(*g);
  const std::regex re(pattern, std::regex::ECMAScript);
  auto ascii = [](int32_t id) { return id < 0x80; };
  // Outputs of the matcher (random allowed ASCII tokens) fully match std::regex.
  int ended = 0;
  for (uint32_t seed = 1; seed <= 100; ++seed) {
    std::mt19937 rng(seed * 7919 + GetParam());
    bool end = false;
    const std::string s = testing::RandomWalk(compiled, &rng, 40, ascii, &end);
    if (!end) continue;
    ++ended;
    EXPECT_TRUE(std::regex_match(s, re)) << pattern << " produced '" << s << "'";
  }
  EXPECT_GE(ended, 3);
  // Random strings over the pattern's alphabet that std::regex matches are accepted, and
  // strings it rejects are rejected.
  std::string alphabet;
  for (const char* c = pattern; *c; ++c) {
    if (alphabet.find(*c) == std::string::npos) alphabet += *c;
  }
  alphabet += "0123456789abcdefxyz .@-!\t";
  std::mt19937 rng(1234 + GetParam());
  int matched = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string s;
    const int len = static_cast<int>(rng() % 12);
    for (int k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
    const bool expected = std::regex_match(s, re);
    matched += expected;
    EXPECT_EQ(MatchesBytes(compiled, s), expected) << pattern << " on '" << s << "'";
  }
  (void)matched;
}

INSTANTIATE_TEST_SUITE_P(Patterns, RegexDifferential,
                         ::testing::Range(0, static_cast<int>(std::size(kDifferentialPatterns))));

}  // namespace
}  // namespace strata::grammar
