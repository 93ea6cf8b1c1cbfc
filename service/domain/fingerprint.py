"""Fingerprints: one stable id per kind of failure, LUCI Analysis style.

``fingerprint(finding) -> str`` (32 hex chars) and ``FINGERPRINT_VERSION``.

The same break seen on another night, another torch build or another machine must give
the same id; a break naming a different symbol must not. So the id hashes the rule name and
the finding's *captures* (the groupable part the rule names: symbol, header, class, test...)
after masking what varies between runs: temp/venv/site-packages/build paths, numbers,
hex, addresses, hashes, torch versions. Captures that only say *where* (``file``,
``library``, ``variable``, ``worker``) are left out. A finding without captures falls back
to its masked decisive line.

Bump FINGERPRINT_VERSION whenever this algorithm or the rules change what they capture;
stored rows keep their version so ``ootci reclassify`` can re-cluster them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

from service.domain.verdict import Finding

FINGERPRINT_VERSION = 2

LOCATION_CAPTURES = frozenset({"file", "library", "variable", "worker"})
# Which test saw a break matters only when nothing else names the break: "aten::matmul is
# not registered for Autocast" in five tests is one breakage; a bare assertion is its test's.
TEST_CAPTURE = "test"
_PARAMETRISATION = re.compile(r"\[.*\]$")

_PATH_STOP = r"""[^\s:'"‘’`()<>,;\[\]{}]"""
# Masks that make text machine- and build-independent; order matters (paths before numbers).
_PATH_MASKS: tuple[tuple[re.Pattern[str], str], ...] = (
    # A torch install anywhere (venv, overlay in /tmp, conda): keep the path inside torch/.
    (re.compile(rf"(?<![\w.]){_PATH_STOP}*/torch/(include|lib|share|csrc)/"), r"<torch>/\1/"),
    (re.compile(rf"(?<![\w.]){_PATH_STOP}*/(?:site|dist)-packages/"), "<site>/"),
    # Any other absolute path: only its last component is stable across machines.
    (re.compile(rf"(?<![\w.<>])(?:/{_PATH_STOP}+)+/({_PATH_STOP}*)"), r"<path>/\1"),
)
_STABLE_MASKS: tuple[tuple[re.Pattern[str], str], ...] = (
    *_PATH_MASKS,
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    # torch versions and other dotted versions: 2.13.0+cpu, 2.14.0.dev20251101+cu128.
    (re.compile(r"\b\d+(?:\.\d+)+(?:(?:a|b|rc)\d+)?(?:\.dev\d+)?(?:\+[A-Za-z0-9_.]+)?"), "<ver>"),
    (re.compile(r"\bgit[0-9a-f]{7,40}\b"), "<sha>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,64}\b"), "<sha>"),
)
# Bare numbers (line/column, pids, sizes, assertion values) are masked too, except in
# captures where the digits are the point (C++17 vs C++20).
DIGITS_MATTER = frozenset({"standard"})
_NUMBER = re.compile(r"\b\d+\b")


def mask_paths(text: str) -> str:
    """``text`` without the absolute paths that say where a run happened (its env, cache,
    run dir, home): what a title shows. Numbers, versions and hashes are kept."""
    for pattern, repl in _PATH_MASKS:
        text = pattern.sub(repl, text)
    return text


def mask(text: str, *, numbers: bool = True) -> str:
    """The run-independent form of a log line or capture."""
    for pattern, repl in _STABLE_MASKS:
        text = pattern.sub(repl, text)
    if numbers:
        text = _NUMBER.sub("<n>", text)
    return text.strip()


def signature(rule: str, captures: Mapping[str, str], line: str) -> str:
    """The masked text the fingerprint hashes (also useful to show why two runs group)."""
    named = {k: v for k, v in captures.items() if k not in LOCATION_CAPTURES}
    if len(named) > 1:
        named.pop(TEST_CAPTURE, None)
    elif TEST_CAPTURE in named:
        # test_op[float32] and test_op[float64] failing alike are one break.
        named[TEST_CAPTURE] = _PARAMETRISATION.sub("", named[TEST_CAPTURE])
    groupable = sorted((k, mask(v, numbers=k not in DIGITS_MATTER)) for k, v in named.items())
    body = "\n".join(f"{k}={v}" for k, v in groupable) if groupable else mask(line)
    return f"v{FINGERPRINT_VERSION}\n{rule}\n{body}"


def fingerprint(finding: Finding) -> str:
    sig = signature(finding.rule, finding.captures, finding.line)
    return hashlib.sha256(sig.encode("utf-8", "replace")).hexdigest()[:32]


def with_fingerprint(finding: Finding) -> Finding:
    return finding.with_fingerprint(fingerprint(finding), FINGERPRINT_VERSION)
