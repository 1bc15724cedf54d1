"""Tricky inputs for every kvbench metric: hand-written edge cases plus
seeded random combinations, at least 100 per metric. Used by test_metrics.py.

Each case is a dict {"pred": str, "answers": [str], "all_classes": [str]?}.
"""
import random
import zlib

# Words chosen to exercise the normalisation rules: articles in every case,
# ASCII and non-ASCII punctuation, full case mappings (sharp s, dotted I,
# final sigma, ligatures, the Kelvin sign), CJK, non-ASCII digits, unusual
# whitespace (NBSP, ideographic space, U+001C which str.split() treats as
# whitespace), combining marks, emoji.
WORDS = [
    "the", "The", "THE", "a", "A", "an", "An", "AN", "cat", "Cat", "CAT", "dog", "dogs",
    "café", "CAFÉ", "cafe\u0301", "straße", "STRASSE", "İstanbul", "ISTANBUL", "ΟΔΟΣ", "οδός",
    "ΣΟΦΟΣ", "σοφός", "naïve", "ﬁle", "FILE", "\u212aelvin", "kelvin", "北京", "中文", "東京",
    "٣", "١٢٣", "１２３", "123", "42", "3.14", "007", "7", "-5", "x_y", "don't", "U.S.A.",
    "e-mail", "hello,", "world!", "(yes)", "“quoted”", "—", "…", "a.b", "...", "théa",
    "an_", "_the", "the-end", "Paris", "paris", "PARIS", "1999", "2,000", "emoji🙂", "ǅ", "ǆ",
]
SEPS = [" ", " ", " ", "  ", "\n", ". ", ", ", "\t", "\u00a0", "\u3000", "\x1c", "", "-"]


def rand_text(rng, lo=0, hi=8, words=WORDS):
    n = rng.randint(lo, hi)
    out = ""
    for i in range(n):
        if i:
            out += rng.choice(SEPS)
        out += rng.choice(words)
    if rng.random() < 0.2:
        out = rng.choice([" ", "\n", "  \t"]) + out + rng.choice([" ", "\n", ".", "!"])
    return out


def answers_from(rng, pred, k=None):
    k = k or rng.choice([1, 1, 1, 2, 3])
    ans = []
    for _ in range(k):
        r = rng.random()
        if r < 0.4 and pred:
            i = rng.randrange(len(pred))
            j = rng.randrange(i, min(len(pred), i + 12) + 1)
            ans.append(pred[i:j])
        elif r < 0.55 and pred:
            ans.append(pred.upper() if rng.random() < 0.5 else pred.lower())
        else:
            ans.append(rand_text(rng, 1, 3))
    return ans


COMMON_EDGE = [
    ("", [""]),
    ("", ["x"]),
    ("x", [""]),
    ("   ", [" "]),
    ("The answer is Paris.", ["Paris"]),
    ("the answer is paris", ["PARIS"]),
    ("A an THE", ["the"]),
    ("An apple a day", ["apple"]),
    ("Straße", ["STRASSE"]),
    ("STRASSE", ["straße"]),
    ("İstanbul", ["i̇stanbul"]),
    ("ΟΔΟΣ ΣΟΦΟΣ", ["οδός"]),
    ("ΟΔΟΣ", ["οδος"]),
    ("ﬁle", ["FILE"]),
    ("\u212aelvin", ["kelvin"]),
    ("北京是中国的首都。", ["北京"]),
    ("value: ١٢٣", ["123"]),
    ("value: １２３", ["１２３"]),
    ("\x1c42\x1c", ["42"]),
    ("tab\tand\nnewline", ["tab and newline"]),
    ("no match here", ["something else", "another"]),
    ("several answers: blue", ["red", "green", "blue"]),
    ("emoji🙂 in text", ["emoji🙂"]),
    ("don't stop", ["dont stop"]),
    ("U.S.A.", ["usa"]),
    ("the_end", ["the end"]),
    ("théa the a", ["théa"]),
    # "~" is ASCII punctuation (string.punctuation): normalize_answer deletes it
    ("x~y", ["xy"]),
    # "ﬃ".upper() is three code points, "FFI" (a full case mapping)
    ("ﬃx", ["FFIX"]),
    # "\r" is whitespace (str.split, str.strip)
    ("x\ry", ["x y"]),
    # RULER strips again after mapping control characters to newlines
    ("\x01x", ["\nx"]),
    # final sigma skips case-ignorable characters ("'") on both sides
    ("Α'Σ ΑΣ'Α", ["α'ς ασ'α"]),
]


