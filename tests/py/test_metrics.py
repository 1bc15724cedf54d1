"""kvbench score agrees with the independent Python reference
(tests/reference/metrics_ref.py) on >= 100 tricky cases per metric, and bad
input files are rejected with file:line and exit code 2.

Tolerance 1e-6: both sides evaluate the same IEEE double operations (the C
code mirrors the reference's operation order), `kvbench score` prints 12
significant digits, and the only transcendental functions (log/exp in BLEU)
come from the same libm; 1e-6 leaves room for a different libm without hiding
a real disagreement (a wrong token, match or count changes a score by far more).
"""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
sys.path.insert(0, HERE)

import metric_cases  # noqa: E402
import metrics_ref as ref  # noqa: E402

BIN = os.environ.get("KVBENCH_BIN", "")
pytestmark = pytest.mark.skipif(not os.path.exists(BIN), reason="KVBENCH_BIN not built")

NEEDS = {"rouge_lsum": "rouge_score", "repoqa": "nltk", "repoqa_bleu": "nltk", "rouge_l": "rouge"}


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def run_score(args):
    return subprocess.run([BIN, "score", *args], capture_output=True, text=True, timeout=60)


def parse_scores(stdout):
    lines = stdout.strip().split("\n")
    assert lines[-1].startswith("# mean="), stdout[-200:]
    tail = dict(kv.split("=") for kv in lines[-1][2:].split())
    return [float(x) for x in lines[:-1]], tail


def test_list_names_every_reference_metric():
    r = run_score(["--list"])
    assert r.returncode == 0
    names = {ln.split()[0] for ln in r.stdout.strip().split("\n")}
    assert names == set(ref.METRICS), names ^ set(ref.METRICS)
    assert all(len(ln.split()) > 2 for ln in r.stdout.strip().split("\n")), r.stdout  # name, description


@pytest.mark.parametrize("metric", sorted(ref.METRICS))
def test_metric_matches_reference(metric, tmp_path):
    if metric in NEEDS:
        pytest.importorskip(NEEDS[metric])
    cases = metric_cases.cases_for(metric)
    assert len(cases) >= 100
    path = tmp_path / f"{metric}.jsonl"
    write_jsonl(path, cases)
    r = run_score(["--metric", metric, str(path)])
    assert r.returncode == 0, r.stderr
    got, tail = parse_scores(r.stdout)
    assert len(got) == len(cases)
    want = [ref.METRICS[metric](c["pred"], c["answers"], c.get("all_classes")) for c in cases]
    bad = [(i, cases[i], g, w) for i, (g, w) in enumerate(zip(got, want)) if abs(g - w) > 1e-6]
    assert not bad, f"{len(bad)} disagreements, first: {bad[:3]}"
    # the cases are not degenerate: both outcomes occur for 0/1 metrics
    assert len(set(round(w, 6) for w in want)) >= 2
    assert int(tail["n"]) == len(cases)
    assert abs(float(tail["task_score"]) - ref.task_score(want)) <= 0.0051


def test_partial_match_random_repetitive(tmp_path):
    """partial_match's longest common substring (a suffix automaton, linear
    time) against the reference's table DP on strings of one to four letters
    and spaces: repetitive text makes the automaton clone states, where a
    wrong suffix link or a transition left unredirected would show."""
    import random
    rng = random.Random(11)
    cases = []
    for i in range(400):
        alpha = "xyzw"[:rng.randint(1, 4)] + " "
        a = "".join(rng.choice(alpha) for _ in range(rng.randint(0, 40)))
        p = "".join(rng.choice(alpha) for _ in range(rng.randint(0, 80)))
        cases.append({"pred": p, "answers": [a]})
    path = tmp_path / "pm.jsonl"
    write_jsonl(path, cases)
    r = run_score(["--metric", "partial_match", str(path)])
    assert r.returncode == 0, r.stderr
    got, _ = parse_scores(r.stdout)
    want = [ref.partial_match(c["pred"], c["answers"]) for c in cases]
    bad = [(c, g, w) for c, g, w in zip(cases, got, want) if abs(g - w) > 1e-9]
    assert not bad, f"{len(bad)} disagreements, first: {bad[:2]}"
    assert len(set(want)) > 20


