"""Test strings for the tokenizer comparisons (tests/py/test_tokenizer*.py).

Unicode (CJK, emoji with ZWJ and flags, combining marks, RTL scripts, other
digit systems), digit runs, whitespace runs, code in several languages,
contractions with various apostrophes and cases, inline special tokens and
the empty string, plus deterministic random mixtures. Code points are all
assigned in Unicode 14 (the version of our generated tables), since HF
tokenizers' Oniguruma tables are newer and classify later additions.
"""
import random

UNICODE = [
    "你好世界", "我爱北京天安门。", "日本語のテキストです", "こんにちは、世界！", "カタカナとひらがな",
    "안녕하세요 세계", "한국어 문장입니다.", "Привет, мир!", "Ελληνικά γράμματα", "مرحبا بالعالم",
    "שלום עולם", "נוֹסָף עִם נִקּוּד", "नमस्ते दुनिया", "สวัสดีชาวโลก", "Tiếng Việt có dấu",
    "Zürich, Ærøskøbing, Łódź", "İstanbul ıı İİ", "straße STRASSE", "ſ long s and 'ſ",
    "e\u0301 vs \u00e9", "a\u0308o\u0308u\u0308", "Z\u0335\u0321a\u0336\u0322l\u0337g\u0338o",
    "👋🌍", "emoji 😀😃😄 in text", "👨‍👩‍👧‍👦 family", "🇫🇷🇩🇪🇯🇵 flags", "👍🏽 skin tone",
    "∑∫√∞ ≠ ≤ ≥", "x² + y³ = z⁴", "½ ¼ ¾ ⅓", "Ⅻ ⅻ Ⅳ", "٣٤٥ Arabic-Indic", "१२३ Devanagari digits",
    "１２３ fullwidth ＡＢＣ", "①②③", "a\u00a0b nbsp", "a\u3000b ideographic space", "a\u2009b thin",
    "a\u200bb zwsp", "\ufeffBOM start", "line\u2028sep", "tab\u000bvt\u000cff", "\u0085nel",
    "🎉", "ü", "中", "€100", "£5 ¥300 ₹42", "«quotes» „low“ ‘single’ “double”", "— – ‐ dashes…",
    "\u202eRTL override", "كتاب123", "עברית 2024", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕕𝕠𝕦𝕓𝕝𝕖", "\U00020000 ext-B",
]

DIGITS = [
    "1", "12", "123", "1234", "12345", "1234567", "12345678901234567890", "3.14159", "1,000,000",
    "-42", "+7", "0x1F", "0b1010", "1e-9", "2024-01-01", "12:30:45", "v1.2.3", " 123", "  4567",
    "a1b2c3", "abc123def", "100%", "$9.99", "#42", "1st 2nd 3rd 4th", "10,5 €", "0000", "007",
    "9" * 50, "31415926535897932384626433832795028841971693993751",
]

WHITESPACE = [
    " ", "  ", "   ", "    ", " a", "  a", "   x", "x ", "x  ", "x   ", "hello   ", "   hello   ",
    "\t", "\t\t", "\tx", "\t\tx", "x\t", "a \tb", "\n", "\n\n", "\n\n\n", "a\nb", "a\n\nb", "a \n b",
    "a\n \nb", "\r\n", "line1\r\nline2", "line1\r\n\r\nline2", "\r", "a\rb", "   \n   ", "\t \n \t",
    "trailing\n", "\nleading", " \n", "\n ", "a  b  c", "a     b", "word\n    indented",
    "x" + " " * 40 + "y", "\n" * 10,
]

CODE = [
    "def f(x):\n    return x ** 2\n",
    "for i in range(10):\n\tprint(i, end='')",
    "int main(void) { printf(\"%d\\n\", 42); return 0; }",
    "#include <stdio.h>\n#define MAX(a, b) ((a) > (b) ? (a) : (b))",
    "const add = (a, b) => a + b; // arrow",
    "fn main() { let v: Vec<u8> = vec![1, 2, 3]; println!(\"{:?}\", v); }",
    "<div class=\"x\"><p>Hello &amp; bye</p></div>",
    "{\"key\": [1, 2.5, null, true], \"s\": \"\\u00e9\"}",
    "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name;",
    "if [ -f \"$FILE\" ]; then echo ok; fi && ls -la | grep '^d'",
    "^(?:[a-z0-9!#$%&'*+/=?^_`{|}~-]+)@\\w+\\.com$",
    "\\begin{equation} E = mc^2 \\end{equation}",
    "# Title\n\n- item 1\n- item 2\n\n```python\nx = 1\n```",
    "x+=1;y-=2;z*=3;w/=4;a%=5;b&=6;c|=7;d^=8;",
    "a->b; c::d; e?.f; g ?? h; i <=> j; k >>= 2; l === m;",
    "    ", "public static void main(String[] args) {}", "lambda: None",
    "https://example.com/path?q=1&r=two#frag", "user@example.org", "C:\\Users\\name\\file.txt",
    "~/.bashrc:12: export PATH=$HOME/bin:$PATH", "0xDEADBEEF & 0xFF << 8",
    "[[1, 2], [3, 4]]", "()[]{}<>", "!!!???...,,,;;;:::", "=====", "----", "____init____",
    "<<<<>>>>", "'''docstring'''", '"""triple"""', "`backticks`",
]

