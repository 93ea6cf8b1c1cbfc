"""What the build step hands the backend's build: placeholders and environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workers.pipeline.env.torch_env import TorchEnv
from workers.pipeline.steps.build import build_environ, default_lock_file
from workers.pipeline.steps.recipe import Recipe, expand


def recipe(tmp_path: Path, **env: str) -> Recipe:
    return Recipe("acme", tmp_path, ("{python}", "setup.py"), ("{python}", "-m", "pytest"), env=env)


def torch_env(tmp_path: Path, *pythonpath: Path) -> TorchEnv:
    return TorchEnv(
        spec="path:/x",
        source_kind="path",
        python=Path("/usr/bin/python3"),
        version="2.13.0",
        git_version="a" * 40,
        env_key="k",
        torch_dir=tmp_path / "torch",
        pythonpath=pythonpath,
    )


def test_expand_substitutes_known_placeholders_only() -> None:
    assert expand(
        ("{python}", "-c", "print({1: 2})", "--junitxml={junit}"), python="/p", junit="/j.xml"
    ) == [
        "/p",
        "-c",
        "print({1: 2})",
        "--junitxml=/j.xml",
    ]


def test_build_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/from/worker")
    env = build_environ(
        recipe(
            tmp_path, MAX_JOBS="1", CMAKE_BUILD_PARALLEL_LEVEL="16", EXTRA="x",
            PYTHONPATH="/from/recipe",
        ),
        torch_env(tmp_path, Path("/overlay")),
        tmp_path / "b",
        None,
    )
    assert env["OPENREG_BUILD_DIR"] == str(tmp_path / "b")
    assert env["MAX_JOBS"] == "1"  # fewer jobs than the cap: the recipe's choice
    assert env["CMAKE_BUILD_PARALLEL_LEVEL"] == "2"  # more than the cap: capped
    assert env["EXTRA"] == "x"
    assert env["LC_ALL"] == "C"
    assert env["PYTHONPATH"].split(os.pathsep) == ["/overlay", "/from/recipe"]


def test_recipe_may_pick_its_locale(tmp_path: Path) -> None:
    env = build_environ(
        recipe(tmp_path, LC_ALL="C.UTF-8"), torch_env(tmp_path), tmp_path / "b", None
    )
    assert env["LC_ALL"] == "C.UTF-8"


def test_ccache_on_path_is_wired_into_cmake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    ccache = tools / "ccache"
    ccache.write_text('#!/bin/sh\nexec "$@"\n')
    ccache.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CCACHE_DIR", raising=False)
    monkeypatch.setenv("CCACHE_DIR", str(tmp_path / "shared"))  # the worker's: not the build's
    env = build_environ(recipe(tmp_path, CCACHE_DIR="/elsewhere"), torch_env(tmp_path),
                        tmp_path / "b", tmp_path / "ccache" / "tiny")
    assert env["CCACHE_DIR"] == str(tmp_path / "ccache" / "tiny")
    assert env["CMAKE_CXX_COMPILER_LAUNCHER"] == env["CMAKE_C_COMPILER_LAUNCHER"] == "ccache"


def test_without_ccache_no_launcher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on it
    monkeypatch.delenv("CMAKE_CXX_COMPILER_LAUNCHER", raising=False)
    monkeypatch.delenv("CCACHE_DIR", raising=False)
    env = build_environ(recipe(tmp_path), torch_env(tmp_path), tmp_path / "b", tmp_path / "cache")
    assert "CMAKE_CXX_COMPILER_LAUNCHER" not in env and "CCACHE_DIR" not in env
    assert env["CMAKE_BUILD_PARALLEL_LEVEL"] == "2"


def test_one_lock_per_source_tree(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert default_lock_file(tmp_path / "a") == default_lock_file(tmp_path / "a" / ".." / "a")
    assert default_lock_file(tmp_path / "a") != default_lock_file(tmp_path / "b")
