#!/usr/bin/env python3
"""tests/tokenizer/corpus.py — the deterministic tokenizer test corpus (>= 1 MB).

Usage: corpus.py OUT [TOKENIZER.json ...]

Writes records as "<byte length>\\n<UTF-8 bytes>\\n". The base part is the same for every
tokenizer: English prose, source code, runs of spaces/tabs/newlines, digits, CJK, Arabic,
emoji with skin-tone modifiers and ZWJ sequences, Unicode that NFC changes, control and
format characters, and text that merely looks like broken bytes. Then, for each tokenizer
named, every one of its added tokens alone and inside text. The generator has its own PRNG
(splitmix64), so the bytes depend on nothing but this file.
"""
import json
import sys

MASK = (1 << 64) - 1


class Rng:
    def __init__(self, seed):
        self.s = seed & MASK

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & MASK
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n):
        return self.next() % n

    def pick(self, seq):
        return seq[self.below(len(seq))]

    def chance(self, num, den):
        return self.below(den) < num


WORDS = """the of and to in is was he for it with as his on be at by had are but from or
have an they which one you were her all she there would their we him been has when who will
more no if out so said what up its about into than them can only other new some could time
these two may then do first any my now such like our over man me even most made after also
did many before must through back years where much your way well down should because each
just those people how too little state good very make world still own see men work long get
here between both life being under never day same another know while last might us great old
year off come since against go came right used take three tokenizer model weights quantize
expert layer tensor stream memory cache disk bytes sequence decode encode merge vocabulary
Mississippi naïve café résumé coöperate façade jalapeño Zürich São Paulo Kraków Ærøskøbing
ÉCOLE STRASSE Straße İstanbul ΑΘΗΝΑ Москва Київ Tbilisi Reykjavík""".split()

CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D",
                "n't", "'Ll", "’s", "’t"]
PUNCT = [".", ",", ";", ":", "!", "?", "...", "—", "–", "-", "(", ")", "[", "]", "\"", "'", "«", "»",
         "“", "”", "‘", "’", "…", "/", "&", "%", "#", "@", "*"]

CODE = [
    "int main(int argc, char **argv)\n{\n    return argc > 1 ? atoi(argv[1]) : 0;\n}\n",
    "def fib(n: int) -> int:\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n",
    "for (let i = 0; i < xs.length; ++i) {\n\tif (xs[i] !== undefined && xs[i] >= 0x7fffffff) continue;\n}\n",
    "    SELECT id, name FROM users WHERE email LIKE '%@example.com' ORDER BY id DESC LIMIT 10;\n",
    "#include <stdio.h>\n#define MAX(a,b) ((a)>(b)?(a):(b))\nstatic const char *s = \"tab\\there\\n\";\n",
    "fn parse(&mut self) -> Result<Vec<u8>, Box<dyn std::error::Error>> { Ok(vec![0xde, 0xad]) }\n",
    "<div class=\"x\" id='y'>&amp;&lt;&gt; <a href=\"https://example.org/?q=1&r=2#frag\">link</a></div>\n",
    "{\"key\": [1, 2.5e-3, true, null], \"nested\": {\"a\": \"b\\u00e9\"}}\n",
    "\tif err != nil {\n\t\treturn fmt.Errorf(\"read %s: %w\", path, err)\n\t}\n",
    "x = [i**2 for i in range(10) if i % 3 == 0]  # squares\nprint(f\"{x!r:>20}\")\n",
    "$ ls -la /usr/local/bin | grep -E '^-rwx' | awk '{print $9}' > out.txt 2>&1 &&\n",
    "camelCaseIdentifier snake_case_identifier SCREAMING_CASE kebab-case-id __dunder__ _private\n",
    "matrix[i][j] += alpha * A[i][k] * B[k][j]; // i=0..N-1, j=0..M-1\n",
    "    @property\n    def name(self):\n        return self._name\n\n\n\n    # trailing blank lines\n",
    "if (a&&b||!c) { x <<= 2; y >>>= 1; z ??= w?.v ?? 0; }\n",
]

CJK = ["自然语言处理是人工智能的一个重要分支。", "今天天气很好，我们去公园散步吧！", "模型量化可以显著减少内存占用。",
       "東京は日本の首都です。", "ひらがなとカタカナを混ぜて書きます。", "コンピューターでテキストを処理する。",
       "한국어 문장도 토크나이저가 처리해야 합니다.", "서울특별시 강남구", "中文、日本語、한국어の混合テキスト。",
       "𠀀𠀁𪚥 (CJK Extension B)", "「引用」『二重引用』【括弧】〔亀甲〕", "１２３ＡＢＣ　全角スペース",
       "繁體中文與簡體中文", "漢字かな交じり文", "ｶﾀｶﾅ半角"]