def generic_cases(rng, n=110, words=WORDS):
    cases = [{"pred": p, "answers": a} for p, a in COMMON_EDGE]
    while len(cases) < n:
        pred = rand_text(rng, 0, 10, words)
        cases.append({"pred": pred, "answers": answers_from(rng, pred)})
    return cases


def digit_cases(rng, n=110):
    digits = ["0", "1", "12", "123", "1234567", "007", "٣", "١٢", "１２", "3.5", "3.50", "2.0",
              "10", "99999", "12345678901234567890"]
    fill = ["abc", "key", "is", ":", "-", " ", ".", ",", "x", "The pass key is", "\n", "١"]
    cases = []
    hand = [
        ("", ["1"]), ("", [""]), ("no digits", [""]), ("1234567", ["1234567"]),
        ("The pass key is 1234567.", ["1234567"]), ("12 34", ["12"]), ("x12y34", ["34"]),
        ("٣", ["3"]), ("3.5 apples", ["3.5"]), ("3.5 apples", ["3"]), ("3.", ["3"]),
        ("3.50", ["3.5"]), (".5", ["5"]), ("00012", ["12"]), ("12", ["+12"]), ("12", ["-12"]),
        ("0", ["-0"]), ("12345678901234567890", ["12345678901234567890"]),
        ("12345678901234567890", ["12345678901234567168"]), ("5", ["5.0"]), ("5", ["abc"]),
        ("١٢.٥", ["12.5"]), ("１２", ["12"]), ("7 then 8", ["8", "7"]),
        # a float gold's exponent needs digits: "1e" and "1e+" are no numbers
        ("1", ["1e"]), ("1", ["1e+"]),
        # numbers longer than any fixed buffer whose value is still a small double:
        # leading zeros, a long fraction (in the prediction and in a decimal gold)
        ("0" * 600 + "1", ["1"]), ("1." + "0" * 600 + "1", ["1"]), ("2.5", ["2.5" + "0" * 600]),
        ("0" * 600 + "2.5", ["2.5"]),
        # leading zeros of an integer gold; an infinite decimal gold never matches
        ("7", ["007"]), ("9" * 400, ["1e999"]),
    ]
    cases += [{"pred": p, "answers": a} for p, a in hand]
    while len(cases) < n:
        parts = [rng.choice(fill + digits) for _ in range(rng.randint(0, 6))]
        pred = "".join(p + rng.choice(["", " ", ".", ","]) for p in parts)
        k = rng.choice([1, 1, 2])
        ans = [rng.choice(digits + [" 12 ", "12", "-3", "x"]) for _ in range(k)]
        cases.append({"pred": pred, "answers": ans})
    return cases


