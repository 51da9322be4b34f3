"""Containment of untrusted tool code: kernel layers, secrets, per-call pristine state, caps,
insecure mode. Each test runs hostile code and checks that it gets an error or nothing useful."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from bubblewrap_usable import needs_bwrap
from pytest_toolbench.config import SandboxLimits
from pytest_toolbench.sandbox import SandboxStartError, ToolSandbox
from pytest_toolbench.sandbox.pool import _PACKAGE_ROOT

import sandbox_env

RUN = "pytest_toolbench.sandbox.jobs:run_source"
SECRET = "sk-SECRET-xyz-isolation"


def run(sb: ToolSandbox, source: str, **kwargs):
    outcome = sb.run(RUN, {"source": source, "entry": "f", "kwargs": kwargs}, 10.0)
    assert outcome.status == "ok", outcome.detail
    return outcome.value


@pytest.fixture(scope="module")
def secret_env():
    """A secret in the harness's environment before any worker starts."""
    old = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = SECRET
    yield SECRET
    if old is None:
        os.environ.pop("OPENAI_API_KEY", None)
    else:
        os.environ["OPENAI_API_KEY"] = old


@pytest.fixture(scope="module")
def sandbox(secret_env):
    with ToolSandbox(SandboxLimits(workers=1, output_cap=1000)) as sb:
        yield sb


def test_kernel_layers_are_in_force(sandbox):
    info = sandbox.describe()
    assert info["kernel_isolation"] is True and info["insecure"] is False
    iso = info["isolation"]
    assert iso["landlock_abi"] >= 1 and iso["seccomp"] is True and iso["missing_layers"] == []
    for key in ("verified_proc_environ_refused", "verified_parent_cmdline_refused",
                "verified_socket_refused", "verified_sysv_ipc_refused", "verified_write_outside_refused"):
        assert iso[key] is True, key
    assert not any(p == "/" or _PACKAGE_ROOT.startswith(p + "/") for p in iso["read_only_paths"])


def hostile_reads() -> dict[str, str]:
    """Reads a tool might try, as expressions; every one must raise."""
    harness = os.getpid()
    cache = Path(_PACKAGE_ROOT) / ".toolbench"
    return {
        "parent environ": f"open('/proc/{harness}/environ', 'rb').read()",
        "zygote environ": "open(f'/proc/{os.getppid()}/environ', 'rb').read()",
        "pid 1 environ": "open('/proc/1/environ', 'rb').read()",
        "parent cmdline": f"open('/proc/{harness}/cmdline', 'rb').read()",
        "own environ file": "open('/proc/self/environ', 'rb').read()",
        "proc listing": "os.listdir('/proc')",
        "project file": f"open({str(Path(_PACKAGE_ROOT) / 'pyproject.toml')!r}).read()",
        "project listing": f"os.listdir({_PACKAGE_ROOT!r})",
        "cache dir": f"os.listdir({str(cache)!r})",
        "home": f"os.listdir({os.path.expanduser('~')!r})",
        "shared": f"os.listdir({str(Path(_PACKAGE_ROOT).parent)!r})",
        "etc": "open('/etc/passwd').read()",
        "tmp": "os.listdir('/tmp')",
    }


# ids are the names only: expressions hold this process's pid, which differs between xdist workers
@pytest.mark.parametrize("what,expr", list(hostile_reads().items()), ids=list(hostile_reads()))
def test_reads_outside_the_sandbox_fail(sandbox, what, expr):
    got = run(sandbox, f"import os\ndef f():\n    return repr({expr})[:200]")
    assert got["error"] and got["type"] in {"PermissionError", "FileNotFoundError"}, (what, got)


def test_environment_holds_no_secret(sandbox, secret_env):
    got = run(sandbox, "import os\ndef f():\n    return dict(os.environ)")["value"]
    assert "OPENAI_API_KEY" not in got and secret_env not in repr(got)
    assert set(got) <= {"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "HOME", "TMPDIR", "PYTHONPATH",
                        "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED", "PYTHONIOENCODING"}


def test_reads_with_the_audit_hook_bypassed_still_fail(sandbox):
    """The audit hook is only a second line: code that escapes it still meets Landlock/seccomp."""
    src = (
        "import sys, os\n"
        "def f():\n"
        "    out = {}\n"
        "    for what, path in [('env', '/proc/1/environ'), ('project', %r)]:\n"
        "        try:\n"
        "            fd = os.open(path, os.O_RDONLY)\n"  # os.open fires 'open' too, but never blocks reads
        "            out[what] = os.read(fd, 100).decode('latin1')\n"
        "        except OSError as exc:\n"
        "            out[what] = type(exc).__name__\n"
        "    return out\n"
    ) % str(Path(_PACKAGE_ROOT) / "pyproject.toml")
    # In the jail those paths do not exist; on the host's tree Landlock refuses them.
    refused = "FileNotFoundError" if sandbox.describe()["isolation"]["filesystem_view"] == "jail" else "PermissionError"
    assert run(sandbox, src)["value"] == {"env": refused, "project": refused}