ARABIC = ["مرحبا بالعالم", "اللغة العربية جميلة جدا.", "بِسْمِ اللَّهِ الرَّحْمَٰنِ الرَّحِيمِ", "٠١٢٣٤٥٦٧٨٩",
          "السعر ٢٥٠ ريال، أو 250 SAR", "كتاب، كتب، مكتبة؟", "عربي English مختلط", "ﻻ ﷲ ﷺ",
          "שלום עולם", "فارسی: سلام دنیا ۱۲۳"]

EMOJI = ["😀", "😂", "🥲", "👍", "👍🏻", "👍🏿", "👋🏽", "🧑‍💻", "👩‍🚀", "👨‍👩‍👧‍👦", "👩🏽‍🔬", "🏳️‍🌈",
         "🏴‍☠️", "❤️", "❤", "☺️", "🇯🇵", "🇺🇸", "🇪🇺", "#️⃣", "1️⃣", "🫶🏼", "🧔🏻‍♂️", "🐈‍⬛", "🤷‍♀️",
         "🙇🏾‍♂️", "✌🏿", "👁️‍🗨️", "🔥🔥🔥", "😶‍🌫️", "🏃🏻‍♀️‍➡️"]

OTHER = ["Ελληνικά γράμματα", "Русский текст с ёжиком", "ภาษาไทยไม่มีช่องว่าง", "हिन्दी में लिखा गया पाठ",
         "ქართული ენა", "Հայերեն", "ᐊᓄᕐᕕᒃ", "Tiếng Việt có dấu", "ꦗꦮ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕓𝕠𝕝𝕕 𝒮𝒸𝓇𝒾𝓅𝓉",
         "Ｆｕｌｌｗｉｄｔｈ", "ﬁﬂ ligatures", "Ⅻ Ⅳ ⅷ", "½ ¾ ⅓ ² ³ ¹", "µ Ω Å K"]

# Unicode that normalisation changes: decomposed accents, Hangul jamo, singletons, ordering.
NFC = ["e\u0301", "A\u030A", "\u212B", "\u2126", "\u1100\u1161\u11A8", "o\u0308\u0304", "q\u0323\u0307",
       "a\u0328\u0301", "\u0958", "\uFB2C", "n\u0303", "\u00C5", "\u1E0B\u0323", "\u0041\u0300\u0316"]

# Control, format and odd characters; and text that only looks like broken bytes.
ODD = ["\u00A0", "\u2000", "\u2003", "\u200B", "\u200C", "\u200D", "\u2028", "\u2029", "\u202F", "\u205F",
       "\u3000", "\uFEFF", "\u0085", "\u180E", "\u00AD", "\u200E", "\u200F", "\u202E", "\u2066",
       "\x01", "\x07", "\x1b[31m", "\x7f", "\x0b", "\x0c", "\ufffd", "\ufffd\ufffd", "\uffff", "\ufffe",
       "\ue000", "\U000F0000", "\U0010FFFD", "\\xC3\\x28", "\\xff\\xfe", "%C3%28", "%E2%82", "Ã©", "Ã¼ber",
       "â€™", "â€œquoteâ€", "<0x41>", "<0xE2><0x82>", "\\u00e9", "&#x1F600;", "\u2581", "\u2581\u2581x",
       "Ġ", "Ċ", "ĠĠ", "\u0300", "\u20DD"]

SPACES = [" ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r", " \n", "\n ",
          " \t \n", "\r\n\r\n", "        ", "\n\t", " " * 17, "\n" * 9]


def word(r):
    w = r.pick(WORDS)
    k = r.below(12)
    if k == 0:
        w = w.capitalize()
    elif k == 1:
        w = w.upper()
    return w


def prose(r):
    out = []
    for _ in range(1 + r.below(6)):
        sent = [word(r).capitalize()]
        for _ in range(3 + r.below(18)):
            k = r.below(30)
            if k == 0:
                sent.append(word(r) + r.pick(CONTRACTIONS))
            elif k == 1:
                sent.append(r.pick(PUNCT) + word(r))
            elif k == 2:
                sent.append(str(r.below(100000)))
            elif k == 3:
                sent.append(word(r) + r.pick(PUNCT))
            else:
                sent.append(word(r))
        out.append(" ".join(sent) + r.pick([".", ".", ".", "!", "?", "...", ":", ";"]))
    sep = r.pick([" ", " ", "  ", "\n", "\n\n"])
    return sep.join(out)