def choice_cases(rng, n=110):
    opts = ["Paris", "London", "Rome", "Berlin"]
    cases = []
    hand = [
        ("B", ["London", "B"]), ("B.", ["London", "B"]), ("b", ["London", "B"]),
        ("The answer is: C", ["Rome", "C"]), ("The answer is C", ["Rome", "C"]),
        ("answer is", ["Rome", "C"]), ("answer: Rome", ["Rome", "C"]),
        ("The option is D.", ["Berlin", "D"]), ("I think BC", ["London", "B"]),
        ("I think BC", ["London", "BC"]), ("Rome", ["Rome", "C"]), ("  D ", ["Berlin", "D"]),
        ("", ["Paris", "A"]), ("none of them", ["Paris", "A"]),
        ("The correct answer is \"A\"", ["Paris", "A"]), ("ABCD", ["Paris", "A"]),
        ("answer is:  B", ["London", "B"]), ("Answer: B", ["London", "B"]),
        ("my answer is... B", ["London", "B"]), ("\nC\n", ["Rome", "C"]),
        # the prefixes are tried in order: "answer is:" before "answer:"
        ("my answer: Rome. so the answer is: Paris", ["Paris", "A"]),
        # one character after the prefix: the rest is "", which an empty option text starts
        ("answer:x", ["", "B"]),
    ]
    cases += [{"pred": p, "answers": a} for p, a in hand]
    bits = ["The answer is", "answer is:", "answer:", "option is", "I think", "A", "B", "C",
            "D", "AB", "BCD", "Paris", "Rome", ".", ",", "\n", "\"", "'", "!", "?", "{", "}",
            "maybe", "answer", "is", "  "]
    while len(cases) < n:
        k = rng.randrange(4)
        pred = " ".join(rng.choice(bits) for _ in range(rng.randint(0, 6)))
        if rng.random() < 0.3:
            pred = " " + pred
        cases.append({"pred": pred, "answers": [opts[k], "ABCD"[k]]})
    return cases


def classification_cases(rng, n=110):
    class_sets = [
        ["Animal", "Animal product", "product", "Color", "Color name", "name"],
        ["Abbreviation", "Expression abbreviated", "Other", "Other location", "location",
         "Definition of something", "something"],
        ["a", "ab", "abc", "b", "bc", "c"],
        ["City", "City", "Country", "State", "Other"],  # duplicates
        ["Date", "Distance", "Money", "Order", "Other number", "number", "Percent"],
    ]
    cases = []
    hand = [
        ("Animal product", ["Animal product"], class_sets[0]),
        ("Animal product", ["Animal"], class_sets[0]),
        ("Animal", ["Animal product"], class_sets[0]),
        ("Color name and product", ["Color name"], class_sets[0]),
        ("abc", ["abc"], class_sets[2]),
        ("abc", ["bc"], class_sets[2]),
        ("ab bc", ["abc"], class_sets[2]),
        ("City", ["City"], class_sets[3]),
        ("City, Country", ["Country"], class_sets[3]),
        ("", ["Other"], class_sets[1]),
        ("Other location", ["Other location"], class_sets[1]),
        ("Other location", ["location"], class_sets[1]),
        ("Other number", ["Other number"], class_sets[4]),
        ("none of these", ["Money"], class_sets[4]),
    ]
    cases += [{"pred": p, "answers": a, "all_classes": c} for p, a, c in hand]
    while len(cases) < n:
        cs = rng.choice(class_sets)
        pred = rng.choice([" ", ", ", "\n", " and ", ""]).join(
            rng.choice(cs + ["junk", "animal", "COLOR"]) for _ in range(rng.randint(0, 4)))
        ans = [rng.choice(cs) for _ in range(rng.choice([1, 1, 2]))]
        cases.append({"pred": pred, "answers": ans, "all_classes": cs})
    return cases


def count_cases(rng, n=110):
    cases = []
    hand = [("", ["3"]), ("3", ["3"]), ("3 3 4", ["3"]), ("There are 12 passages.", ["12"]),
            ("012", ["12"]), ("١٢", ["12"]), ("12 and ١٢", ["12"]), ("3.5", ["3"]),
            ("no numbers", ["0"]), ("1 2 3 4 5", ["5", "1"])]
    cases += [{"pred": p, "answers": a} for p, a in hand]
    while len(cases) < n:
        nums = [str(rng.randint(0, 30)) for _ in range(rng.randint(0, 5))]
        if rng.random() < 0.2:
            nums.append("١٢")
        pred = rng.choice([" ", ", ", "\n", " and ", "x"]).join(nums)
        if rng.random() < 0.5:
            pred = "The answer is " + pred
        gold = rng.choice(nums) if nums and rng.random() < 0.6 else str(rng.randint(0, 30))
        cases.append({"pred": pred, "answers": [gold]})
    return cases