CONTRACTIONS = [
    "don't", "I'm", "we'll", "they've", "you're", "he'd", "it's", "DON'T", "I'M", "WE'LL",
    "They'Ve", "YOU'RE", "He'D", "It'S", "it’s", "don’t", "it`s", "it´s", "'s", "'t", "'re",
    "'ve", "'m", "'ll", "'d", "x'sy", "rock'n'roll", "O'Neil's", "the '90s", "'quoted'",
    "'S", "'LL", "x'Sx", "x'REx", "we'LLy", "x'ſx", "x'Kx", "ca'nt", "y'all'd've", "I'm'n't", "' s", "''", "'", "l'été", "dell'arte",
]

PROSE = [
    "Hello world", "Hello, world!", "The quick brown fox jumps over the lazy dog.",
    "Mr. Smith went to Washington D.C. on Jan. 3rd.",
    "She said: \"It's fine\" -- and left.",
    "A long-context LLM decodes on the CPU; its KV cache grows with every token.",
    "Dr. Jekyll & Mr. Hyde (1886), pp. 12-34.", "e.g. i.e. etc. vs. a.m. p.m.",
    "CamelCaseWord snake_case_word kebab-case-word SCREAMING_CASE",
    "ALL CAPS SENTENCE HERE", "MiXeD cAsE tExT", "Hello, we can use", "Hello world! 123",
]


# Control bytes whose byte-level character SmolLM2's vocabulary lacks (0x04,
# 0x06, 0x13, 0x14, 0x16, 0x1D): HF drops them, so they do not round-trip.
MISSING_BYTES = ["x\x16y", "==\x16==", "\x04", "a\x06\x13\x14b", "::\x1d::", "\x16 \x16"]


def special_cases(specials):
    """Strings with the model's special-token texts inline."""
    out = []
    for s in specials[:6]:
        out += [s, "a" + s + "b", " " + s + " ", s + s, s + "\n" + s]
    if len(specials) >= 3:
        a, b, c = specials[0], specials[1], specials[2]
        out += [
            b + "user\nhi" + c, b + "system\nYou are nice." + c + "\n" + b + "user\nQ?" + c + "\n",
            c + "\n" + b + "assistant\n", a + "text" + a, b + c, b[:-1], "<" + b[1:], b + b[1:],
            "x" + b + "y" + c + "z",
        ]
    return out


def random_cases(n=80, seed=1234):
    rng = random.Random(seed)
    pool = (list("abcxyzABCXYZ") + list("0123456789") + list(" \t\n\r") + list("'’.,!?-_()[]{}<>/\\\"#$%&*+=@^|~`:;") +
            ["é", "ß", "中", "文", "😀", "👍🏽", "\u0301", "ا", "ש", "١", "½", "\u00a0", "\u3000", "ſ", "İ", "ı"] +
            ["the", " the", "ing", " and", "'s", "'LL", "123", " 4", "  ", "\n\n", "\r\n", "http://"])
    out = []
    for _ in range(n):
        k = rng.randint(1, 24)
        out.append("".join(rng.choice(pool) for _ in range(k)))
    return out


def all_cases(specials=()):
    cases = [""] + UNICODE + DIGITS + WHITESPACE + CODE + CONTRACTIONS + PROSE
    cases += special_cases(list(specials))
    cases += random_cases()
    return cases


def corpus():
    """Training text for the synthetic vocabularies: the cases themselves
    (so their merges exist) and some prose."""
    text = all_cases() + PROSE * 20 + [
        "It was the best of times, it was the worst of times, it was the age of wisdom, "
        "it was the age of foolishness, it was the epoch of belief, it was the epoch of "
        "incredulity, it was the season of Light, it was the season of Darkness.",
        "In 2024 there were 1,234 participants; 56% of them answered 7 of the 10 questions.",
    ] * 10
    return text
