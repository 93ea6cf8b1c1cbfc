"""The classifier against real logs of real breakages (tests/fixtures/logs/*.log).

``UPDATE_FIXTURES=1 pytest tests/unit/service/domain/test_classify_fixtures.py`` re-blesses the expected
headers from the classifier's current answers (review the diff).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from service.domain.classify import classify_log, default_rules
from service.domain.classify.engine import clean_line
from service.domain.classify.rules import Weight
from service.domain.fingerprint import FINGERPRINT_VERSION, LOCATION_CAPTURES
from service.domain.verdict import Stage
from tests.support.paths import FIXTURES

sys.path.insert(0, str(FIXTURES / "logs"))
import golden_logs as golden  # noqa: E402

GOLDENS = golden.all_goldens()
UPDATE = os.environ.get("UPDATE_FIXTURES") == "1"

# Lines that say only "something failed": never an acceptable answer when a log has more.
GENERIC = re.compile(
    r"ninja: build stopped|\[?exit code -?\d+\]?|error: command .*failed|"
    r"^FAILED: |Configuring incomplete|returned non-zero exit status|^Traceback"
)
COMPILER_ERROR = re.compile(r":\d+(?::\d+)?: (?:fatal )?error: |undefined reference to")


def test_the_corpus_covers_the_taxonomy() -> None:
    subtypes = {g.expect["subtype"] for g in GOLDENS}
    wanted = {"signature-changed", "symbol-removed", "symbol-renamed", "header-moved",
              "link-abi", "new-pure-virtual", "new-dtype-check", "new-hook-required",
              "test-regression", "crash", "language-standard", "pip-resolve", "network",
              "disk", "timeout", "killed"}
    assert wanted <= subtypes, f"no golden log for {sorted(wanted - subtypes)}"
    assert {g.expect["stage"] for g in GOLDENS} == {s.value for s in Stage}


@pytest.mark.parametrize("case", GOLDENS, ids=[g.name for g in GOLDENS])
def test_golden_log(case: golden.Golden) -> None:
    finding = classify_log(case.body, Stage(case.expect["stage"]))
    assert finding is not None, f"{case.name}: no rule matched"

    if UPDATE:
        case.expect.update(category=finding.category.value, subtype=finding.subtype.value,
                           rule=finding.rule)
        case.captures = {k: v for k, v in finding.captures.items()
                         if k not in LOCATION_CAPTURES}
        case.path.write_text(case.render(), encoding="utf-8")
        return

    got = (finding.category.value, finding.subtype.value, finding.rule)
    want = (case.expect["category"], case.expect["subtype"], case.expect["rule"])
    assert got == want, f"{case.name}: decisive line {finding.line_number}: {finding.line}"
    for key, value in case.captures.items():
        assert finding.captures.get(key) == value, f"{case.name}: capture {key}"

    # The evidence is a specific line and points at the right place in the log.
    assert not GENERIC.search(finding.line), finding.line
    body_lines = case.body.split("\n")
    assert clean_line(body_lines[finding.line_number - 1]) == finding.line
    assert finding.fingerprint and finding.fingerprint_version == FINGERPRINT_VERSION
    # "The first error of the first failing TU": no compiler error comes before it, unless
    # the rule is one that explains everything around it.
    rule = next(r for r in default_rules().rules if r.name == finding.rule)
    if rule.weight is not Weight.DOMINANT:
        earlier = [clean_line(x) for x in body_lines[: finding.line_number - 1]]
        assert not [x for x in earlier if COMPILER_ERROR.search(x)]


@pytest.mark.parametrize("case", GOLDENS, ids=[g.name for g in GOLDENS])
def test_golden_log_survives_noise_and_crlf(case: golden.Golden) -> None:
    """The same log inside a longer, Windows-line-ended, progress-bar-ridden transcript
    gives the same verdict and fingerprint (the decisive line only moves)."""
    stage = Stage(case.expect["stage"])
    plain = classify_log(case.body, stage)
    noise = "".join(f"[{i}/900] Building CXX object noise_{i}.cpp.o\r\n" for i in range(300))
    noise += "Downloading torch 10%\r 50%\r100%\r\n"
    noisy = classify_log(noise + case.body.replace("\n", "\r\n"), stage)
    assert plain is not None and noisy is not None
    assert (noisy.rule, noisy.fingerprint) == (plain.rule, plain.fingerprint)
    assert noisy.line_number == plain.line_number + 301


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_regenerated_logs_get_the_same_verdicts(tmp_path: Path) -> None:
    """The corpus is reproducible: breaking things again, for real, on this machine gives
    logs the classifier reads exactly as the committed ones (one case per tool chain)."""
    names = ["build_new_pure_virtual", "test_segfault", "provision_pip_no_match"]
    script = Path(golden.__file__).with_name("make_fixtures.py")
    subprocess.run([sys.executable, str(script), "--out", str(tmp_path), *names], check=True,
                   capture_output=True, timeout=600)
    for name in names:
        fresh = golden.load(tmp_path / f"{name}.log")
        committed = golden.load(Path(golden.__file__).with_name(f"{name}.log"))
        stage = Stage(fresh.expect["stage"])
        new, old = classify_log(fresh.body, stage), classify_log(committed.body, stage)
        assert new is not None and old is not None
        assert (new.rule, new.fingerprint) == (old.rule, old.fingerprint), name
        for key, value in fresh.captures.items():
            assert new.captures.get(key) == value, (name, key)
