#!/usr/bin/env python3
"""Writes tests/fidelity/data/tokenizer_corpus.jsonl: the strings the tokenizer parity tests run.

Deterministic (fixed seed, no dependence on the environment): rerunning it reproduces the
committed file byte for byte. Each line is {"id", "category", "text"} for valid UTF-8, or
{"id", "category", "text_hex"} for byte strings that are not valid UTF-8.

    python3 tests/fidelity/make_tokenizer_corpus.py            # rewrite the file
    python3 tests/fidelity/make_tokenizer_corpus.py --check    # fail if it is out of date
"""

import argparse
import json
import pathlib
import random
import sys

SEED = 20250301
OUT = pathlib.Path(__file__).resolve().parent / "data" / "tokenizer_corpus.jsonl"

ENGLISH = [
    "Hello world",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "It was the best of times, it was the worst of times.",
    "Don't stop believing; it's what we've all been told.",
    "I'm sure you'll agree that they'd rather we didn't.",
    "A man, a plan, a canal: Panama.",
    "To be, or not to be, that is the question:",
    "Whether 'tis nobler in the mind to suffer",
    "She sells sea-shells on the sea-shore.",
    "e.g. i.e. etc. Mr. Mrs. Dr. St. vs.",
    "ALL CAPS SENTENCE WITH SHOUTING!!!",
    "mIxEd CaSe TeXt WiTh WeIrD cApS",
    "Supercalifragilisticexpialidocious antidisestablishmentarianism",
    "pneumonoultramicroscopicsilicovolcanoconiosis",
    "The year 2024 had 366 days; 2023 had 365.",
    "Wait... what?! Really?? No way!!",
    "\"Quoted text\" and 'single quotes' and `backticks`",
    "Parentheses (like these) and [brackets] and {braces}.",
    "An em dash — and an en dash – and a hyphen -.",
    "Curly “double” and ‘single’ quotes.",
    "Ellipsis… and bullet • and section § and pilcrow ¶",
    "Tabs\tbetween\twords",
    "Line one\nLine two\nLine three",
    "Windows\r\nline\r\nendings",
    "Trailing spaces   ",
    "   Leading spaces",
    "  both sides  ",
    "Multiple     spaces     inside",
    "user",
    "model",
    "a",
    "I",
    " ",
    "?",
    "Once upon a time, in a land far, far away, there lived a dragon who loved to read books.",
    "The mitochondria is the powerhouse of the cell.",
    "Call me Ishmael. Some years ago—never mind how long precisely—having little money.",
    "What is the capital of France? The capital of France is Paris.",
    "Translate to French: The cat sat on the mat.",
]

SCRIPTS = {
    "chinese": ["你好，世界！", "我爱自然语言处理。", "今天天气很好，我们去公园散步吧。",
                "机器学习是人工智能的一个分支。", "中华人民共和国", "一二三四五六七八九十百千万亿"],
    "japanese": ["こんにちは世界", "日本語のテキストです。", "カタカナとひらがなと漢字",
                 "東京都渋谷区", "ｶﾀｶﾅ半角", "お元気ですか？"],
    "korean": ["안녕하세요 세계", "한국어 텍스트입니다.", "대한민국의 수도는 서울입니다.",
               "ㄱㄴㄷㄹ ㅏㅑㅓㅕ", "감사합니다!"],
    "arabic": ["مرحبا بالعالم", "اللغة العربية جميلة.", "السلام عليكم ورحمة الله",
               "٠١٢٣٤٥٦٧٨٩", "كتاب، قلم؛ ورقة؟"],
    "hebrew": ["שלום עולם", "עברית היא שפה שמית.", "ירושלים", "בְּרֵאשִׁית בָּרָא אֱלֹהִים"],
    "devanagari": ["नमस्ते दुनिया", "हिन्दी भाषा", "संस्कृतम्", "क्षत्रिय ज्ञान श्री",
                   "०१२३४५६७८९"],
    "thai": ["สวัสดีชาวโลก", "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ", "กรุงเทพมหานคร"],
    "cyrillic": ["Привет, мир!", "Русский язык", "Съешь же ещё этих мягких французских булок.",
                 "Україна, Беларусь, България", "ЁЖИК в тумане"],
    "greek": ["Γειά σου Κόσμε", "Ελληνικά γράμματα: αβγδεζηθ", "Ὦ ξεῖν᾽, ἀγγέλλειν",
              "ΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩ"],
    "other": ["Tiếng Việt có dấu: ă â đ ê ô ơ ư", "Ελληνικά και English mixed",
              "ქართული ენა", "Հայերեն լեզու", "தமிழ் மொழி", "বাংলা ভাষা", "ગુજરાતી",
              "ಕನ್ನಡ", "മലയാളം", "සිංහල", "ພາສາລາວ", "ភាសាខ្មែរ", "မြန်မာဘာသာ",
              "አማርኛ", "ᏣᎳᎩ", "ᚠᚢᚦᚨᚱᚲ", "𐌰𐌱𐌲", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𝕳𝖊𝖑𝖑𝖔",
              "Ｆｕｌｌｗｉｄｔｈ", "Ⅻ ⅻ ① ② ⑳", "½ ¼ ¾ ⅓", "™ © ® ℃ ℉ № ℗",
              "e\u0301 (e + combining acute)", "n\u0303o\u0308", "Zalgo: Z\u0351\u0352\u0353a",
              "Ｓｐａｃｅ\u3000ideographic", "no\u00a0break\u00a0space", "zero\u200bwidth\u200cjoin\u200d",
              "soft\u00adhyphen", "\ufeffBOM at start", "rtl \u202eoverride\u202c end",
              "\u2581escaped space char", "\u2581\u2581two", "a\u2581b c"],
}

