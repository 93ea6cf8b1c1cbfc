"""``python -m service.api``: the API as its image serves it (docker/Dockerfile.api), the
app factory under uvicorn with the broker's dispatcher.

Started from here rather than from uvicorn's command line so that forwarded headers follow
``OOTCI_FORWARDED_ALLOW_IPS`` (``uvicorn_config``): a command line's
``--forwarded-allow-ips`` is easy to leave at ``*``, which lets any client forge its
address and scheme. One process, no ``--workers``: this process removes the secrets from
its environment first (``service.secrets``), which a worker-spawning supervisor would keep
readable in ``/proc``; scale with replicas.
"""

from __future__ import annotations

import argparse

import uvicorn

from service.api.app import proxy_options
from service.config import SettingsError, load_settings
from service.secrets import SecretsError, load_and_scrub


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m service.api", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    try:
        load_and_scrub()
        settings = load_settings()
    except (SecretsError, SettingsError) as exc:
        parser.exit(2, f"error: {exc}\n")
    uvicorn.run(
        "service.api.app:app_factory", factory=True, host=args.host, port=args.port,
        **proxy_options(settings),
    )


if __name__ == "__main__":
    main()