def retrieval_cases(rng, n=110, marker="Paragraph "):
    cases = []
    hand = [("Paragraph 3", [marker + "3"]), ("3", [marker + "3"]), ("", [marker + "3"]),
            ("Paragraph 3, Paragraph 4", [marker + "4"]), ("paragraph 03", [marker + "3"]),
            ("Paragraph 3", ["no marker here"]), ("Paragraph 3", [marker + "x 3"]),
            ("12", ["see " + marker + "12 and " + marker + "13"]),
            ("13", ["see " + marker + "12 and " + marker + "13"]),
            # the first marker followed by digits names the paragraph
            ("3", [marker + "x, " + marker + "3"])]
    cases += [{"pred": p, "answers": a} for p, a in hand]
    while len(cases) < n:
        gold = rng.randint(1, 30)
        nums = [str(rng.randint(1, 30)) for _ in range(rng.randint(0, 3))]
        if rng.random() < 0.5:
            nums.append(str(gold))
        pred = ", ".join(marker + x if rng.random() < 0.5 else x for x in nums)
        cases.append({"pred": pred, "answers": [marker + str(gold)]})
    return cases


CODE_LINES = [
    "    return self.value + other.value",
    "for (int i = 0; i < n; i++) {",
    "x = compute(a, b)  # the result",
    "    if (ptr == NULL) return -1;",
    "print(\"hello, world\")",
    "const int size = sizeof(buf) / sizeof(buf[0]);",
    "def forward(self, x):",
    "}",
    "",
    "        self.layers = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])",
]


def code_cases(rng, n=110):
    cases = []
    hand = [
        ("", [""]), ("", ["x = 1"]), ("x = 1", ["x = 1"]), ("x = 1", ["x = 2"]),
        ("```python\nx = 1\n```", ["x = 1"]), ("# comment\nx = 1", ["x = 1"]),
        ("// c comment\nint y;", ["int y;"]), ("\n\n\nreturn 0;", ["return 0;"]),
        ("a # b\n`c`\n// d", ["a # b"]), ("url = 'http://x'\nnext", ["next"]),
        ("#\n", [""]), ("x=1\n", ["x = 1"]),
    ]
    cases += [{"pred": p, "answers": a} for p, a in hand]
    # long lines (>= 200 code points) exercise difflib's autojunk heuristic
    long_a = "    " + ", ".join(f"arg{i} = values[{i}]" for i in range(14))
    long_b = long_a.replace("values", "vals").replace("arg1", "argument1")
    cases.append({"pred": long_a, "answers": [long_b]})
    cases.append({"pred": long_b, "answers": [long_a]})
    cases.append({"pred": " " * 250 + "x", "answers": [" " * 240 + "x"]})
    # an answer of exactly 200 code points (autojunk starts at len(b) >= 200,
    # and drops elements seen more than len(b) // 100 + 1 = 3 times; "0" is seen 3 times)
    gold200 = ("    " + ", ".join(f"arg{i} = values[{i}]" for i in range(14)))[:200]
    cases.append({"pred": gold200.replace("arg", "a")[:100], "answers": [gold200]})
    while len(cases) < n:
        gold = rng.choice(CODE_LINES)
        pred_lines = []
        for _ in range(rng.randint(0, 3)):
            ln = rng.choice(CODE_LINES + ["# note", "```", "// todo", "```cpp"])
            if rng.random() < 0.4 and ln:
                i = rng.randrange(len(ln))
                ln = ln[:i] + rng.choice(["", "x", " ", "é"]) + ln[i + 1:]
            pred_lines.append(ln)
        pred = rng.choice(["", "\n"]) + "\n".join(pred_lines)
        cases.append({"pred": pred, "answers": [gold] + ([rng.choice(CODE_LINES)]
                                                          if rng.random() < 0.2 else [])})
    return cases


