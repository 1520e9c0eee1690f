#!/usr/bin/env python3
"""Generates the tokenizer's Unicode tables.

Default: src/tokenizer/unicode_tables.cc, the code point category table the tokenizer uses.
--normalization: src/tokenizer/unicode_normalization_tables.cc, what BERT's normalizer needs
(canonical decompositions, combining classes, nonspacing marks, lowercase mappings).

The pre-tokenizer regexes of byte-level BPE models (\\p{L}, \\p{N}, ...) classify code points by
their Unicode General_Category. We reduce the 30 categories to the 8 classes the tokenizer
needs and store the result as sorted range starts: each entry packs (first code point << 8 |
class), and a range ends where the next begins. Unassigned code points (Cn) get kUnassigned.

The data comes from Python's unicodedata, so the table follows the Unicode version of the
Python that runs this script (it is written into the output). llama.cpp generates its table from
the latest UnicodeData.txt, which may be newer: code points assigned after our version are
kUnassigned here and a letter/symbol/... there.

The normalization tables come from unicodedata2 too, except the lowercase mappings: Python's
str.lower() uses the interpreter's own Unicode version (Python 3.11: 14.0), which is written
into the output beside the other. Only one code point lowercases to more than one (U+0130 to
"i" + U+0307); the C++ side spells it out and the script checks that it stays alone.

Usage: .venv/bin/python scripts/gen_unicode_tables.py > src/tokenizer/unicode_tables.cc
       .venv/bin/python scripts/gen_unicode_tables.py --normalization \
           > src/tokenizer/unicode_normalization_tables.cc
"""

from __future__ import annotations

import sys
try:
    # Pinned in scripts/requirements.txt to the Unicode version llama.cpp's tables follow
    # (15.1), so both classify every code point alike.
    import unicodedata2 as unicodedata
except ImportError:  # the interpreter's own tables (Python 3.11: Unicode 14.0)
    import unicodedata

MAX_CODEPOINT = 0x10FFFF

# Must match strata::tokenizer::UnicodeClass in include/strata/tokenizer/unicode.h.
CLASSES = {
    "kUnassigned": 0,
    "kNumber": 1,
    "kLetter": 2,
    "kSeparator": 3,
    "kMark": 4,
    "kPunctuation": 5,
    "kSymbol": 6,
    "kControl": 7,
}

# General_Category (first letter, or the whole value for Cn) -> class.
CATEGORY_TO_CLASS = {
    "L": "kLetter",       # Lu Ll Lt Lm Lo
    "N": "kNumber",       # Nd Nl No
    "Z": "kSeparator",    # Zs Zl Zp
    "M": "kMark",         # Mn Mc Me
    "P": "kPunctuation",  # Pc Pd Ps Pe Pi Pf Po
    "S": "kSymbol",       # Sm Sc Sk So
    "C": "kControl",      # Cc Cf Cs Co
}


def class_of(cp: int) -> str:
    category = unicodedata.category(chr(cp))
    if category == "Cn":
        return "kUnassigned"
    return CATEGORY_TO_CLASS[category[0]]


def ranges() -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for cp in range(MAX_CODEPOINT + 1):
        cls = class_of(cp)
        if not out or out[-1][1] != cls:
            out.append((cp, cls))
    return out


def write_u32_array(w, name: str, values: list[int]) -> None:
    w(f"const uint32_t {name}[{len(values)}] = {{\n")
    # Eight per line: the layout clang-format gives it at 100 columns.
    for i in range(0, len(values), 8):
        w("    " + ", ".join(f"0x{v:08X}" for v in values[i:i + 8]) + ",\n")
    w("};\n")
    w(f"const size_t k{name[1:]}Size = {len(values)};\n\n")


HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3  # decomposed algorithmically in C++
MULTI_CHAR_LOWERCASE = {0x0130: [0x0069, 0x0307]}  # spelled out in C++


def canonical_decompositions() -> list[tuple[int, int, int]]:
    """(cp, first, second or 0) for each one-step canonical decomposition."""
    out = []
    for cp in range(MAX_CODEPOINT + 1):
        if HANGUL_FIRST <= cp <= HANGUL_LAST or 0xD800 <= cp <= 0xDFFF:
            continue
        d = unicodedata.decomposition(chr(cp))
        if not d or d.startswith("<"):  # none, or a compatibility decomposition (NFKD only)
            continue
        parts = [int(x, 16) for x in d.split()]
        assert 1 <= len(parts) <= 2, (hex(cp), d)
        out.append((cp, parts[0], parts[1] if len(parts) == 2 else 0))
    return out


