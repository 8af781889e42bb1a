"""The result as data: `dualpath metrics -f json` carries a result object that validates
against the schema in the repository and holds every number the headline prints, to its
printed precision (one source: the text and the data cannot disagree); the headline says
each thing once, on the seeded warehouse and under a short forced plan like the 3-night
demo's."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

from dualpath.evals.result import schema
from tests.cli_run import run_cli
from tests.seeded import seed_warehouse


def _json(cfg_path) -> dict:
    r = run_cli("metrics", "-c", str(cfg_path), "-f", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _headline(cfg_path, *args) -> list[str]:
    r = run_cli("metrics", "-c", str(cfg_path), *args, columns=100)
    assert r.returncode == 0, r.stderr
    return r.stdout.split("\n\n")[0].splitlines()


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    return seed_warehouse(tmp_path_factory.mktemp("seeded"))[0]


@pytest.fixture(scope="module")
def short_forced(tmp_path_factory):
    """20 tickers, 3 nights, under a plan frozen for those 3 nights with --force and the
    reason the demo gives (`flows.demo`): its window cannot test the primary."""
    from dualpath.flows.prereg import freeze_plan
    from dualpath.prereg import draft_plan, plan_toml, testability
    from dualpath.prereg_design import reassurance_problems

    root = tmp_path_factory.mktemp("short")
    cfg_path, cfg, nights = seed_warehouse(root, tickers=20, nights=3)
    plan = draft_plan(cfg, nights[0], 3)
    (root / "prereg.toml").write_text(plan_toml(plan))
    why = testability(plan) + reassurance_problems(plan)
    assert why                      # the case the demo prints: too short for any test
    freeze_plan(cfg, root / "prereg.toml", force=True,
                reason="a 3-night demo: " + "; ".join(why))
    return cfg_path


def test_the_result_validates_against_the_schema_and_holds_the_ratio(seeded):
    doc = _json(seeded)
    r = doc["result"]
    jsonschema.validate(r, schema())
    x = r["interchangeability"]
    # 8 tickers: below the 20 the interval needs, so a ratio and no interval
    assert isinstance(x["ratio"], float) and x["interval"]["low"] is None
    assert (x["answer"], x["verdict"], x["label"]) == ("insufficient tickers",
                                                        "insufficient tickers", "exploratory")
    s = r["speed"]
    assert s["ratio"] == pytest.approx(5.70, abs=0.005)
    assert s["interval"]["low"] < s["ratio"] < s["interval"]["high"]
    assert s["medians"] == {"backup": 347.0, "main": 61.0} and s["basis"] == "throughput"
    assert r["rankic"]["verdict"] == "insufficient nights" and r["rankic"]["horizon"] == 5
    assert r["lines"] == doc["headline"]


def test_a_schema_violation_is_caught(seeded):
    """The schema is not a formality: a ratio given as text, or a field it does not know,
    fails validation."""
    r = _json(seeded)["result"]
    bad = {**r, "speed": {**r["speed"], "ratio": "5.7"}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**r, "extra": 1}, schema())


def test_the_short_forced_studys_result_validates_with_its_look(short_forced):
    r = _json(short_forced)["result"]
    jsonschema.validate(r, schema())
    x = r["interchangeability"]
    assert x["planned"] and isinstance(x["ratio"], float) and isinstance(
        x["interval"]["low"], float)
    # the window closed with 2 complete nights (the last backup run is partial): the final
    # look moves to the nights collected
    assert x["sequential"]["looks"] == [2] and x["look"] == 1
    assert isinstance(x["z"], float) and isinstance(x["boundary"], float)
    assert isinstance(x["noise_backup_rate"], float)


# A number as the headline prints it, and the unit conversions the text makes of a stored
# value: a share as a percentage, hours as minutes or seconds, joules as kilojoules
NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?")
SCALES = (1, 100, 60, 3600, 1e-3)


def _leaves(doc, numbers: list, strings: list) -> None:
    """Every number and string of ``doc``, but an answer's words: they copy the first
    line's text, numbers and all, and would match it whatever the data held."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k != "answer":
                _leaves(v, numbers, strings)
    elif isinstance(doc, list):
        for v in doc:
            _leaves(v, numbers, strings)
    elif isinstance(doc, bool) or doc is None:
        return
    elif isinstance(doc, (int, float)):
        numbers.append(float(doc))
    elif isinstance(doc, str):
        strings.append(doc)