SENT_WORDS = ["the", "model", "reads", "a", "long", "report", "and", "writes", "short",
              "summary", "of", "budget", "cuts", "in", "2021", "The", "Model", "café", "naïve",
              "北京", "data", "results", "were", "good", "bad", "very"]


def summary_text(rng, nsent, sep):
    sents = []
    for _ in range(nsent):
        sents.append(" ".join(rng.choice(SENT_WORDS) for _ in range(rng.randint(0, 12))))
    return sep.join(sents)


def rouge_l_cases(rng, n=110):
    cases = []
    hand = [
        ("", ["a summary"]), ("a summary", [""]), ("...", ["a b"]), ("a b", ["..."]),
        (" . ", ["a"]), ("a", [" . "]), ("a.b.c", ["a b c"]), ("The cat. The dog.", ["The cat."]),
        ("the cat", ["The Cat"]), ("a  b   c", ["a b c"]), ("x. . y", ["x y"]),
        ("police killed the gunman", ["the gunman kill police"]),
        ("w1 w2 w6 w7 w8. w1 w3 w8 w9 w5", ["w1 w2 w3 w4 w5"]),
        ("same same same", ["same"]), ("北京 欢迎 你", ["北京 欢迎"]),
        # rouge 1.0.1 splits sentences on "." only: a newline is a space
        ("the cat sat\non the mat", ["on the mat the cat sat"]),
    ]
    cases += [{"pred": p, "answers": a} for p, a in hand]
    while len(cases) < n:
        pred = summary_text(rng, rng.randint(0, 4), rng.choice([". ", ".", ".\n", " . "]))
        ans = [summary_text(rng, rng.randint(1, 4), ". ") for _ in range(rng.choice([1, 1, 2]))]
        cases.append({"pred": pred, "answers": ans})
    return cases


def rouge_lsum_cases(rng, n=110):
    cases = []
    hand = [
        ("", ["a summary"]), ("a summary", [""]), ("\n\n", ["a"]), ("!!!", ["a"]),
        ("The cat.\nThe dog.", ["the cat\nthe dog"]), ("the cat the dog", ["The cat.\nThe dog."]),
        ("Café au lait", ["cafe au lait"]), ("İstanbul", ["i stanbul"]), ("\u212aelvin", ["kelvin"]),
        ("a a a", ["a"]), ("a\na\na", ["a a"]), ("x-y z", ["x y z"]), ("北京 2021", ["2021"]),
    ]
    cases += [{"pred": p, "answers": a} for p, a in hand]
    while len(cases) < n:
        pred = summary_text(rng, rng.randint(0, 4), rng.choice(["\n", ". ", ".\n", "\n\n"]))
        ans = [summary_text(rng, rng.randint(1, 4), "\n") for _ in range(rng.choice([1, 1, 2]))]
        cases.append({"pred": pred, "answers": ans})
    return cases


FUNCS = [
    "def add(a, b):\n    \"\"\"Add two numbers.\"\"\"\n    return a + b\n",
    "def scale(v, k):\n    out = []\n    for x in v:\n        out.append(x * k)\n    return out\n",
    "int clamp(int x, int lo, int hi) {\n    if (x < lo) return lo;\n    if (x > hi) return hi;\n"
    "    return x;\n}\n",
    "fn area(w: f64, h: f64) -> f64 {\n    w * h\n}\n",
    "def parse(line):\n    key, _, value = line.partition('=')\n    return key.strip(), "
    "value.strip()\n",
]


def mutate_code(rng, code, edits):
    toks = code.split(" ")
    for _ in range(edits):
        i = rng.randrange(len(toks))
        toks[i] = rng.choice(["", "x", toks[i] + "_", "tmp", toks[i]])
    return " ".join(toks)