SYSV_IPC = """
import ctypes, errno, json, sys
from pytest_toolbench.sandbox import syscall_filter
libc = ctypes.CDLL(None, use_errno=True)

def attempt():
    out = {}
    for name, call in [("shmget", lambda: libc.shmget(0, 4096, 0o1600)),
                       ("msgget", lambda: libc.msgget(0, 0o1600)),
                       ("semget", lambda: libc.semget(0, 1, 0o1600))]:
        ctypes.set_errno(0)
        got = call()
        out[name] = errno.errorcode.get(ctypes.get_errno(), "?") if got < 0 else "ok"
        if got >= 0:  # IPC_RMID what was made
            {"shmget": lambda: libc.shmctl(got, 0, None), "msgget": lambda: libc.msgctl(got, 0, None),
             "semget": lambda: libc.semctl(got, 0, 0)}[name]()
    for name, call in [("shmat", lambda: libc.shmat(12345, None, 0)), ("semop", lambda: libc.semop(12345, None, 0)),
                       ("msgsnd", lambda: libc.msgsnd(12345, None, 0, 0))]:
        ctypes.set_errno(0)
        call()
        out[name] = errno.errorcode.get(ctypes.get_errno(), "?")
    return out

before = attempt()
applied, note = syscall_filter.SyscallFilter().apply()
print(json.dumps({"before": before, "after": attempt(), "applied": applied, "note": note}))
"""


def test_seccomp_refuses_sysv_ipc_with_the_audit_hook_bypassed(tmp_path):
    """Tools cannot import ctypes (the audit hook), so this runs the sandbox's own seccomp filter
    in a fresh process with ctypes at hand: SysV IPC works before the filter and gets EPERM
    after it (an id that does not exist gives EINVAL/EIDRM without the filter, EPERM with it)."""
    import json
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", SYSV_IPC], capture_output=True, text=True, timeout=60,
                          cwd=_PACKAGE_ROOT)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["applied"] is True and "shared memory" in got["note"]
    assert got["before"]["shmget"] == got["before"]["msgget"] == got["before"]["semget"] == "ok"
    assert all(v != "EPERM" for v in got["before"].values()), got["before"]
    assert set(got["after"].values()) == {"EPERM"}, got["after"]


def test_tool_code_cannot_reach_sysv_ipc(sandbox):
    """Through the pool as a tool runs: ctypes is refused by the audit hook, and the stdlib has
    no SysV IPC of its own; the probe above shows what the kernel does behind that."""
    got = run(sandbox, "def f():\n    import ctypes\n    return ctypes.CDLL(None).shmget(0, 4096, 0o1600)")
    assert got["error"] and got["type"] == "PermissionError", got


# ---------------------------------------------------------------------------- pristine state

POISON = """
import builtins, decimal, json, threading, time, sys
def f():
    builtins.len = lambda x: 42
    builtins.POISONED = True
    decimal.getcontext().prec = 2
    json.dumps = lambda *a, **k: '"poisoned"'
    sys.modules['pytest_toolbench.sandbox.jobs'].run_source = lambda payload: {'value': 'poisoned'}
    open('left-behind.txt', 'w').write('x')
    t = threading.Thread(target=lambda: time.sleep(60), name='survivor', daemon=False)
    t.start()
    return "done"
"""

CHECK = """
import builtins, decimal, json, threading, os
def f():
    return {
        "len": len("abc"),
        "poisoned": hasattr(builtins, "POISONED"),
        "prec": decimal.getcontext().prec,
        "dumps": json.dumps([1]),
        "threads": sorted(t.name for t in threading.enumerate()),
        "files": os.listdir("."),
    }
"""


def test_a_poisoning_call_leaves_nothing_for_the_next():
    with ToolSandbox(SandboxLimits(workers=1)) as sb:
        first = sb.run(RUN, {"source": POISON, "entry": "f"}, 10.0)
        assert first.status == "ok" and first.value["value"] == "done", first
        got = run(sb, CHECK)  # same zygote: run_source itself was poisoned in the last child only
        assert got["value"] == {"len": 3, "poisoned": False, "prec": 28, "dumps": "[1]",
                                "threads": ["MainThread"], "files": []}
        assert len(sb.worker_pids()) == 1


