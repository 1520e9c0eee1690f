#include "strata/embedding/semantic_guard.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace strata::embedding {
namespace {

// "text" or "text:name" per token ("#" marks a number, "$" a symbol).
std::vector<std::string> Show(std::string_view text) {
  std::vector<std::string> out;
  for (const GuardToken& t : GuardTokenize(text)) {
    std::string s = t.kind == GuardTokenKind::kNumber   ? "#" + t.text
                    : t.kind == GuardTokenKind::kSymbol ? "$" + t.text
                                                        : t.text;
    if (t.name) s += ":name";
    out.push_back(s);
  }
  return out;
}

using S = std::vector<std::string>;

// Checks both orders (the guard is symmetric) and names the rule on failure.
void ExpectVeto(std::string_view a, std::string_view b, GuardVeto want) {
  EXPECT_EQ(GuardVetoName(SemanticGuardVeto(a, b)), GuardVetoName(want)) << a << " | " << b;
  EXPECT_EQ(GuardVetoName(SemanticGuardVeto(b, a)), GuardVetoName(want)) << b << " | " << a;
}

void ExpectAllowed(std::string_view a, std::string_view b) { ExpectVeto(a, b, GuardVeto::kNone); }

TEST(GuardTokenize, LowercasesWordsAndSplitsAtPunctuationAndApostrophes) {
  EXPECT_EQ(Show("What's Australia's capital?"),
            (S{"what", "s", "australia:name", "s", "capital"}));
  EXPECT_EQ(Show("I'm here. Then I left"), (S{"i", "m", "here", "then", "i", "left"}));
  EXPECT_EQ(Show(""), S{});
  EXPECT_EQ(Show(" .,?! "), S{});
}

TEST(GuardTokenize, NamesAreCapitalizedWordsAwayFromSentenceStarts) {
  EXPECT_EQ(Show("Fly from London to New York"),
            (S{"fly", "from", "london:name", "to", "new:name", "york:name"}));
  EXPECT_EQ(Show("hi: Where is it? Paris! ok; Rome\nNice"),
            (S{"hi", "where", "is", "it", "paris", "ok", "rome", "nice"}));
  EXPECT_EQ(Show("Translate 'Good night' into French"),
            (S{"translate", "good", "night", "into", "french:name"}));
}

TEST(GuardTokenize, ReadsNumbersWithDecimalsThousandsAndWords) {
  EXPECT_EQ(Show("$300,000 at 6.5% over 3.14159 [5, 2]"),
            (S{"$$", "#300000", "at", "#6.5", "$%", "over", "#3.14159", "#5", "#2"}));
  EXPECT_EQ(Show("twenty-one, two hundred five, nineteen hundred, five thousand"),
            (S{"#21", "#205", "#1900", "#5000"}));
  EXPECT_EQ(Show("one day, one hundred"), (S{"one", "day", "#100"}));
  EXPECT_EQ(Show("90th K2 2FA"), (S{"#90", "th", "k:name", "#2", "#2", "fa:name"}));
  EXPECT_EQ(Show("15 percent"), (S{"#15", "$%"}));
}

TEST(GuardTokenize, MinusOnlyBeforeANumber) {
  EXPECT_EQ(Show("3x - 4 = -5"), (S{"#3", "x", "$-", "#4", "$=", "$-", "#5"}));
  EXPECT_EQ(Show("a 3-day fat-soluble x - y"), (S{"a", "#3", "day", "fat", "soluble", "x", "y"}));
  EXPECT_EQ(Show("a != b == c"), (S{"a", "$!", "$=", "b", "$=", "$=", "c"}));
  EXPECT_EQ(Show("C++ and C#"), (S{"c", "$+", "$+", "and", "c:name", "$#"}));
}

TEST(GuardTokenize, ContractedNotBecomesNot) {
  EXPECT_EQ(Show("don't, can't, cannot, won\u2019t"),
            (S{"do", "not", "ca", "not", "can", "not", "wo", "not"}));
}

TEST(GuardTokenize, QuotesOpenAfterANonLetterAndCloseBeforeOne) {
  std::vector<GuardToken> tokens = GuardTokenize("say 'I don't know' or \u201cno\u201d, it's");
  std::vector<int> quotes;
  for (const GuardToken& t : tokens) quotes.push_back(t.quote);
  // say i do not know or no it s
  EXPECT_EQ(quotes, (std::vector<int>{-1, 0, 0, 0, 0, -1, 1, -1, -1}));
  // A quote never closed is no quote.
  for (const GuardToken& t : GuardTokenize("it 'is open")) EXPECT_EQ(t.quote, -1);
}

TEST(GuardTokenize, KeepsNonAsciiBytesAsLettersAndUnicodePunctuationAsSeparators) {
  EXPECT_EQ(Show("caf\u00e9\u2014na\u00efve\u00a0x"), (S{"caf\u00e9", "na\u00efve", "x"}));
  EXPECT_EQ(Show("100\u00b0F"), (S{"#100", "\u00b0f"}));
}

TEST(SemanticGuard, VetoesAnEntitySwap) {
  ExpectVeto("What is the capital of France?", "What is the capital of Germany?",
             GuardVeto::kNames);
  ExpectVeto("What is the population of New York City?",
             "What is the population of New York State?", GuardVeto::kNames);
}

TEST(SemanticGuard, VetoesANumberChange) {
  ExpectVeto("What is 12 times 12?", "What is 12 times 13?", GuardVeto::kNumbers);
  ExpectVeto("Write a 100-word story.", "Write a five hundred word story.", GuardVeto::kNumbers);
  ExpectVeto("List the first ten primes", "List the first twenty primes", GuardVeto::kNumbers);
}

TEST(SemanticGuard, VetoesADirectionSwap) {
  ExpectVeto("I'm flying from London to New York", "I'm flying from New York to London",
             GuardVeto::kOrder);
  ExpectVeto("What is 2 to the power of 10?", "What is 10 to the power of 2?", GuardVeto::kOrder);
  ExpectVeto("How do I convert a number to a string?", "How do I convert a string to a number?",
             GuardVeto::kReordered);
  ExpectVeto("Convert 5 km to miles.", "Convert 5 miles to km.", GuardVeto::kReordered);
}

TEST(SemanticGuard, VetoesNegationAndPolarity) {
  ExpectVeto("How do I say 'I am hungry'?", "How do I say 'I am not hungry'?", GuardVeto::kQuotes);
  ExpectVeto("Count users who signed up", "Count users who didn't sign up", GuardVeto::kPolarity);
  ExpectVeto("Delete files older than 7 days", "Delete files newer than 7 days",
             GuardVeto::kPolarity);
  ExpectVeto("Sort it in ascending order", "Sort it in descending order", GuardVeto::kPolarity);
  ExpectVeto("How do I turn on dark mode?", "How do I turn off dark mode?", GuardVeto::kPolarity);
}

TEST(SemanticGuard, VetoesAnOperatorChange) {
  ExpectVeto("Solve for x: 3x + 4 = 19", "Solve for x: 3x - 4 = 19", GuardVeto::kSymbols);
  ExpectVeto("What does == do?", "What does != do?", GuardVeto::kSymbols);
}

TEST(SemanticGuard, VetoesAWordSwappedInTheSameFrame) {
  ExpectVeto("Which foods are high in iron?", "Which foods are low in iron?",
             GuardVeto::kSwappedWord);
  ExpectVeto("How long should I boil an egg for a soft yolk?",
             "How long should I boil an egg for a hard yolk?", GuardVeto::kSwappedWord);
  ExpectVeto("Encrypt this file with a password", "Decrypt this file with a password",
             GuardVeto::kSwappedWord);
}

TEST(SemanticGuard, AllowsCasingTyposAndInflections) {
  ExpectAllowed("HOW MANY OUNCES IN A CUP", "How many ounces are in a cup?");
  ExpectAllowed("what's australia's capital city", "What is the capital of Australia?");
  ExpectAllowed("whats the diffrence between affect and effect",
                "What is the difference between 'affect' and 'effect'?");
  ExpectAllowed("how do i instal numpy", "How do I install NumPy?");
  ExpectAllowed("How do vaccines work?", "How does a vaccine work?");
  ExpectAllowed("Tell me about noise cancelling", "Tell me about noise cancellation");
}

TEST(SemanticGuard, AllowsSynonymsAndRewordedQuestions) {
  ExpectAllowed("Who painted the Mona Lisa?", "Which artist painted the Mona Lisa?");
  ExpectAllowed("Please list the first ten prime numbers.", "What are the first 10 primes?");
  ExpectAllowed("Translate 'good morning' into Spanish.",
                "How do you say good morning in Spanish?");
  ExpectAllowed("Why is the sky blue?", "why does the sky look blue");
  ExpectAllowed("What is 15% of 240?", "Calculate 15 percent of 240.");
}

TEST(SemanticGuard, AllowsIdenticalAndEmptyTexts) {
  for (std::string_view text : {"", "   ", "What is the capital of France?", "x + 1 = 2"}) {
    ExpectAllowed(text, text);
  }
  ExpectAllowed("", "hello");  // nothing to disagree about: cosine decides
}

TEST(SemanticGuard, NeverCrashesOnArbitraryBytes) {
  std::mt19937 rng(7);
  // Letters, digits, punctuation, quotes, and bytes of UTF-8 curly quotes, no-break space and
  // invalid sequences, mixed at random.
  const std::string alphabet = "aZ9 .,'\"-+!=\n\xe2\x80\x98\x99\x9c\x9d\xc2\xa0\xff";
  for (int round = 0; round < 2000; ++round) {
    std::string a;
    std::string b;
    for (int k = rng() % 24; k > 0; --k) a += alphabet[rng() % alphabet.size()];
    for (int k = rng() % 24; k > 0; --k) b += alphabet[rng() % alphabet.size()];
    const GuardVeto ab = SemanticGuardVeto(a, b);
    EXPECT_EQ(ab, SemanticGuardVeto(b, a)) << "not symmetric";
    EXPECT_EQ(SemanticGuardVetoes(a, b), SemanticGuardVetoes(b, a)) << "not symmetric";
    EXPECT_EQ(SemanticGuardVeto(a, a), GuardVeto::kNone);
  }
  // Truncated UTF-8 at the end, lone continuation bytes.
  ExpectAllowed("abc\xe2\x80", "abc\xe2\x80");
  ExpectAllowed("\x80\x80", "\x80\x80");
  ExpectVeto("caf\xc3", "caf\xc3 Paris", GuardVeto::kNames);
}

TEST(SemanticGuard, VetoesListsEveryBrokenRuleAndTheFirstIsTheVeto) {
  const std::string_view a = "Convert 5 km to miles in Python";
  const std::string_view b = "Convert 6 km to miles in Rust";
  const uint32_t broken = SemanticGuardVetoes(a, b);
  const auto bit = [](GuardVeto veto) { return uint32_t{1} << static_cast<int>(veto); };
  EXPECT_EQ(broken,
            bit(GuardVeto::kNumbers) | bit(GuardVeto::kNames) | bit(GuardVeto::kSwappedWord));
  EXPECT_EQ(SemanticGuardVeto(a, b), GuardVeto::kNumbers);
  EXPECT_EQ(SemanticGuardVetoes(a, a), 0u);
  // The order rule looks only at the anchors both texts hold.
  EXPECT_EQ(SemanticGuardVetoes("From London to Paris via Rome", "From Paris to London"),
            bit(GuardVeto::kNames) | bit(GuardVeto::kOrder));
}

// A plain O(n m) dynamic program, the reference for the bit-parallel LCS.
size_t ReferenceLcs(const std::vector<std::string_view>& a,
                    const std::vector<std::string_view>& b) {
  std::vector<std::vector<size_t>> l(a.size() + 1, std::vector<size_t>(b.size() + 1, 0));
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t j = 0; j < b.size(); ++j) {
      l[i + 1][j + 1] = a[i] == b[j] ? l[i][j] + 1 : std::max(l[i][j + 1], l[i + 1][j]);
    }
  }
  return l[a.size()][b.size()];
}

TEST(LongestCommonSubsequence, MatchesTheDynamicProgramAcrossWordBoundaries) {
  const std::vector<std::string_view> alphabet = {"a", "b", "c", "d"};
  std::mt19937 rng(11);
  // Sizes around the 64-bit word boundaries.
  for (size_t n : {0, 1, 7, 63, 64, 65, 130}) {
    for (size_t m : {0, 1, 7, 63, 64, 65, 129, 200}) {
      std::vector<std::string_view> a(n);
      std::vector<std::string_view> b(m);
      for (auto& t : a) t = alphabet[rng() % alphabet.size()];
      for (auto& t : b) t = alphabet[rng() % (alphabet.size() - (m % 2))];
      EXPECT_EQ(LongestCommonSubsequence(a, b), ReferenceLcs(a, b)) << n << " x " << m;
    }
  }
}

}  // namespace
}  // namespace strata::embedding