EMOJI = ["😀", "😀😃😄", "👍", "👍🏻👍🏼👍🏽👍🏾👍🏿", "👨‍👩‍👧‍👦", "👩‍❤️‍💋‍👨", "🏳️‍🌈", "🏴‍☠️",
         "🇺🇸🇫🇷🇯🇵", "🇺", "1️⃣2️⃣#️⃣", "❤️", "❤", "☺️", "🧑🏽‍💻", "👩🏿‍🚀", "🤷‍♂️", "🙇🏻‍♀️",
         "Great job! 🎉🎉🎉", "I ❤️ NY", "🐍 Python", "🦀 Rust is 🔥", "😂😂😂😂😂😂😂😂",
         "🫠🫡🫢", "🧬🧪🔬", "⌚⌛⏰", "©️®️™️", "🏴󠁧󠁢󠁳󠁣󠁴󠁿 Scotland"]

CODE = [
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "for i in range(10):\n\tprint(i)\n",
    "import numpy as np\nx = np.zeros((3, 4), dtype=np.float32)\n",
    "#include <stdio.h>\n\nint main(void) {\n    printf(\"Hello, world!\\n\");\n    return 0;\n}\n",
    "template <typename T>\nstd::vector<T> f(const std::vector<T>& v) { return {v.rbegin(), v.rend()}; }",
    "fn main() {\n    let v: Vec<i32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n",
    "const add = (a, b) => a + b;\nconsole.log(`sum: ${add(1, 2)}`);\n",
    "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name ORDER BY 2 DESC;",
    "<!DOCTYPE html>\n<html>\n<body>\n<table><tr><td>cell</td></tr></table>\n</body>\n</html>",
    "<div class=\"x\"><span>text</span><a href=\"#\">link</a></div>",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
    "#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do echo \"$f\"; done\n",
    "key: value\nlist:\n  - one\n  - two\n",
    "x = [i**2 for i in range(100) if i % 3 == 0]",
    "if (a && b || !c) { x += 1; } else { x -= 1; }",
    "// comment\n/* block\n   comment */\n",
    "    indented with four spaces\n        and eight\n",
    "\t\ttabs\n\t\t\tmore tabs\n",
    "public static void main(String[] args) { System.out.println(\"Java\"); }",
    "SELECT * FROM t WHERE s LIKE '%<bos>%';",
    "regex = r\"^(?:[a-z0-9!#$%&'*+/=?^_`{|}~-]+)@example\\.com$\"",
    "\\begin{equation} E = mc^2 \\end{equation}",
    "λx. x + 1; ∀x ∈ ℝ: x² ≥ 0; ∑_{i=1}^{n} i = n(n+1)/2",
]

SPECIAL_TEXTS = ["<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<pad>", "<unk>",
                 "<mask>", "<unused0>", "<unused1>", "<unused99>", "<unused6241>",
                 "[multimodal]", "<start_of_image>", "<end_of_image>", "</s>", "<s>",
                 "<table>", "</table>", "<tr>", "<td>", "</td>", "<h1>", "</h1>", "<strong>",
                 "<em>", "<b>", "<i>", "<u>", "<sub>", "<sup>", "<code>", "</code>", "<a>",
                 "<img>", "<span>", "<bbox>", "<ul>", "<li>", "<div>", "<iframe>", "<footer>",
                 "<blockquote>", "<caption>", "<thead>"]

