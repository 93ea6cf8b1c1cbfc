"""ootci.toml loading: the bundled backend's schema, and errors that say what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT
from workers.pipeline.errors import RecipeError
from workers.pipeline.steps.recipe import load_recipe

REPO = REPO_ROOT
GOOD = """
[backend]
name = "acme"
[build]
command = ["{python}", "-m", "pip", "install", "."]
env = { MAX_JOBS = "1" }
[test]
command = ["{python}", "-m", "pytest", "tests", "--junitxml={junit}"]
timeout_per_test = 30
env = { ACME_STRICT = "1" }
"""


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "ootci.toml").write_text(text)
    return tmp_path


def test_full_recipe(tmp_path: Path) -> None:
    recipe = load_recipe(write(tmp_path, GOOD))
    assert recipe.name == "acme"
    assert recipe.source_dir == tmp_path.resolve()
    assert recipe.build_command == ("{python}", "-m", "pip", "install", ".")
    assert recipe.test_command[-1] == "--junitxml={junit}"
    assert recipe.timeout_per_test_s == 30
    assert recipe.env == {"MAX_JOBS": "1"}
    assert recipe.test_env == {"ACME_STRICT": "1"}


def test_bundled_backend_recipe_loads() -> None:
    recipe = load_recipe(REPO / "backend")
    assert recipe.name == "torch_openreg"
    assert recipe.build_command[0] == "{python}"
    assert "{junit}" in " ".join(recipe.test_command)


@pytest.mark.parametrize("name", ["tiny", "broken_compile", "segfault"])
def test_fixture_backend_recipes_load(name: str) -> None:
    assert load_recipe(REPO / "tests" / "fixtures" / "backends" / name).name == name


def test_optional_keys_default(tmp_path: Path) -> None:
    text = GOOD.replace("timeout_per_test = 30\n", "").replace('env = { MAX_JOBS = "1" }\n', "")
    recipe = load_recipe(write(tmp_path, text))
    assert recipe.timeout_per_test_s == 300
    assert recipe.env == {}


def test_missing_dir(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="does not exist"):
        load_recipe(tmp_path / "nope")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="has no ootci.toml"):
        load_recipe(tmp_path)


def test_syntax_error_names_the_line(tmp_path: Path) -> None:
    broken = GOOD.replace('name = "acme"', 'name = "acme')
    with pytest.raises(RecipeError, match=r"TOML syntax error: .*line 3"):
        load_recipe(write(tmp_path, broken))


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('name = "acme"', "", "missing key backend.name"),
        ('command = ["{python}", "-m", "pip", "install", "."]', "", "missing key build.command"),
        ("[test]", "[tests]", "missing table \\[test\\]"),
        ('name = "acme"', "name = 3", "backend.name must be a str, got int"),
        (
            'command = ["{python}", "-m", "pip", "install", "."]',
            'command = "make"',
            "build.command must be a list",
        ),
        ('command = ["{python}", "-m", "pip", "install", "."]', "command = []", "non-empty list"),
        ("timeout_per_test = 30", 'timeout_per_test = "30"', "positive integer"),
        ("timeout_per_test = 30", "timeout_per_test = 0", "positive integer"),
        (
            'env = { MAX_JOBS = "1" }',
            "env = { MAX_JOBS = 1 }",
            "build.env.MAX_JOBS must be a string",
        ),
        ("timeout_per_test = 30", "timeout = 30", "unknown key test.timeout"),
    ],
)
def test_bad_recipes_name_the_key(tmp_path: Path, old: str, new: str, message: str) -> None:
    assert old in GOOD
    with pytest.raises(RecipeError, match=message):
        load_recipe(write(tmp_path, GOOD.replace(old, new, 1)))


def test_test_requires_are_read_from_the_recipe(tmp_path: Path) -> None:
    recipe = load_recipe(write(tmp_path, GOOD + 'requires = ["expecttest>=0.2", "numpy"]\n'))
    assert recipe.test_requires == ("expecttest>=0.2", "numpy")


def test_test_requires_default_to_the_backends_test_extra(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "acme"\n[project.optional-dependencies]\n'
        'test = ["expecttest", "hypothesis"]\ndocs = ["sphinx"]\n'
    )
    assert load_recipe(write(tmp_path, GOOD)).test_requires == ("expecttest", "hypothesis")


def test_no_test_extra_means_no_test_requires(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "acme"\n')
    assert load_recipe(write(tmp_path, GOOD)).test_requires == ()


def test_malformed_test_requires_are_refused(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="test.requires"):
        load_recipe(write(tmp_path, GOOD + "requires = 'expecttest'\n"))


def test_build_requires_are_read_and_default_to_none(tmp_path: Path) -> None:
    assert load_recipe(write(tmp_path, GOOD)).build_requires == ()
    text = GOOD.replace('env = { MAX_JOBS = "1" }', 'env = { MAX_JOBS = "1" }\nrequires = ["pyyaml"]')
    recipe = load_recipe(write(tmp_path, text))
    assert recipe.build_requires == ("pyyaml",)
    assert recipe.test_requires == ()  # a build requirement is not the suite's


def test_malformed_build_requires_are_refused(tmp_path: Path) -> None:
    text = GOOD.replace('env = { MAX_JOBS = "1" }', 'env = { MAX_JOBS = "1" }\nrequires = "pyyaml"')
    with pytest.raises(RecipeError, match="build.requires"):
        load_recipe(write(tmp_path, text))


def test_build_network_is_off_unless_the_recipe_asks(tmp_path: Path) -> None:
    assert load_recipe(write(tmp_path, GOOD)).build_network is False
    text = GOOD.replace('env = { MAX_JOBS = "1" }', 'env = { MAX_JOBS = "1" }\nnetwork = true')
    assert load_recipe(write(tmp_path, text)).build_network is True
    with pytest.raises(RecipeError, match="build.network must be true or false, got 'yes'"):
        load_recipe(write(tmp_path, text.replace("network = true", 'network = "yes"')))
