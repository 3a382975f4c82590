"""The Debian package's sources (packaging/deb): the lock, the copyright, the manual page, the scripts.

Building, installing, upgrading and purging the package is packaging/deb/test.sh (root, apt, a few
minutes), which .ci/run runs after the suite; these checks are the fast ones that need no dpkg.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from spark_watchd.cli import VERBS
from tests.conftest import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

DEB = REPO / "packaging" / "deb"


def _pins() -> dict[str, tuple[str, list[str]]]:
    """requirements.txt as {name: (version, [sha256...])}."""
    pins: dict[str, tuple[str, list[str]]] = {}
    text = (DEB / "requirements.txt").read_text().replace("\\\n", " ")
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        spec, *opts = line.split()
        name, version = spec.split("==")
        pins[canonicalize_name(name)] = (version, [o.removeprefix("--hash=sha256:") for o in opts])
    return pins


def _pythons() -> list[str]:
    m = re.search(r'^PYTHONS="([^"]+)"', (DEB / "targets").read_text(), re.M)
    assert m, "packaging/deb/targets has no PYTHONS"
    return m.group(1).split()


def test_the_lock_pins_every_runtime_dependency_within_pyproject_ranges():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["auth"]]
    pins = _pins()
    for req in wanted:
        if req.marker and not any(req.marker.evaluate({"python_version": py}) for py in _pythons()):
            continue  # tomli: only before 3.11, and the package needs python3 (>= 3.11)
        name = canonicalize_name(req.name)
        assert name in pins, f"{req} is not pinned in packaging/deb/requirements.txt (run lock.py)"
        assert req.specifier.contains(pins[name][0]), f"pinned {name}=={pins[name][0]} is outside {req}"


def test_every_pin_has_a_hash_for_each_wheel_the_package_can_ship():
    pins = _pins()
    assert all(
        hashes and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes) for _v, hashes in pins.values()
    )
    # pydantic-core is built per CPython: one wheel per target Python and machine, or lock.py is stale.
    assert len(pins["pydantic-core"][1]) == 2 * len(_pythons())
    assert _pythons()[0] == "3.11" and "3.12" in _pythons()  # Debian 12 and DGX OS (Ubuntu 24.04)


def test_the_copyright_names_every_bundled_distribution_at_its_pinned_version():
    text = (DEB / "copyright").read_text()
    missing = [
        f"{n} {v}"
        for n, (v, _h) in _pins().items()
        if not re.search(rf"\({re.escape(n)} {re.escape(v)}\b", text, re.I)
    ]
    assert not missing, f"packaging/deb/copyright lacks: {missing}"
    # Every short name a Files stanza uses has its License paragraph.
    used = {n for line in re.findall(r"^License: (.+)$", text, re.M) for n in re.split(r" and | or ", line)}
    defined = set(re.findall(r"^License: (\S+)\n ", text, re.M))
    assert used <= defined, used - defined


def test_the_manual_page_carries_every_verbs_own_help():
    spec = importlib.util.spec_from_file_location("deb_manpage", DEB / "manpage.py")
    manpage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(manpage)
    text = manpage.include()
    sections = re.findall(r"^\.SS (\S+)$", text, re.M)
    assert sections == [verb for verb, _m, _h in VERBS]
    run = text.split(".SS run\n", 1)[1].split(".fi\n", 1)[0]
    assert "\\-\\-listen HOST:PORT" in run and "Exit status: 0 done" in run
    # Inside the no-fill blocks no text line can be read by roff as a request.
    blocks = re.findall(r"^\.nf\n(.*?)^\.fi$", text, re.M | re.S)
    assert len(blocks) == len(VERBS)
    assert not [ln for b in blocks for ln in b.splitlines() if ln.startswith((".", "'"))]


@pytest.mark.parametrize("script", ["postinst", "prerm", "postrm"])
def test_the_maintainer_scripts_parse_and_touch_no_network(script):
    path = DEB / script
    sh = shutil.which("dash") or shutil.which("sh")
    assert subprocess.run([sh, "-n", str(path)], capture_output=True).returncode == 0
    text = path.read_text()
    assert text.startswith("#!/bin/sh\n") and "\nset -e\n" in text
    assert not re.search(r"\b(curl|wget|pip|apt-get|apt)\b", text)


def test_build_sh_refuses_an_unknown_architecture_before_building():
    proc = subprocess.run(
        ["bash", str(DEB / "build.sh"), "--arch", "i386"], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2
    assert "--arch must be amd64 or arm64, not 'i386'" in proc.stderr


def test_the_tmpfiles_entry_keeps_the_state_directory_as_the_unit_does():
    """postinst applies tmpfiles.conf; the unit's StateDirectory= does the same at each start: one shape."""
    unit = (REPO / "systemd" / "spark-watchd.service").read_text()
    state = re.search(r"^StateDirectory=(\S+)$", unit, re.M).group(1)
    mode = re.search(r"^StateDirectoryMode=(\d+)$", unit, re.M).group(1)
    user = re.search(r"^User=(\S+)$", unit, re.M).group(1)
    lines = [
        ln.split() for ln in (DEB / "tmpfiles.conf").read_text().splitlines() if ln and not ln.startswith("#")
    ]
    assert lines == [
        ["d", f"/var/lib/{state}", mode, user, user, "-"],
        ["Z", f"/var/lib/{state}", "-", user, user, "-"],
    ]
    assert "systemd-tmpfiles" in (DEB / "postinst").read_text()
    assert (
        '"$here/tmpfiles.conf" "$root/usr/lib/tmpfiles.d/spark-watchd.conf"' in (DEB / "build.sh").read_text()
    )