SPECIAL_CASES = [
    "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n",
    "<bos><start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n4<end_of_turn>",
    "<bos>", "<bos><bos>", "<eos>", "<<bos>>", "<bos", "bos>", "<start_of_turn", "start_of_turn>",
    "<start_of_turn><end_of_turn>", "<end_of_turn><start_of_turn>", "text<eos>more",
    " <bos> ", "<unused0><unused1><unused2>", "<unused12345>", "<unused-1>", "<unused>",
    "<0x41>", "<0x0A>", "<0xFF>", "<0x00>", "<0x41><0x42>", "<0xZZ>", "0x41",
    "<start_of_image>image<end_of_image>", "[multimodal][multimodal]", "</s><s></s>",
    "<table><tr><td>1</td><td>2</td></tr></table>", "<h1>Title</h1>\n<p>para</p>",
    "< table >", "<TABLE>", "<table", "<<table>>", "<ta<table>ble>",
    "Use <end_of_turn> to end a turn.", "\n<start_of_turn>\n", "  <start_of_turn>  ",
    "<mask> is a mask", "<pad><pad><pad>", "<unk>nown", "a<unused0>b",
]

WHITESPACE = ["", " ", "  ", "   ", "\t", "\n", "\r", "\r\n", "\n\n", "\n\n\n", " \n ", "\t \t",
              " " * 31, " " * 32, " " * 33, " " * 62, " " * 100, "\n" * 31, "\n" * 32,
              "\n" * 64, "\t" * 31, "\t" * 33, "\t" * 70, " \t\n\r\x0b\x0c",
              "a" + " " * 40 + "b", "x\n\n\n\n\ny", "\n\n\nleading newlines",
              "trailing newlines\n\n\n", "  \n  \n  ", " \u00a0 \u3000 \u2003 ", "\x00", "a\x00b",
              "\x01\x02\x03\x1f\x7f", "\u0085next line", "\u2028\u2029"]

NUMBERS = ["0", "1", "42", "-17", "3.14159", "2.718281828459045", "1e10", "6.022e23",
           "1,000,000", "1.000.000,00", "0x1F", "0b1011", "007", "123456789012345678901234567890",
           "+1 (555) 123-4567", "2024-03-01T12:34:56Z", "12:30 PM", "$19.99", "€5,50", "¥1000",
           "50%", "1/2", "3rd 21st 102nd", "٣٤٥", "४२", "๓๔", "Ⅳ", "1.2.3.4", "v2.0.1-beta+42"]

URLS = ["https://www.example.com/path/to/page?query=1&other=two#frag",
        "http://localhost:8080/v1/chat/completions", "ftp://files.example.org/pub/file.tar.gz",
        "mailto:someone@example.com", "user.name+tag@sub.example.co.uk",
        "/usr/local/bin/python3", "C:\\Windows\\System32\\drivers\\etc\\hosts",
        "~/projects/strata/src/tokenizer/spm_tokenizer.cc", "git@github.com:org/repo.git",
        "https://例え.jp/パス", "www.example.com", "192.168.0.1:443", "[::1]:8080"]

MARKDOWN = ["# Heading 1\n## Heading 2\n### Heading 3\n",
            "- item one\n- item two\n  - nested item\n",
            "1. first\n2. second\n3. third\n",
            "| a | b |\n|---|---|\n| 1 | 2 |\n",
            "```python\nprint('hi')\n```\n",
            "**bold** and *italic* and `code` and ~~strike~~",
            "> quoted line\n> another\n",
            "[link text](https://example.com) and ![img](a.png)",
            "---\n***\n___\n",
            "Term\n: Definition\n",
            "- [ ] todo\n- [x] done\n"]

INVALID_BYTES = [b"\xff", b"\xfe\xff", b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xc3",
                 b"\xc3(", b"\xe4\xbd", b"\xe4\xbd(", b"\xf0\x9f\x98", b"\xf0\x9f", b"\xf0",
                 b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80",
                 b"\xfc\x84\x80\x80\x80\x80", b"\xe0\x80\x80", b"\xf0\x80\x80\x80",
                 b"abc\xffdef", b"Hello \xc3\xa9\xc3 world", b"\xe4\xbd\xa0\xe5\xa5",
                 b"<bos>\xff<eos>", b"\x80\x80\x80\x80", b"\xc2", b"valid then \xe2\x82",
                 b"\xef\xbb", b"\xf5\x80\x80\x80", b"\x00\xff\x00", b" \xff ", b"\xff\xff\xff\xff",
                 b"<start_of_turn>\xc3<end_of_turn>", b"\xe2\x96", b"\xe2\x96\x81\xe2\x96"]


def random_codepoint_string(rng, blocks, length):
    out = []
    for _ in range(length):
        lo, hi = rng.choice(blocks)
        cp = rng.randint(lo, hi)
        if 0xD800 <= cp <= 0xDFFF:
            cp = 0xFFFD
        out.append(chr(cp))
    return "".join(out)


