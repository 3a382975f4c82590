"""The repository stands alone: one version, package data that exists, a licence, no paths outside the clone."""

from __future__ import annotations

import re
import sys

import yaml

import spark_watchd
from tests.conftest import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def test_the_version_is_written_once_in_the_package():
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "spark_watchd.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", spark_watchd.__version__)


def test_the_kubernetes_image_is_the_package_version():
    docs = yaml.safe_load_all((REPO / "deploy" / "kubernetes" / "daemonset.yaml").read_text())
    (daemonset,) = [d for d in docs if d and d["kind"] == "DaemonSet"]
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    assert container["image"].endswith(f":{spark_watchd.__version__}"), container["image"]


def test_every_package_data_pattern_matches_files():
    for package, patterns in PYPROJECT["tool"]["setuptools"]["package-data"].items():
        root = REPO / package.replace(".", "/")
        for pattern in patterns:
            assert any(p.is_file() for p in root.glob(pattern)), f"{package}: {pattern} matches nothing"


def test_the_licence_pyproject_names_is_in_the_repository():
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text  # the full text, not a pointer to it


def test_docs_point_only_inside_the_repository():
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    outside = re.compile(r"\.\./shared|/work/|(?<![\w/.])shared/(spec|traces|tools|captures)")
    bad = [f"{p.relative_to(REPO)}:{n}" for p in pages for n, line in enumerate(p.read_text().splitlines(), 1)
           if outside.search(line)]  # fmt: skip
    assert not bad, bad


def test_the_trace_spec_is_in_docs_and_linked_from_the_readme():
    assert (REPO / "docs" / "trace-v1.md").read_text().startswith("# spark-watchd trace format, version 1")
    assert "docs/trace-v1.md" in (REPO / "README.md").read_text()