def test_score_output_exactly(tmp_path):
    """The whole stdout, worked by hand with qa_f1 (lower-cased bag of words, articles and
    punctuation dropped): "x y" against "x z w v" shares one word, precision 1/2, recall 1/4,
    F1 1/3; "x y z" against "x y w" gives 2/3; "Paris" against "paris" 1 (answers given as one
    string, all_classes null). Scores and mean with 12 significant digits (METRICS.md), the mean
    of the three is 2/3, the task score round(100 * 2/3, 2) = 66.67, n = 3."""
    path = tmp_path / "s.jsonl"
    write_jsonl(path, [{"pred": "x y", "answers": ["x z w v"]},
                       {"pred": "x y z", "answers": "x y w", "all_classes": None},
                       {"pred": "Paris", "answers": ["nowhere", "paris"], "id": 3}])
    r = run_score(["--metric", "qa_f1", str(path)])
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("0.333333333333\n0.666666666667\n1\n"
                        "# mean=0.666666666667 task_score=66.67 n=3\n"), r.stdout
    for row, msg in [({"pred": "x", "answers": 5}, "key 'answers': expected an array of strings or a string"),
                     ({"pred": "x", "answers": ["x"], "all_classes": "x"}, "key 'all_classes': expected an array of strings")]:
        write_jsonl(path, [row])
        r = run_score(["--metric", "qa_f1", str(path)])
        assert r.returncode == 2 and msg in r.stderr and r.stdout == "", r.stderr
    # the keys are case-sensitive: "Pred" is not "pred"
    write_jsonl(path, [{"Pred": "x", "answers": ["x"]}])
    r = run_score(["--metric", "qa_f1", str(path)])
    assert r.returncode == 2 and ":1: missing key 'pred'" in r.stderr and r.stdout == "", r.stderr


def test_task_score_divides_the_sum_times_100(tmp_path):
    """LongBench's round(100 * sum / n, 2), in that order: with 23 of 160 exact matches
    100 * 23 / 160 = 14.375 exactly (half to even: 14.38), while 100 * (23 / 160) is
    14.374999999999998 (14.37). Python's own arithmetic gives the expected value."""
    path = tmp_path / "ts.jsonl"
    write_jsonl(path, [{"pred": "yes" if i < 23 else "no", "answers": ["yes"]} for i in range(160)])
    r = run_score(["--metric", "exact_match", str(path)])
    assert r.returncode == 0, r.stderr
    want = round(100 * 23 / 160, 2)
    assert want == 14.38 and round(100 * (23 / 160), 2) == 14.37
    assert r.stdout.endswith(f" task_score={want:.2f} n=160\n"), r.stdout[-80:]


def test_first_line_option(tmp_path):
    rows = [{"pred": "\n\nParis\nLondon", "answers": ["London"]},
            {"pred": "Rome", "answers": ["Rome"]}]
    path = tmp_path / "fl.jsonl"
    write_jsonl(path, rows)
    got, _ = parse_scores(run_score(["--metric", "qa_f1", "--first-line", str(path)]).stdout)
    assert got == [0.0, 1.0]
    got, _ = parse_scores(run_score(["--metric", "qa_f1", str(path)]).stdout)
    assert got[0] == pytest.approx(ref.qa_f1("\n\nParis\nLondon", ["London"]))


def test_longbench_pred_file_with_extra_keys(tmp_path):
    # LongBench's pred.py writes all_classes: null and a length field
    rows = [{"pred": "The cat sat", "answers": ["the cat"], "all_classes": None, "length": 12}]
    path = tmp_path / "lb.jsonl"
    write_jsonl(path, rows)
    r = run_score(["--metric", "qa_f1", str(path)])
    assert r.returncode == 0, r.stderr
    assert parse_scores(r.stdout)[0][0] == pytest.approx(ref.qa_f1("The cat sat", ["the cat"]))


@pytest.mark.parametrize("content,needle", [
    ('{"pred": "a", "answers": ["a"]}\n{"pred": "a", "answers": [\n', ":2:"),
    ('{"pred": "a", "answers": ["a"]}\n\n{"pred": 3, "answers": ["a"]}\n', ":3:"),
    ('{"answers": ["a"]}\n', ":1:"),
    ('{"pred": "a", "answers": []}\n', ":1:"),
    ('{"pred": "a", "answers": [1]}\n', ":1:"),
    ('[1, 2]\n', ":1:"),
    ('', "no predictions"),
])
def test_bad_input_names_file_and_line(tmp_path, content, needle):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    r = run_score(["--metric", "qa_f1", str(path)])
    assert r.returncode == 2
    assert str(path) in r.stderr and needle in r.stderr, r.stderr
    assert r.stdout == ""  # nothing partial


def test_classification_needs_classes(tmp_path):
    path = tmp_path / "c.jsonl"
    write_jsonl(path, [{"pred": "a", "answers": ["a"]}])
    r = run_score(["--metric", "classification", str(path)])
    assert r.returncode == 2 and ":1:" in r.stderr and "all_classes" in r.stderr


def test_usage_errors(tmp_path):
    assert run_score(["--metric", "no_such_metric", "x.jsonl"]).returncode == 2
    assert run_score([str(tmp_path / "missing.jsonl")]).returncode == 2
    r = run_score(["--metric", "qa_f1", str(tmp_path / "missing.jsonl")])
    assert r.returncode == 2 and "missing.jsonl" in r.stderr