def test_thread_started_by_a_tool_does_not_survive_its_call():
    # host pids: the call's own PID namespace (or bwrap's) would show it a small number of its own
    with ToolSandbox(SandboxLimits(workers=1), disable_layers=("pid_namespace",), use_bubblewrap=False) as sb:
        pid = run(sb, "import os, threading, time\ndef f():\n"
                      "    threading.Thread(target=time.sleep, args=(60,)).start()\n    return os.getpid()")["value"]
        deadline = time.monotonic() + 5
        while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
            time.sleep(0.01)  # reaped right after the reply was sent
        assert not os.path.exists(f"/proc/{pid}")  # the whole child, threads included, is gone


@pytest.mark.parametrize(
    "body",
    [
        "import sys\n    sys.stdout = None\n    sys.stderr = None\n    return 1",
        "import os\n    os.closerange(0, 1024)\n    return 1",
        "import os\n    os._exit(0)",
        "import sys\n    sys.modules.clear()\n    return 1",
        "import sys\n    sys.setrecursionlimit(10)\n    return 1",
        "import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)",
    ],
)
def test_breaking_the_machinery_is_one_failed_call(body):
    with ToolSandbox(SandboxLimits(workers=1)) as sb:
        run(sb, "def f():\n    return 0")
        zygote = sb.worker_pids()
        out = sb.run(RUN, {"source": f"def f():\n    {body}", "entry": "f"}, 10.0)
        assert out.status in {"ok", "crashed"}, out
        assert run(sb, "def f():\n    return 'fine'")["value"] == "fine"
        assert sb.worker_pids() == zygote  # the zygote survived: no restart


# -------------------------------------------------------------------------------------- caps

def test_result_and_error_text_are_capped(sandbox):
    got = run(sandbox, "def f():\n    return 'x' * 5000")
    assert got["value"] == "x" * 1000 + "…[truncated 4000 chars]"
    got = run(sandbox, "def f():\n    raise ValueError('y' * 3000)")
    assert got["error"] == "y" * 1000 + "…[truncated 2000 chars]"
    # SystemExit escapes run_source: a job error, whose detail is capped too.
    crashed = sandbox.run(RUN, {"source": "raise SystemExit('z' * 5000)", "entry": None}, 5.0)
    assert crashed.status == "crashed" and "…[truncated" in crashed.detail and len(crashed.detail) < 1200


# ----------------------------------------------------------------------------- insecure mode

def test_missing_kernel_layers_refuse_tools():
    with ToolSandbox(SandboxLimits(workers=1), disable_layers=("landlock",)) as sb:
        with pytest.raises(SandboxStartError, match="--sandbox-insecure"):
            sb.run(RUN, {"source": "def f():\n    return 1", "entry": "f"}, 5.0)


@pytest.mark.parametrize("insecure", [False, True])
def test_a_machine_that_is_not_linux_is_refused_before_any_process_starts(monkeypatch, insecure,
                                                                          tmp_path):
    """The zygote is Linux's alone (prctl, unshare, system calls by number): elsewhere a start
    would die on an obscure error, or make an unrelated system call, insecure or not. (Its own
    temporary folder: another xdist worker's sandbox made one in the shared /tmp meanwhile.)"""
    import sys
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    before = set(os.listdir(tempfile.gettempdir()))
    monkeypatch.setattr(sys, "platform", "darwin")
    with ToolSandbox(SandboxLimits(workers=1, insecure=insecure)) as sb:
        with pytest.raises(SandboxStartError, match="refusing to run untrusted tool code on darwin: the tool "
                                                    "sandbox needs Linux") as raised:
            sb.isolation_state()
    assert "run ToolHop in a Linux container or VM" in str(raised.value)
    assert not {n for n in set(os.listdir(tempfile.gettempdir())) - before if n.startswith("toolbench-sandbox-")}
    monkeypatch.undo()


def test_insecure_mode_runs_and_says_so():
    limits = SandboxLimits(workers=1, insecure=True)
    with ToolSandbox(limits, disable_layers=("landlock", "seccomp")) as sb:
        assert run(sb, "def f():\n    return 1")["value"] == 1
        info = sb.describe()
        assert info["insecure"] is True and info["kernel_isolation"] is False
        assert set(info["isolation"]["missing_layers"]) == {"landlock", "seccomp"}
        # The audit hook, the second line, is still there.
        assert run(sb, "def f():\n    open('/etc/x', 'w')")["type"] == "PermissionError"
        # Without Landlock the project's files are still out of the jail's view (where the
        # machine gives a jail)...
        project = str(Path(_PACKAGE_ROOT) / "pyproject.toml")
        if sandbox_env.has("jail"):
            assert run(sb, f"def f():\n    return open({project!r}).read()")["type"] == "FileNotFoundError"
    # (and without bwrap, whose own root holds no project either)
    with ToolSandbox(limits, disable_layers=("landlock", "seccomp", "jail"), use_bubblewrap=False) as sb:
        assert sb.describe()["isolation"]["filesystem_view"] == "host"
        # ...and without the jail too the reads the secure tests refuse succeed: those tests can fail.
        assert "[project]" in run(sb, f"def f():\n    return open({project!r}).read()")["value"]