def repoqa_cases(rng, n=110):
    cases = []
    hand = [
        ("", [FUNCS[0]]), (FUNCS[0], [FUNCS[0]]), ("```python\n" + FUNCS[0] + "```", [FUNCS[0]]),
        ("Here it is:\n```python\n" + FUNCS[0] + "```\nDone.", [FUNCS[0], FUNCS[1]]),
        ("```\n" + FUNCS[1] + "```", [FUNCS[0], FUNCS[1]]),
        ("```py \n\n" + FUNCS[0] + "```", [FUNCS[0]]), ("```python\n" + FUNCS[0], [FUNCS[0]]),
        ("text ```python\n" + FUNCS[0] + "```", [FUNCS[0]]), ("x", ["x"]), ("x", [""]),
        ("", [""]), ("a", ["a b"]), ("a b", ["a"]), (FUNCS[0], [FUNCS[0], FUNCS[0]]),
        ("```Python3\n" + FUNCS[0] + "```", [FUNCS[0]]),  # the fence's (?:\w+)? word: any case, digits
    ]
    cases += [{"pred": p, "answers": a} for p, a in hand]
    while len(cases) < n:
        k = rng.randrange(len(FUNCS))
        body = mutate_code(rng, FUNCS[k], rng.choice([0, 1, 1, 2, 3, 6]))
        if rng.random() < 0.5:
            body = "```" + rng.choice(["", "python", "cpp"]) + "\n" + body + "```"
        if rng.random() < 0.3:
            body = "Sure, the function is:\n" + body + "\nHope this helps."
        others = [f for i, f in enumerate(FUNCS) if i != k]
        rng.shuffle(others)
        cases.append({"pred": body, "answers": [FUNCS[k]] + others[:rng.randint(0, 3)]})
    return cases


def zh_cases(rng, n=110):
    zh = ["北京", "是", "中国", "的", "首都", "。", "，", "《红楼梦》", "“引号”", "ＡＢＣ", "abc",
          "Abc", " ", "\u3000", "！", "１２３", "…", "—", "、"]
    cases = [{"pred": p, "answers": a} for p, a in [
        ("", ["北京"]), ("北京", [""]), ("北京是中国的首都。", ["北京"]), ("《红楼梦》", ["红楼梦"]),
        ("ＡＢＣ", ["ａｂｃ"]), ("a b c", ["abc"]), ("“北京”", ["北京"]),
        ("北京–上海", ["北京上海"])]]  # U+2013 EN DASH is in the reference's CJK punctuation
    while len(cases) < n:
        pred = "".join(rng.choice(zh) for _ in range(rng.randint(0, 8)))
        ans = ["".join(rng.choice(zh) for _ in range(rng.randint(1, 5)))
               for _ in range(rng.choice([1, 1, 2]))]
        cases.append({"pred": pred, "answers": ans})
    return cases


def cases_for(metric):
    rng = random.Random(zlib.crc32(metric.encode()))  # stable across runs and machines
    if metric in ("scbench_mf", "scbench_passkey"):
        return digit_cases(rng)
    if metric == "scbench_choice":
        return choice_cases(rng)
    if metric == "classification":
        return classification_cases(rng)
    if metric == "count":
        return count_cases(rng)
    if metric == "retrieval":
        return retrieval_cases(rng)
    if metric == "retrieval_zh":
        return retrieval_cases(rng, marker="段落")
    if metric == "code_sim":
        return code_cases(rng)
    if metric == "rouge_l":
        return rouge_l_cases(rng)
    if metric == "rouge_lsum":
        return rouge_lsum_cases(rng)
    if metric in ("repoqa", "repoqa_bleu"):
        return repoqa_cases(rng)
    if metric == "scbench_qa_chn":
        return zh_cases(rng)
    return generic_cases(rng)
