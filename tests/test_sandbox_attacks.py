"""The attack corpus (tests/hostile_tools/, one attack per file) through the real sandbox.

Each attack is a ToolHop tool that tries one way out and returns what it achieved
(``{"escaped": bool, "detail": str}``); the host checks what a tool cannot see for itself (a
decoy process's nice value, affinity, scheduling, I/O priority, limits and state; the zygote's;
host file opens refused; a socket reached; a file left in /dev/shm; a process that outlived its
call; a harmless tool's result before and after). ``tests/hostile_tools/run_corpus.py`` does
the work (it also runs the corpus from outside the repository); here, per attack:

- all layers on: the attack achieved nothing, the call ended as a result or a tool error, the
  zygote lived, the next innocent call worked and the harmless tool answered as before;
- with the layers the attack names in ``LAYERS`` switched off (and the audit hook, which every
  attack disables by itself anyway), on an insecure pool: the attack got through. That proves
  the attack is real and that those layers are what stop it. Skipped where this machine cannot
  show it (``NEEDS_ROOT`` as an ordinary user, a missing capability, user namespaces or io_uring
  refused), or where the pool will not start with those layers off.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pytest_toolbench.sandbox import SandboxStartError
from pytest_toolbench.sandbox.pool import LAYERS as KNOWN_LAYERS

HOSTILE = Path(__file__).parent / "hostile_tools"
RUNNER = HOSTILE / "run_corpus.py"
# One after another, on one xdist worker: with its layers off, kill_all_probe signals every
# process (another test's decoy counts the SIGURG), and two attacks could draw the same watched
# file.
pytestmark = pytest.mark.xdist_group("sandbox_attacks")


@pytest.fixture(autouse=True)
def one_attack_at_a_time():
    """The same, whatever spreads the tests (``--dist each``, two runs at once): a lock per user.
    Groups were once silently ignored (pytest 9.2 with xdist 3.8, tests/xdist_groups.py), and an
    attack on the other worker then failed one run in two here."""
    from filelock import FileLock

    with FileLock(os.path.join(tempfile.gettempdir(), f"toolbench-sandbox-attacks-{os.getuid()}.lock")):
        yield


def _load_runner():
    spec = importlib.util.spec_from_file_location("hostile_run_corpus", RUNNER)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


corpus = _load_runner()
ALL = corpus.load_corpus(str(HOSTILE))
ATTACKS = [a for a in ALL if a.layers is not None]  # the earlier corpus: test_sandbox_hostile.py
LAYERED = [a for a in ATTACKS if a.layers]


def test_every_attack_file_is_a_tool_with_its_claims() -> None:
    """One attack per file, named by it; its claims name real layers and known host needs."""
    tools = sorted(p.stem for p in HOSTILE.glob("*.py") if p != RUNNER)
    assert tools == sorted(a.name for a in ALL)
    for attack in ALL:
        assert corpus.first_def_name(attack.source) == attack.name, attack.name
    for attack in ATTACKS:
        assert set(attack.layers) <= set(KNOWN_LAYERS), (attack.name, attack.layers)
        assert set(attack.needs) <= set(corpus.KNOWN_NEEDS), (attack.name, attack.needs)
        assert attack.any_kwargs, f"{attack.name} must take **_ (the test offers every argument)"
    assert len(ATTACKS) >= 38


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_attack_is_contained(attack) -> None:
    result = corpus.run_attack(attack)
    assert not result.problems, f"{attack.name}: {result.why()}"
    assert not result.escaped, f"{attack.name} got out: {result.why()}"


@pytest.mark.parametrize("attack", LAYERED, ids=lambda a: a.name)
def test_attack_gets_through_without_its_layers(attack) -> None:
    unmet = corpus.host_needs_unmet(attack)
    if unmet:
        pytest.skip(f"{attack.name} without {', '.join(attack.layers)}: {'; '.join(unmet)}")
    try:
        result = corpus.run_attack(attack, without_layers=True)
    except (SandboxStartError, ValueError) as exc:
        pytest.skip(f"the pool does not start with {', '.join(attack.layers)} off: {exc}")
    assert not result.problems, f"{attack.name}: {result.why()}"
    assert result.escaped, (f"{attack.name} did not get through with {', '.join(result.layers_off)} off, "
                            f"so something else stops it (or it is no attack): {result.why()}")


def test_the_corpus_runs_from_outside_the_repository(tmp_path: Path) -> None:
    """``python .../run_corpus.py NAMES`` from another folder, against the harness this Python
    imports: one line per attack, exit 0 when all were contained."""
    names = ["socketpair_unix", "audit_unhook", "deep_tree"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, str(RUNNER), *names], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    lines = [line for line in proc.stdout.splitlines() if line.split(" ", 1)[0] in names]
    assert [line.split()[0] for line in lines] == sorted(names), proc.stdout + proc.stderr
    assert all(line.split()[1] == "contained" for line in lines), proc.stdout
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not list(tmp_path.iterdir())  # it wrote nothing where it was run