def digits(r):
    parts = []
    for _ in range(4 + r.below(12)):
        k = r.below(10)
        if k == 0:
            parts.append(str(r.next()))
        elif k == 1:
            parts.append("%d.%0*d" % (r.below(1000), 1 + r.below(6), r.below(100000)))
        elif k == 2:
            parts.append("{:,}".format(r.below(10 ** 9)))
        elif k == 3:
            parts.append("+1 (%03d) %03d-%04d" % (r.below(1000), r.below(1000), r.below(10000)))
        elif k == 4:
            parts.append("%04d-%02d-%02dT%02d:%02d:%02dZ" % (1900 + r.below(200), 1 + r.below(12), 1 + r.below(28),
                                                           r.below(24), r.below(60), r.below(60)))
        elif k == 5:
            parts.append("v%d.%d.%d-rc%d" % (r.below(10), r.below(30), r.below(100), r.below(5)))
        elif k == 6:
            parts.append("0x%X" % r.next())
        elif k == 7:
            parts.append(r.pick(["١٢٣٤", "１２３４５", "१२३", "๑๒๓", "Ⅻ", "³⁴", "₁₂"]))
        elif k == 8:
            parts.append("".join(str(r.below(10)) for _ in range(1 + r.below(40))))
        else:
            parts.append("%de-%d" % (r.below(100), r.below(30)))
    return r.pick([" ", ", ", "\n", "", "; "]).join(parts)


def spaces(r):
    parts = []
    for _ in range(3 + r.below(12)):
        k = r.below(6)
        if k == 0:
            parts.append(" " * (1 + r.below(300)))
        elif k == 1:
            parts.append("\n" * (1 + r.below(30)))
        else:
            parts.append(r.pick(SPACES))
        parts.append(r.pick([word(r), word(r) + r.pick(PUNCT), r.pick(PUNCT), str(r.below(1000)), ""]))
    return "".join(parts)


def mixed(r, pool, n):
    parts = []
    for _ in range(n):
        k = r.below(5)
        if k == 0:
            parts.append(word(r))
        elif k == 1:
            parts.append(r.pick(SPACES))
        else:
            parts.append(r.pick(pool))
    return r.pick(["", " ", " ", "\n"]).join(parts)


def code(r):
    out = []
    for _ in range(1 + r.below(4)):
        c = r.pick(CODE)
        if r.chance(1, 3):
            c = c.replace("    ", "\t")
        if r.chance(1, 4):
            c = "    " * r.below(4) + c.replace("\n", "\n" + "    " * r.below(3))
        out.append(c)
    return "".join(out)


def emoji(r):
    parts = []
    for _ in range(3 + r.below(20)):
        k = r.below(4)
        if k == 0:
            parts.append(word(r))
        elif k == 1:
            parts.append(r.pick(EMOJI) * (1 + r.below(3)))
        else:
            parts.append(r.pick(EMOJI))
    return r.pick(["", " ", " "]).join(parts)


def base(r):
    kinds = [(prose, 30), (code, 14), (spaces, 8), (digits, 8), (lambda r: mixed(r, CJK, 4 + r.below(12)), 8),
             (lambda r: mixed(r, ARABIC, 4 + r.below(12)), 6), (emoji, 6),
             (lambda r: mixed(r, OTHER, 4 + r.below(10)), 6), (lambda r: mixed(r, NFC, 6 + r.below(20)), 6),
             (lambda r: mixed(r, ODD, 6 + r.below(20)), 8)]
    total = sum(w for _, w in kinds)
    k = r.below(total)
    for f, w in kinds:
        if k < w:
            return f(r)
        k -= w


def added_records(r, toks):
    out = []
    for t in toks:
        out.append(t)
        out.append(prose(r)[:80] + t + prose(r)[:60])
        out.append(" " + t + " " + word(r))
        out.append(word(r) + t + t + "\n" + t)
        if len(t) > 2:
            out.append("x" + t[:-1] + " " + t[1:])  # near misses
    # several tokens in one record
    for i in range(0, len(toks), 7):
        group = toks[i:i + 7]
        out.append(r.pick(["", " ", "\n"]).join(g + r.pick(["", " ", word(r), "\n\n"]) for g in group))
    return out


def main():
    if len(sys.argv) < 2:
        sys.stderr.write("usage: corpus.py OUT [TOKENIZER.json ...]\n")
        return 2
    r = Rng(20260601)
    recs = [""]  # the empty text too
    size = 0
    while size < (1 << 20) + 65536:
        s = base(r)
        recs.append(s)
        size += len(s.encode("utf-8"))
    for path in sys.argv[2:]:
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
        toks = [a["content"] for a in j.get("added_tokens", [])]
        recs.extend(added_records(Rng(len(toks) * 7919 + 1), toks))
    with open(sys.argv[1], "wb") as f:
        for s in recs:
            b = s.encode("utf-8")
            f.write(b"%d\n" % len(b) + b + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