def _printed(token: str, numbers: list[float]) -> bool:
    """Whether some stored number, in one of the text's units (or inverted: '1.1× faster'
    is 1 ÷ the ratio), prints as ``token`` at its printed precision."""
    places = len(token.split(".")[1]) if "." in token else 0
    want = token.lstrip("+-").replace(",", "")
    for v in numbers:
        for x in (v, 1 / v if v else None):
            if x is not None and any(f"{abs(x * k):.{places}f}" == want for k in SCALES):
                return True
    return False


def _unmatched(lines: list[str], result: dict) -> list[str]:
    numbers, strings = [], []
    _leaves({k: v for k, v in result.items() if k != "lines"}, numbers, strings)
    missing = []
    for line in lines:
        text = line
        # words the data carries as text (a label's reasons, a note) are the data's
        for s in sorted((s for s in strings if len(s) >= 8), key=len, reverse=True):
            text = text.replace(s, " ")
        missing += [f"{tok!r} in {line!r}" for tok in NUMBER.findall(text)
                    if not _printed(tok, numbers)]
    return missing


def test_every_number_the_headline_prints_is_in_the_result(seeded, short_forced):
    """Each number of the headline's text (every line, details too) is a number of the
    result object at the precision printed: the text cannot say what the data does not."""
    for cfg_path in (seeded, short_forced):
        doc = _json(cfg_path)
        # the text wraps a long line: join each wrapped line to the one it continues
        text = "\n".join(doc["headline"])
        assert _unmatched(text.replace("\n    ", " ").splitlines(), doc["result"]) == []


def test_a_number_the_result_lacks_is_caught(seeded):
    """The check above can fail: the speed ratio's 5.7 is unmatched once the result loses
    the ratio and its interval."""
    doc = _json(seeded)
    r = doc["result"]
    r["speed"] = {**r["speed"], "ratio": None, "interval": {"low": None, "high": None,
                                                            "level": 0.95}}
    speed = [ln for ln in doc["headline"] if ln.startswith("Speed")]
    assert _unmatched(speed, r) == [f"'5.7' in {speed[0]!r}", f"'5.6' in {speed[0]!r}",
                                    f"'5.8' in {speed[0]!r}"]


def test_no_line_of_the_headline_is_printed_twice(seeded, short_forced):
    """Neither brief nor --verbose repeats a line; under the demo's forced plan the reason
    it could not test ('its test needs 4 (4 nights)') is said once in the whole headline
    (it was said four times: twice in one label, under both questions)."""
    for cfg_path in (seeded, short_forced):
        for args in ((), ("--verbose",)):
            lines = _headline(cfg_path, *args)
            assert len(lines) == len(set(lines)), lines
            assert all(len(line) <= 100 for line in lines), lines
    text = " ".join(" ".join(_headline(short_forced, "--verbose")).split())
    assert text.count("its test needs 4 (4 nights)") == 1, text
    first = [ln for ln in _headline(short_forced) if not ln.startswith(" ")]
    assert [ln.rsplit("  [", 1)[-1] for ln in first[:2]] == ["exploratory]", "exploratory]"]


def test_csv_carries_the_headline_table_per_question(seeded):
    out = run_cli("metrics", "-c", str(seeded), "-f", "csv").stdout
    block = out[out.index("# headline"):out.index("# comparison")].splitlines()
    assert block[1] == "question,answer,estimate,ci_low,ci_high,ci_level,basis,detail"
    assert [row.split(",")[0] for row in block[2:]] == ["interchangeability", "rankic",
                                                        "speed", "energy"]


def test_the_report_writes_the_result_beside_its_html(seeded, tmp_path):
    r = run_cli("report", "-c", str(seeded), "--out", str(tmp_path / "rep"))
    assert r.returncode == 0, r.stderr
    doc = json.loads(next((tmp_path / "rep").glob("*.json")).read_text())
    jsonschema.validate(doc["result"], schema())
    assert doc["result"]["speed"]["ratio"] == pytest.approx(_json(seeded)["result"]["speed"]
                                                            ["ratio"])
