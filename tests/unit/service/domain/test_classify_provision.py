"""pip's output when it cannot resolve a torch spec (``workers/pipeline/env/resolve.py``):
the rules alone say whether the machine (the network, the disk) or the requirement is at
fault. These are the lines the resolver once matched by hand."""

from __future__ import annotations

import pytest

from service.domain.classify import classify_log
from service.domain.verdict import Category, Stage, Subtype

POOL = "ERROR: Could not install packages due to an OSError: HTTPSConnectionPool(host='download.pytorch.org', port=443): "
MACHINE = {
    "new-connection": "WARNING: Retrying (Retry(total=4)) after connection broken by 'NewConnectionError(\"<HTTPSConnection object>: Failed to establish a new connection: [Errno 111] Connection refused\")': /whl/torch/",
    "max-retries": POOL + "Max retries exceeded with url: /whl/cpu/torch/ (Caused by ResponseError('too many 503 error responses'))",
    "name-resolution": "WARNING: Retrying after connection broken by 'NewConnectionError(\"Failed to establish a new connection: [Errno -3] Temporary failure in name resolution\")': /simple/torch/",
    "name-unknown": "ERROR: HTTPSConnectionPool(host='pypi.invalid', port=443): [Errno -2] Name or service not known",
    "connection-refused": "ERROR: Could not fetch the index: Connection refused",
    "connect-timeout": POOL + "Max retries exceeded with url: /whl/ (Caused by ConnectTimeoutError(<HTTPSConnection object>, 'Connection to download.pytorch.org timed out. (connect timeout=15)'))",
    "read-timeout": "WARNING: Retrying (Retry(total=4)) after connection broken by 'ReadTimeoutError(\"HTTPSConnectionPool(host='pypi.org', port=443): Read timed out. (read timeout=15)\")': /simple/torch/",
    "ssl": "Could not fetch URL https://pypi.org/simple/torch/: There was a problem confirming the ssl certificate: (Caused by SSLError(SSLCertVerificationError(1, 'certificate verify failed')))",
    "proxy": POOL + "Max retries exceeded with url: /whl/ (Caused by ProxyError('Unable to connect to proxy', OSError('Tunnel connection failed: 403 Forbidden')))",
    "disk-full": "ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device",
    "read-only": "ERROR: Could not install packages due to an OSError: [Errno 30] Read-only file system: '/cache/pip'",
}
REQUIREMENT = {
    "no-match": "ERROR: Could not find a version that satisfies the requirement torch==99.0 (from versions: 2.5.0, 2.6.0)\nERROR: No matching distribution found for torch==99.0",
    "conflict": "ERROR: Cannot install torch==2.6.0 because these package versions have conflicting dependencies.\nERROR: ResolutionImpossible: for help visit https://pip.pypa.io",
    "bad-requirement": "ERROR: Invalid requirement: 'torch==='",
}


@pytest.mark.parametrize("line", MACHINE.values(), ids=MACHINE.keys())
def test_the_machine_s_faults_are_infra_network_or_disk(line: str) -> None:
    finding = classify_log(f"$ python -m pip install --dry-run torch\n{line}\n", Stage.PROVISION)
    assert finding is not None
    assert finding.category is Category.INFRA
    assert finding.subtype in {Subtype.NETWORK, Subtype.DISK}


@pytest.mark.parametrize("text", REQUIREMENT.values(), ids=REQUIREMENT.keys())
def test_a_requirement_that_does_not_resolve_is_not_the_network_or_the_disk(text: str) -> None:
    finding = classify_log(f"$ python -m pip install --dry-run torch\n{text}\n", Stage.PROVISION)
    assert finding is None or finding.subtype not in {Subtype.NETWORK, Subtype.DISK}


def test_the_provision_only_rules_leave_a_build_log_alone() -> None:
    """A backend whose own test writes outside its dirs meets a read-only root in the
    sandbox: that is the backend's doing, not the machine's."""
    line = "OSError: [Errno 30] Read-only file system: '/usr/lib/python3/x'"
    finding = classify_log(line, Stage.TEST)
    assert finding is None or finding.rule != "infra-read-only-filesystem"
