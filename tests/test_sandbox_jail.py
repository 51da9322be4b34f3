"""The file-system jail: a tool sees only the paths it may read.

Landlock refuses to open what a tool may not read, but it does not govern ``stat``, ``readlink``,
``access`` or ``exists``, and seccomp cannot filter by path: without the jail a tool could map
the machine (which keys are in the home folder, what the project holds, where links point). In
the jail those paths do not exist. Calls go through the real sandbox and the ToolHop job.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path

import pytest

from pytest_toolbench.config import SandboxLimits
from pytest_toolbench.sandbox import ToolSandbox
from pytest_toolbench.sandbox.pool import _PACKAGE_ROOT

import sandbox_env

JOB = "pytest_toolbench.benchmarks.toolhop.execution:call_tool"
RUN = "pytest_toolbench.sandbox.jobs:run_source"
PRELOAD = ("pytest_toolbench.benchmarks.toolhop.execution",)
LIMITS = dict(workers=1, cpu_seconds=10, output_cap=20000)
PROBE = (Path(__file__).parent / "hostile_tools" / "path_probe.py").read_text(encoding="utf-8")


def tool(sb: ToolSandbox, src: str, name: str, **kwargs: object) -> object:
    out = sb.run(JOB, {"functions": [src], "name": name, "arguments": json.dumps(kwargs)}, 20.0)
    assert out.status == "ok" and not out.value["raised"], out
    return json.loads(out.value["content"])


def run(sb: ToolSandbox, source: str) -> dict:
    out = sb.run(RUN, {"source": source, "entry": "f"}, 20.0)
    assert out.status == "ok", out
    return out.value


@pytest.fixture(scope="module")
def sb():
    with ToolSandbox(SandboxLimits(**LIMITS), preload=PRELOAD) as box:
        box.describe()  # starts the zygote
        yield box


@pytest.fixture
def jail() -> None:
    """The jail needs a mount namespace: root, or an ordinary user with user namespaces."""
    sandbox_env.require("jail")


def folder_of(sb: ToolSandbox) -> str:
    return next(iter(sb._live)).tmpdir


def home_entries() -> list[str]:
    """A few entries of the home folder that hold nothing a tool may read."""
    home = os.path.realpath(os.path.expanduser("~"))
    prefix = os.path.realpath(sys.base_prefix)
    try:
        names = sorted(os.listdir(home))
    except OSError:
        return []
    out = [os.path.join(home, n) for n in names]
    return [p for p in out if not (prefix == p or prefix.startswith(p + os.sep))][:5]


def test_a_tool_cannot_see_what_it_may_not_read(jail: None, sb: ToolSandbox, tmp_path: Path) -> None:
    """stat/readlink/exists/listdir of host paths, a secret's size, a link's target: nothing."""
    secret = tmp_path / "id_rsa"
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (tmp_path / "link").symlink_to("/etc/passwd")
    folder = folder_of(sb)
    paths = [str(secret), str(tmp_path / "link"), str(tmp_path), "/etc/passwd", "/etc/hostname",
             str(Path(_PACKAGE_ROOT) / "pyproject.toml"), str(Path(_PACKAGE_ROOT) / ".git"),
             os.path.join(folder, ".worker-stderr"), os.path.join(folder, ".owner.lock"),
             "/proc/self", "/proc/1/environ", *home_entries()]
    assert all(os.path.lexists(p) for p in paths[:6]), "the host has them"
    got = tool(sb, PROBE, "path_probe", paths=paths)
    assert got == {"visible": [], "links": {}}, got


def test_the_whole_hostile_probe_sees_only_the_jail(jail: None, sb: ToolSandbox) -> None:
    """The corpus tool's own list: anything it sees is an ancestor of, or lies in, a path the
    jail binds (read-only) for every call."""
    binds = sb.describe()["isolation"]["jail_binds"]
    got = tool(sb, PROBE, "path_probe")
    inside = [p for p in got["visible"]
              if not any(p == b or b.startswith(p.rstrip("/") + "/") or p.startswith(b + "/") for b in binds)]
    assert inside == [], got


def test_listing_the_root_shows_only_the_skeleton(jail: None) -> None:
    """Without Landlock (insecure), listing works: the jail holds only what is bound."""
    limits = SandboxLimits(**{**LIMITS, "insecure": True})
    with ToolSandbox(limits, preload=PRELOAD, disable_layers=("landlock", "seccomp")) as box:
        got = run(box, "import os\ndef f():\n    return sorted(os.listdir('/'))")["value"]
        binds = box.describe()["isolation"]["jail_binds"]
    tops = {b.split("/")[1] for b in binds} | {"lib", "lib64", "etc", "tmp"}
    assert set(got) <= tops and "proc" not in got, got
    # An ordinary user's Python may live in its home; then the jail shows that path, no more.
    assert "home" not in got or any(b.startswith("/home/") for b in binds), got


def test_stdlib_modules_imported_after_confinement_still_work(sb: ToolSandbox) -> None:
    """Modules the zygote never imported load from the jail's read-only binds (extension
    modules and the libraries they need included), and time zones and randomness work."""
    src = '''def stdlib_tour():
    import decimal, fractions, statistics, math, json, csv, io, sqlite3, zoneinfo, datetime
    import hashlib, uuid, random, os, time, unicodedata, textwrap, difflib, bisect, heapq
    con = sqlite3.connect(":memory:")
    con.execute("create table t (x)")
    con.execute("insert into t values (2)")
    rows = con.execute("select x * 21 from t").fetchall()
    rows = [list(r) for r in rows]
    tokyo = datetime.datetime(2024, 1, 1, tzinfo=zoneinfo.ZoneInfo("Asia/Tokyo")).utcoffset()
    out = io.StringIO()
    csv.writer(out).writerow([1, "a"])
    return {
        "decimal": str(decimal.Decimal(1) / decimal.Decimal(7))[:6],
        "fraction": str(fractions.Fraction(3, 6)), "mean": statistics.mean([1, 2, 3]),
        "sqrt": math.sqrt(16), "sqlite": rows, "tokyo": tokyo.total_seconds(),
        "csv": out.getvalue().strip(), "sha": hashlib.sha256(b"x").hexdigest()[:8],
        "uuid": len(str(uuid.uuid4())), "random": len(os.urandom(8)),
        "local": time.localtime().tm_year > 2000, "name": unicodedata.name("a"),
    }
'''
    got = tool(sb, src, "stdlib_tour")
    assert got == {"decimal": "0.1428", "fraction": "1/2", "mean": 2, "sqrt": 4.0, "sqlite": [[42]],
                   "tokyo": 32400.0, "csv": "1,a", "sha": "2d711642", "uuid": 36, "random": 8,
                   "local": True, "name": "LATIN SMALL LETTER A"}, got


def test_the_report_and_the_probe_say_jail(jail: None, sb: ToolSandbox) -> None:
    iso = sb.describe()["isolation"]
    assert iso["filesystem_view"] == "jail" and iso["verified_host_paths_hidden"] is True, iso
    assert "chroot" in iso["filesystem_view_note"]
    assert set(iso["jail_binds"]) <= set(iso["read_only_paths"]) | {os.devnull}
    assert sb.isolation_state()["filesystem_view"] == "jail"
    # the call's directory keeps its path, and Landlock still holds in the jail
    got = run(sb, "import os\ndef f():\n    open('x', 'w').write('y')\n    return os.getcwd()")["value"]
    assert got.startswith(folder_of(sb) + "/call-")
    refused = run(sb, "def f():\n    open('/usr/lib/os-release-probe', 'w')")
    assert refused["type"] == "PermissionError", refused


def test_the_jail_binds_are_read_only_even_without_landlock(jail: None) -> None:
    """Every other layer off (as if all were bypassed): the bound installation cannot be written."""
    target = Path(_PACKAGE_ROOT) / "pytest_toolbench" / "jail-write-probe"
    limits = SandboxLimits(**{**LIMITS, "insecure": True})
    try:
        with ToolSandbox(limits, preload=PRELOAD,
                         disable_layers=("landlock", "seccomp", "audit_hook")) as box:
            got = run(box, "def f():\n    try:\n        open(%r, 'w')\n        return 'written'\n"
                           "    except OSError as exc:\n        return exc.errno" % str(target))["value"]
    finally:
        target.unlink(missing_ok=True)
    assert got == errno.EROFS


@pytest.mark.parametrize("layer, why", [("jail", "disabled by caller"), ("tmpfs", "mount namespace")])
def test_without_a_jail_the_host_view_is_reported(layer: str, why: str) -> None:
    """Where no jail can be built the calls still run (Landlock still refuses the contents),
    and describe()/the run's report say the tools saw the host's paths. (Without bwrap: its own
    small root, where installed, holds no /etc/passwd either.)"""
    with ToolSandbox(SandboxLimits(**LIMITS), preload=PRELOAD, disable_layers=(layer,), use_bubblewrap=False) as box:
        iso = box.describe()["isolation"]
        assert iso["filesystem_view"] == "host" and why in iso["filesystem_view_note"], iso
        assert iso["verified_host_paths_hidden"] is False and iso["missing_layers"] == []
        assert box.isolation_state()["filesystem_view"] == "host"
        got = tool(box, PROBE, "path_probe", paths=["/etc/passwd"])
        assert got["visible"] == ["/etc/passwd"]  # what the jail hides
    from pytest_toolbench.sandbox.isolation_report import merge_isolation_states

    jail = {"kernel_isolation": True, "insecure": False, "missing_layers": [], "landlock_abi": 3,
            "seccomp": True, "bubblewrap": False, "network_namespace": True, "filesystem_view": "jail"}
    assert merge_isolation_states([jail, jail])["filesystem_view"] == "jail"
    assert merge_isolation_states([jail, {**jail, "filesystem_view": "host"}])["filesystem_view"] == "host"


STAMP = """def jail_stamp(mtime=0):
    import os
    out = {}
    for path in ("/", os.path.dirname(os.getcwd())):
        try:
            os.utime(path, (mtime, mtime))
            os.chmod(path, 0o700)
            out[path] = "changed"
        except OSError as exc:
            out[path] = exc.strerror
    return out