def build():
    rng = random.Random(SEED)
    entries = []

    def add(category, value):
        entries.append((category, value))

    for s in ENGLISH:
        add("english", s)
    for script, samples in SCRIPTS.items():
        for s in samples:
            add("script/" + script, s)
            add("script/" + script, " " + s)
    for s in EMOJI:
        add("emoji", s)
    for s in CODE:
        add("code", s)
    for s in SPECIAL_TEXTS:
        add("special", s)
        add("special", "Hello " + s + " world")
        add("special", s + s)
        add("special", " " + s)
    for s in SPECIAL_CASES:
        add("special", s)
    for s in WHITESPACE:
        add("whitespace", s)
    for s in NUMBERS:
        add("number", s)
    for s in URLS:
        add("url", s)
    for s in MARKDOWN:
        add("markdown", s)
    for b in INVALID_BYTES:
        add("invalid", b)

    # Whitespace variants around words.
    for _ in range(60):
        ws = "".join(rng.choice([" ", "\t", "\n", "\r\n", "  "]) for _ in range(rng.randint(1, 8)))
        word = rng.choice(ENGLISH + [s for v in SCRIPTS.values() for s in v])
        add("whitespace/mix", rng.choice([ws + word, word + ws, ws + word + ws,
                                          word.replace(" ", ws)]))

    pool = (ENGLISH + [s for v in SCRIPTS.values() for s in v] + EMOJI + CODE + SPECIAL_TEXTS +
            SPECIAL_CASES + NUMBERS + URLS + MARKDOWN + WHITESPACE)
    # Random concatenations of pool items.
    for _ in range(420):
        parts = [rng.choice(pool) for _ in range(rng.randint(2, 6))]
        sep = rng.choice(["", " ", "\n", " ", ", "])
        add("mix", sep.join(parts))

    blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF),
              (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F),
              (0x2190, 0x23FF), (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
              (0xFF00, 0xFFEF), (0x1F300, 0x1FAFF), (0x10000, 0x1034F), (0x1D400, 0x1D7FF),
              (0x0, 0x1F), (0xE000, 0xF8FF), (0x20000, 0x2A6DF), (0xE0000, 0xE007F),
              (0xF0000, 0xF00FF), (0x10FF00, 0x10FFFF)]
    for _ in range(220):
        add("random/unicode", random_codepoint_string(rng, blocks, rng.randint(1, 40)))

    # Random byte strings: mostly invalid UTF-8, some mixed with text.
    for _ in range(90):
        n = rng.randint(1, 24)
        raw = bytes(rng.randint(0, 255) for _ in range(n))
        if rng.random() < 0.4:
            raw = rng.choice(ENGLISH).encode() + raw + rng.choice(SPECIAL_TEXTS).encode()
        add("random/bytes", raw)
    # Valid text cut at a random byte (often mid-character).
    for _ in range(50):
        text = rng.choice([s for v in SCRIPTS.values() for s in v] + EMOJI).encode()
        cut = rng.randint(1, len(text))
        add("random/truncated", text[:cut])

    # Long texts: many fragments, long merges, long whitespace runs.
    long_prose = " ".join(rng.choice(ENGLISH) for _ in range(400))
    add("long", long_prose)
    add("long", "".join(rng.choice(SCRIPTS["chinese"] + SCRIPTS["japanese"]) for _ in range(300)))
    add("long", "\n".join(rng.choice(CODE) for _ in range(80)))
    add("long", " ".join(rng.choice(pool) for _ in range(300)))
    add("long", " " * 1000)
    add("long", "\n" * 500 + "x" + "\t" * 300)
    add("long", "<start_of_turn>" * 200)
    add("long", "".join(rng.choice(SPECIAL_TEXTS) for _ in range(300)))
    add("long", "a" * 3000)
    add("long", "ab" * 1500)
    add("long", "😀" * 500)
    add("long", ("<unused" + "".join(str(rng.randint(0, 9)) for _ in range(3)) + ">") * 100)

    lines = []
    for i, (category, value) in enumerate(entries):
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError:
                lines.append(json.dumps({"id": i, "category": category, "text_hex": value.hex()}))
                continue
        lines.append(json.dumps({"id": i, "category": category, "text": value},
                                ensure_ascii=False))
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the file is out of date")
    args = parser.parse_args()
    content = build()
    if args.check:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != content:
            print(f"{OUT} is out of date: rerun {pathlib.Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(content, encoding="utf-8")
    print(f"wrote {content.count(chr(10))} strings to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
