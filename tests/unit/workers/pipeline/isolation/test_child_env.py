"""What a build, test or provision process inherits: the constructed environment, the
operator's allow list and its refusals, and the masking of secrets in stored logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.config import Settings, SettingsError, load_settings, refused_passthrough
from workers.pipeline.isolation.child_env import (
    ChildEnvPolicy,
    base_environ,
    child_environment,
    current_policy,
)
from workers.pipeline.isolation.procs import child_env
from workers.pipeline.logs.masking import MASK, SecretMasker, settings_secrets
from workers.pipeline.logs.sink import LogSink

WORKER = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/root",
    "OOTCI_DATABASE_URL": "postgresql+psycopg://ootci:Db-Secret-1@db/ootci",
    "OOTCI_API_TOKEN": "tok-123456",
    "GITHUB_TOKEN": "ghp_abcdef",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "https_proxy": "http://proxy.internal:3128",
    "PIP_INDEX_URL": "https://pypi.internal/simple",
    "SOMETHING_ELSE": "x",
    "PYTHONPATH": "/worker/src",
}


def policy(tmp_path: Path, *passthrough: str) -> ChildEnvPolicy:
    return ChildEnvPolicy(tmp_path / "home", tmp_path / "tmp", passthrough)


def test_only_the_allowed_variables_reach_a_child(tmp_path: Path) -> None:
    env = base_environ(policy(tmp_path, "https_proxy", "PIP_INDEX_URL"), WORKER)
    assert env == {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "TMPDIR": str(tmp_path / "tmp"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "https_proxy": "http://proxy.internal:3128",
        "PIP_INDEX_URL": "https://pypi.internal/simple",
    } | ({"CCACHE_DIR": env["CCACHE_DIR"]} if "CCACHE_DIR" in env else {})
    assert (tmp_path / "home").is_dir() and (tmp_path / "tmp").is_dir()


def test_a_policy_naming_a_secret_still_withholds_it(tmp_path: Path) -> None:
    # Settings refuse these; a policy built by other code must not pass them either.
    env = base_environ(
        policy(tmp_path, "OOTCI_API_TOKEN", "OOTCI_DATABASE_URL", "GITHUB_TOKEN",
               "AWS_SECRET_ACCESS_KEY"),
        WORKER,
    )
    assert not {"OOTCI_API_TOKEN", "OOTCI_DATABASE_URL", "GITHUB_TOKEN",
                "AWS_SECRET_ACCESS_KEY"} & env.keys()


@pytest.mark.parametrize(
    "name",
    ["OOTCI_DATABASE_URL", "OOTCI_HOME", "ootci_api_token", "DATABASE_URL", "CELERY_BROKER_URL",
     "REDIS_URL", "GITHUB_TOKEN", "GH_TOKEN", "NPM_TOKEN", "PGPASSWORD", "AWS_ACCESS_KEY_ID",
     "MY_SECRET", "DB_PASSWORD", "1BAD", "A-B"],
)
def test_settings_refuse_passing_secrets(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert refused_passthrough(name) is not None
    monkeypatch.setenv("OOTCI_CHILD_ENV_PASSTHROUGH", f'["https_proxy", "{name}"]')
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert "OOTCI_CHILD_ENV_PASSTHROUGH" in str(err.value) and name in str(err.value)


def test_settings_accept_proxies_and_indexes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OOTCI_CHILD_ENV_PASSTHROUGH", '["https_proxy", "UV_INDEX_URL", "CC"]')
    assert load_settings().child_env_passthrough == ["https_proxy", "UV_INDEX_URL", "CC"]
    assert all(refused_passthrough(n) is None for n in Settings().child_env_passthrough)


def test_steps_build_on_the_policy_of_the_run_in_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OOTCI_API_TOKEN", "tok-123456")
    monkeypatch.setenv("PYTHONPATH", "/worker/src")
    run = ChildEnvPolicy.for_run(Settings(home=tmp_path), tmp_path / "runs" / "7")
    with child_environment(run):
        env = child_env({"RECIPE": "1"}, pythonpath_front=["/overlay"])
        assert current_policy() is run
    assert env["HOME"] == str(tmp_path / "runs" / "7" / "home")
    assert env["RECIPE"] == "1" and env["PYTHONPATH"] == "/overlay"
    assert "OOTCI_API_TOKEN" not in env
    # Outside a run: a private HOME, never the worker's.
    assert child_env({})["HOME"] != str(Path.home())


def test_masker_hides_secret_values_and_url_passwords() -> None:
    mask = SecretMasker.from_environ(WORKER, extra=["webhook-secret-9"])
    line = (
        "connecting to postgresql+psycopg://ootci:Db-Secret-1@db/ootci with tok-123456; "
        "echo Db-Secret-1 ghp_abcdef aws-secret webhook-secret-9; "
        "pip from https://user:p%40ss@pypi.internal/simple; proxy http://proxy.internal:3128"
    )
    masked = mask(line)
    for secret in ("Db-Secret-1", "tok-123456", "ghp_abcdef", "aws-secret", "webhook-secret-9",
                   "p%40ss"):
        assert secret not in masked
    assert f"postgresql+psycopg://ootci:{MASK}@db/ootci" in masked
    assert f"https://user:{MASK}@pypi.internal/simple" in masked
    assert "http://proxy.internal:3128" in masked  # not a secret: left alone
    assert mask("nothing to hide: /usr/bin x=1") == "nothing to hide: /usr/bin x=1"


def test_settings_secrets_cover_what_an_env_file_holds() -> None:
    settings = Settings(
        database_url="postgresql+psycopg://ootci:from-dotenv-1@db/ootci",
        broker_url="redis://:broker-pw-2@redis:6379/0",
        api_token="api-tok-3", webhook_secret="hook-4", github_token="ghp_5555",
    )
    assert set(settings_secrets(settings)) >= {
        "from-dotenv-1", "broker-pw-2", "api-tok-3", "hook-4", "ghp_5555"
    }


def test_logsink_masks_before_anything_sees_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OOTCI_GITHUB_TOKEN", "ghp_fromtheworker")
    seen: list[str] = []
    with LogSink(tmp_path / "build.log", on_line=seen.append) as log:
        log.write("token=ghp_fromtheworker\nurl=redis://:pw12345@broker:6379/0\n")
    stored = (tmp_path / "build.log").read_text()
    assert "ghp_fromtheworker" not in stored + "".join(seen) + "".join(log.tail())
    assert "pw12345" not in stored and stored.count(MASK) == 2 and len(seen) == 2
