"""Usable memory nearly gone (issue 31): critical whatever PSI says, on a creep into a thin spell; a load
that settles, a one-second dip and a server steady at 1.5 GiB stay below critical."""

from __future__ import annotations

from spark_watchd.diagnose import features as feat
from spark_watchd.diagnose import g3
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.diagnose.usable import ThinSpell, basis
from tests.diagnose.diag_builders import Host

GIB = 1024**3
KB_GIB = 1024 * 1024


def _cma(s, cma_free_gib, cma_total_gib=9.3):
    """A CMA kernel's sample: MemAvailable counts CmaFree on top of what the builder gave as usable."""
    s.meminfo["MemAvailable"] += int(cma_free_gib * KB_GIB)
    s.meminfo["CmaFree"] = int(cma_free_gib * KB_GIB)
    s.meminfo["CmaTotal"] = int(cma_total_gib * KB_GIB)
    object.__setattr__(s, "mem_available_min_kb", s.mem_available_min_kb + int(cma_free_gib * KB_GIB))
    return s


def _severities(host, usable_gibs, cma_gibs=None, psi=0.0, mins=None):
    th = Thresholds()
    tr = g3.G3Tracker(th)
    out = []
    prev = None
    for i, u in enumerate(usable_gibs):
        s = host.sample(
            avail_gib=u, avail_min_gib=None if mins is None else mins[i], psi_some=psi, psi_full=0.0
        )
        if cma_gibs is not None:
            _cma(s, cma_gibs[i])
        f = feat.compute(prev, s, th)
        prev = f
        out.append(tr.observe(s, f).finding)
    return out


def test_psi_blind_creep_is_critical_as_it_enters_the_thin_spell():
    """The owner's kill: PSI 0.0 throughout, MemAvailable ~9-10 GiB because CmaFree climbed to 8.8 GiB;
    usable (MemAvailable - CmaFree) lost ~0.5 GiB a sample through its last 4 GiB."""
    usable = [6.0, 5.5, 5.0, 4.5, 3.9, 3.4, 2.9, 2.4]
    cma = [6.0, 6.4, 6.8, 7.2, 7.6, 8.0, 8.4, 8.8]
    found = _severities(Host(), usable, cma)
    assert [f.severity for f in found[:4]] == ["warning"] * 4  # thin, but not nearly gone yet
    assert all(f.severity == "critical" for f in found[4:])
    assert "whatever PSI says" in found[4].summary
    assert "CmaFree 7.6 GiB" in found[4].summary
    assert found[4].evidence["usable_bytes"] < 4 * GIB < found[4].evidence["mem_available_bytes"]
    assert found[4].evidence["usable_basis"] == "MemAvailable - CmaFree (CMA region 9.3 GiB)"


def test_the_same_meminfo_without_the_cma_subtraction_is_not_critical():
    """Judged on MemAvailable alone (budget_subtracts_cma_free off) the same creep stays a warning: the
    CmaFree in MemAvailable hides it, which is why usable memory subtracts it."""
    th = Thresholds(budget_subtracts_cma_free=False)
    host, tr, prev, sev = Host(), g3.G3Tracker(th), None, []
    for u, c in zip([6.0, 5.5, 5.0, 4.5, 3.9, 3.4], [6.0, 6.4, 6.8, 7.2, 7.6, 8.0], strict=True):
        s = _cma(host.sample(avail_gib=u, psi_some=0.0), c)
        prev = feat.compute(prev, s, th)
        sev.append(tr.observe(s, prev).finding.severity)
    assert "critical" not in sev


def test_a_load_that_lands_and_settles_in_the_thin_zone_is_never_critical():
    usable = [60.0, 40.0, 20.0, 3.2, 3.1, 3.3, 3.0, 3.2, 3.1, 3.0, 3.2] + [3.1] * 20
    found = _severities(Host(), usable)
    assert {f.severity for f in found} <= {"ok", "warning"}


def test_a_roomy_pool_dipping_for_one_second_is_not_critical():
    usable = [40.0] * 6
    mins = [None, None, 0.8, None, None, None]
    found = _severities(Host(), usable, mins=mins)
    assert "critical" not in {f.severity for f in found}


def test_a_server_steady_at_1_5_gib_stays_warning_and_nearly_nothing_is_critical():
    steady = _severities(Host(), [1.7, 1.6, 1.5, 1.6, 1.7, 1.5, 1.6] * 5)
    assert {f.severity for f in steady} == {"warning"}
    gone = _severities(Host(), [0.8, 0.9, 0.8, 0.8])  # nearly nothing, flat: critical once sustained
    assert [f.severity for f in gone] == ["warning", "critical", "critical", "critical"]
    fell = _severities(Host(), [1.6, 1.5, 0.9])  # a 0.6 GiB fall inside the spell
    assert [f.severity for f in fell] == ["warning", "warning", "critical"]


def test_thin_spell_needs_consecutive_samples_and_ends_past_its_leaving_level():
    th = Thresholds()
    sp = ThinSpell()
    assert not sp.step(0, int(0.5 * GIB), int(0.5 * GIB), th)  # one sample: no spell yet
    assert sp.step(30, int(0.5 * GIB), int(0.5 * GIB), th)
    sp.step(60, int(4.5 * GIB), int(4.5 * GIB), th)  # between the levels: the spell goes on
    assert sp.n == 3
    assert not sp.step(90, int(5.5 * GIB), int(5.5 * GIB), th)
    assert sp.n == 0


def test_usable_basis_is_read_from_this_boots_meminfo():
    assert "CmaTotal 0" in basis(0)
    assert "CmaFree" in basis(int(9.3 * GIB)) and "9.3 GiB" in basis(int(9.3 * GIB))
    assert "no CMA lines" in basis(None)