def packed_ranges(value_of) -> list[int]:
    """Sorted range starts packed as first code point << 8 | value (value < 256)."""
    out: list[int] = []
    last = None
    for cp in range(MAX_CODEPOINT + 1):
        v = value_of(cp)
        assert 0 <= v < 256
        if v != last:
            out.append(cp << 8 | v)
            last = v
    return out


def lowercase_pairs() -> list[int]:
    out: list[int] = []
    for cp in range(MAX_CODEPOINT + 1):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        lower = [ord(c) for c in chr(cp).lower()]
        if lower == [cp]:
            continue
        if len(lower) > 1:
            assert MULTI_CHAR_LOWERCASE.get(cp) == lower, (hex(cp), lower)
            continue
        out += [cp, lower[0]]
    return out


def main_normalization() -> int:
    import unicodedata as interpreter_unicodedata
    decompositions = canonical_decompositions()
    w = sys.stdout.write
    w("// GENERATED by scripts/gen_unicode_tables.py --normalization from Python's unicodedata\n")
    w(f"// (Unicode {unicodedata.unidata_version}; lowercase mappings from str.lower(), Unicode "
      f"{interpreter_unicodedata.unidata_version}).\n")
    w("// Do not edit.\n")
    w('#include "strata/tokenizer/unicode_normalization.h"\n\n')
    w("namespace strata::tokenizer::internal {\n\n")
    w(f'const char kLowercaseUnicodeVersion[] = "{interpreter_unicodedata.unidata_version}";\n\n')
    w("// One-step canonical decompositions (UnicodeData.txt field 5 without a <tag>), sorted by\n")
    w("// code point, three words each: code point, first, second (0 for a singleton). Hangul\n")
    w("// syllables are decomposed by formula instead.\n")
    write_u32_array(w, "kCanonicalDecompositions", [v for t in decompositions for v in t])
    w("// Canonical_Combining_Class: first code point << 8 | class, sorted; a range runs up to\n")
    w("// the next entry's first code point.\n")
    write_u32_array(w, "kCombiningClassRanges",
                    packed_ranges(lambda cp: unicodedata.combining(chr(cp))))
    w("// General_Category Mn (nonspacing marks): first code point << 8 | 1 where a run of them\n")
    w("// starts, first code point << 8 | 0 where it ends, sorted.\n")
    write_u32_array(w, "kNonspacingMarkRanges", packed_ranges(
        lambda cp: 1 if unicodedata.category(chr(cp)) == "Mn" else 0))
    w("// Simple lowercase mappings, sorted by code point, two words each: code point, lowercase.\n")
    write_u32_array(w, "kLowercasePairs", lowercase_pairs())
    w("}  // namespace strata::tokenizer::internal\n")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--normalization"]:
        return main_normalization()
    if sys.argv[1:]:
        sys.exit("usage: gen_unicode_tables.py [--normalization]")
    table = ranges()
    w = sys.stdout.write
    w("// GENERATED by scripts/gen_unicode_tables.py from Python's unicodedata\n")
    w(f"// (Unicode {unicodedata.unidata_version}). Do not edit.\n")
    w("//\n")
    w("// kUnicodeClassRanges[i] = first code point << 8 | UnicodeClass; the range runs up to\n")
    w("// the next entry's first code point (the last one up to U+10FFFF).\n")
    w('#include "strata/tokenizer/unicode.h"\n\n')
    w("namespace strata::tokenizer::internal {\n\n")
    w(f'const char kUnicodeVersion[] = "{unicodedata.unidata_version}";\n\n')
    w("// UnicodeClass of U+0000..U+00FF, for the common case without a search.\n")
    w("const uint8_t kLatin1Classes[256] = {\n")
    for row in range(0, 256, 32):
        items = ", ".join(str(CLASSES[class_of(cp)]) for cp in range(row, row + 32))
        w(f"    {items},\n")
    w("};\n\n")
    w(f"const uint32_t kUnicodeClassRanges[{len(table)}] = {{\n")
    # Eight per line: the layout clang-format gives it at 100 columns.
    for i in range(0, len(table), 8):
        items = ", ".join(f"0x{cp << 8 | CLASSES[cls]:08X}" for cp, cls in table[i:i + 8])
        w(f"    {items},\n")
    w("};\n\n")
    w(f"const size_t kNumUnicodeClassRanges = {len(table)};\n\n")
    w("}  // namespace strata::tokenizer::internal\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