"""
LOOK = """def jail_look():
    import os
    return {p: [os.stat(p).st_mode & 0o7777, int(os.stat(p).st_mtime)]
            for p in ("/", os.path.dirname(os.getcwd()))}
"""


def test_a_call_cannot_change_the_jails_own_directories(jail: None) -> None:
    """Landlock does not govern chmod or utime: on a writable jail a call set the mode and time
    of ``/`` and of its folder's parent, and the next call read them (a channel from call to
    call; ``chmod('/', 0)`` made every later call of the zygote crash). The jail is read-only
    to the calls: each answers EROFS, and the next call finds the jail as it was. (The audit
    hook, a second line a tool can unhook, is off: the kernel layers answer.)"""
    with ToolSandbox(SandboxLimits(**LIMITS), preload=PRELOAD, disable_layers=("audit_hook",)) as sb:
        _jail_stays_as_it_was(sb)


def _jail_stays_as_it_was(sb: ToolSandbox) -> None:
    before = tool(sb, LOOK, "jail_look")
    got = tool(sb, STAMP, "jail_stamp", mtime=1234567)
    assert set(got.values()) == {os.strerror(errno.EROFS)}, got
    after = tool(sb, LOOK, "jail_look")
    # (the zygote's own mkdir of the next call's folder may move its parent's time: not its mode)
    assert {p: mode for p, (mode, _) in after.items()} == {p: mode for p, (mode, _) in before.items()}
    assert 1234567 not in [mtime for _, mtime in after.values()], after
    assert sb.describe()["isolation"]["verified_jail_read_only"] is True
    # and the calls' own folders still come and go beneath it
    wrote = run(sb, "def f():\n    open('x', 'w').write('y')\n    return open('x').read()")
    assert wrote["value"] == "y", wrote
    locked = tool(sb, STAMP.replace("0o700", "0"), "jail_stamp")
    assert set(locked.values()) == {os.strerror(errno.EROFS)}, locked
    assert tool(sb, LOOK, "jail_look")  # the next call still runs


CHMOD = """def chmod_host(path=''):
    import os
    out = {}
    for what, change in (("chmod", lambda: os.chmod(path, 0o777)),
                         ("utime", lambda: os.utime(path, (0, 0)))):
        try:
            change()
            out[what] = "changed"
        except OSError as exc:
            out[what] = exc.strerror
    return out
"""


@pytest.mark.parametrize("layer", ["jail", "tmpfs"])
def test_without_a_jail_a_call_cannot_change_modes_or_times_of_host_files(layer: str, tmp_path: Path) -> None:
    """Landlock does not govern chmod or utime. On the host's tree (no jail: an ordinary user
    without user namespaces) a call could make any file of the harness's uid world-readable
    or writable (``~/.ssh/id_rsa``, the project, its .venv) and stamp their times; without a
    jail the syscall filter refuses both."""
    secret = tmp_path / "id_rsa"
    secret.write_text("key")
    secret.chmod(0o600)
    os.utime(secret, (1_000_000, 1_000_000))
    with ToolSandbox(SandboxLimits(**LIMITS), preload=PRELOAD, disable_layers=(layer, "audit_hook")) as box:
        assert box.describe()["isolation"]["filesystem_view"] == "host"
        got = tool(box, CHMOD, "chmod_host", path=str(secret))
    assert got == {"chmod": os.strerror(errno.EPERM), "utime": os.strerror(errno.EPERM)}, got
    assert secret.stat().st_mode & 0o777 == 0o600 and int(secret.stat().st_mtime) == 1_000_000