def test_insecure_flag_is_not_reported_when_layers_hold():
    with ToolSandbox(SandboxLimits(workers=1, insecure=True)) as sb:
        assert sb.describe()["insecure"] is False


@needs_bwrap
def test_bubblewrap_layer_when_present():
    with ToolSandbox(SandboxLimits(workers=1)) as sb:
        info = sb.describe()["isolation"]
        assert info["bubblewrap"] is True and info["missing_layers"] == []
        assert run(sb, "def f():\n    return 1")["value"] == 1


def test_merged_isolation_is_off_when_any_pool_lacked_a_layer():
    """Under xdist each worker has its own pool: one pool without Landlock makes the run's
    reported isolation off, whatever the others had."""
    from pytest_toolbench.sandbox.isolation_report import merge_isolation_states

    with ToolSandbox(SandboxLimits(workers=1)) as secure:
        good = secure.isolation_state()
    with ToolSandbox(SandboxLimits(workers=1, insecure=True), disable_layers=("landlock",)) as weak:
        bad = weak.isolation_state()
    assert good["kernel_isolation"] is True and bad["kernel_isolation"] is False
    merged = merge_isolation_states([good, bad])
    assert merged["kernel_isolation"] is False and merged["insecure"] is True
    assert merged["missing_layers"] == ["landlock"] and merged["pools"] == 2
    assert merged["missing_notes"] == {"landlock": "disabled by caller"}
    assert merge_isolation_states([good, good])["kernel_isolation"] is True
    assert merge_isolation_states([]) is None


def test_a_layer_listed_missing_is_never_reported_on():
    """Issue 23: a worker whose seccomp filter loaded but whose probe was not refused reported
    ``seccomp: true`` beside ``missing_layers: [seccomp]``; per pool and merged over xdist
    workers' pools, a missing layer's flag is false."""
    from pytest_toolbench.sandbox.isolation_report import isolation_state, merge_isolation_states

    described = {"kernel_isolation": False, "insecure": True, "isolation": {
        "landlock_abi": 3, "seccomp": True, "missing_layers": ["landlock", "seccomp"],
        "bubblewrap": False, "network_namespace": True}}
    state = isolation_state(described)
    assert state["missing_layers"] == ["landlock", "seccomp"]
    assert state["seccomp"] is False and state["landlock"] is False
    held = isolation_state({"kernel_isolation": True, "insecure": False, "isolation": {
        "landlock_abi": 3, "seccomp": True, "missing_layers": []}})
    assert held["seccomp"] is True and held["landlock"] is True
    weak = {**held, "missing_layers": ["seccomp"]}  # a pool's state as an older worker sent it
    merged = merge_isolation_states([held, weak])
    assert merged["missing_layers"] == ["seccomp"] and merged["seccomp"] is False
    assert merged["landlock"] is True


def test_pool_without_seccomp_reports_it_off_everywhere():
    with ToolSandbox(SandboxLimits(workers=1, insecure=True), disable_layers=("seccomp",)) as sb:
        info = sb.describe()["isolation"]
        state = sb.isolation_state()
    assert "seccomp" in info["missing_layers"] and info["seccomp"] is False
    for layer in ("landlock", "seccomp"):
        assert state[layer] is (layer not in state["missing_layers"]), state


REFUSED_START = """
from pytest_toolbench.config import SandboxLimits
from pytest_toolbench.sandbox import SandboxStartError, ToolSandbox
with ToolSandbox(SandboxLimits(workers=1)) as sb:
    try:
        sb.isolation_state()
    except SandboxStartError as exc:
        print(exc)
"""


@pytest.mark.parametrize(("err", "why", "helps"), [
    ("EPERM", "landlock_create_ruleset was refused (EPERM): a seccomp profile forbids it",
     "allow landlock_create_ruleset, landlock_add_rule and landlock_restrict_self in the container's seccomp"),
    ("ENOSYS", "this kernel has no Landlock", "Landlock needs Linux 5.13 or later built with CONFIG_SECURITY_LANDLOCK"),
    ("EOPNOTSUPP", "Landlock is built into this kernel but not enabled", "add 'landlock' to the active LSMs"),
])
def test_a_refusal_for_want_of_landlock_names_the_cause_and_its_remedy(err, why, helps):
    """Each cause of a failed version query has its own remedy: a container whose seccomp
    profile refuses Landlock's calls was sent to look at its kernel."""
    import subprocess
    import sys

    tests = Path(__file__).parent
    proc = subprocess.run([sys.executable, str(tests / "refuse_landlock.py"), err, sys.executable, "-c", REFUSED_START],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip()
    assert f"landlock: {why}" in line and f"What helps: {helps}" in line, line
    assert "--sandbox-insecure" in line
