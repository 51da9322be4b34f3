"""The cgroup v2 side of ``sandbox/cgroup.py`` over a stand-in for the kernel's file system.

This machine mounts cgroup v1 only (and a v2 hierarchy mounted beside it would get no memory
controller: v1 holds it), so the real-kernel tests in test_sandbox_privilege and
test_sandbox_bubblewrap exercise the v1 branch here, while most users (Ubuntu 22.04 and later,
GitHub's runners, a container on any recent host) meet the v2 one. ``FakeCgroup2`` keeps the
rules of cgroup v2 that the code meets: a new cgroup gets the interface files of the controllers
its parent hands on (``cgroup.subtree_control``), a missing interface file cannot be written, a
cgroup other than the real root cannot both hold processes and hand controllers on ("no
internal processes"), a process lives in one cgroup at a time, and ``rmdir`` refuses a
populated cgroup. The real-kernel v2 tests run where a v2 memory controller exists.
"""

from __future__ import annotations

import errno
import os
import types
from pathlib import Path

import pytest

from pytest_toolbench.sandbox import cgroup

MB = 1 << 20
MEMORY_EVENTS = "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"


class FakeCgroup2:
    """A cgroup2 mount at ``root``: plain folders and files, and the rules above on the calls
    ``cgroup.py`` makes (``os.mkdir``/``makedirs``/``rmdir`` and ``_write``)."""

    def __init__(self, root: Path, *, real_root: bool = True,
                 controllers: tuple[str, ...] = ("cpu", "io", "memory", "pids")) -> None:
        self.root, self.real_root = root, real_root
        root.mkdir()
        self._interface(root, list(controllers))

    # -- the kernel's side -------------------------------------------------------------------
    def _interface(self, path: Path, available: list[str]) -> None:
        (path / "cgroup.controllers").write_text(" ".join(available))
        (path / "cgroup.subtree_control").write_text("")
        (path / "cgroup.procs").write_text("")
        if path != self.root:  # the root has no limits of its own
            self._controller_files(path, available)

    @staticmethod
    def _controller_files(path: Path, controllers: list[str]) -> None:
        if "memory" in controllers:
            for name, text in (("memory.max", "max"), ("memory.swap.max", "max"),
                               ("memory.events", MEMORY_EVENTS)):
                if not (path / name).exists():
                    (path / name).write_text(text)
        if "pids" in controllers and not (path / "pids.max").exists():
            (path / "pids.max").write_text("max")

    def procs(self, path: Path) -> list[int]:
        return [int(p) for p in (path / "cgroup.procs").read_text().split()]

    def _holds_processes_rule(self, path: Path) -> bool:
        return path != self.root or not self.real_root

    def mkdir(self, path: str | os.PathLike, mode: int = 0o777) -> None:
        os.mkdir(path, mode)
        p = Path(path)
        self._interface(p, (p.parent / "cgroup.subtree_control").read_text().split())

    def makedirs(self, path: str | os.PathLike, mode: int = 0o777, exist_ok: bool = False) -> None:
        if Path(path).is_dir() and exist_ok:
            return
        self.mkdir(path, mode)

    def rmdir(self, path: str | os.PathLike) -> None:
        p = Path(path)
        if not p.is_dir():
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(p))
        if self.procs(p) or any(c.is_dir() for c in p.iterdir()):
            raise OSError(errno.EBUSY, "Device or resource busy", str(p))
        for f in p.iterdir():
            f.unlink()
        os.rmdir(p)

    def write(self, path: str, text: str) -> None:
        p = Path(path)
        if not p.exists():  # kernfs creates no file
            raise PermissionError(errno.EACCES, "Permission denied", path)
        folder = p.parent
        if p.name == "cgroup.subtree_control":
            enabled = (folder / "cgroup.subtree_control").read_text().split()
            available = (folder / "cgroup.controllers").read_text().split()
            for word in text.split():
                name = word[1:]
                if name not in available:
                    raise OSError(errno.ENOENT, "No such file or directory", path)
                if word[0] == "+" and name not in enabled:
                    if self.procs(folder) and self._holds_processes_rule(folder):
                        raise OSError(errno.EBUSY, "Device or resource busy", path)
                    enabled.append(name)
            (folder / "cgroup.subtree_control").write_text(" ".join(enabled))
            for child in (c for c in folder.iterdir() if c.is_dir()):
                (child / "cgroup.controllers").write_text(" ".join(enabled))
                self._controller_files(child, enabled)
        elif p.name == "cgroup.procs":
            pid = int(text) or os.getpid()
            if (folder / "cgroup.subtree_control").read_text().split() and self._holds_processes_rule(folder):
                raise OSError(errno.EBUSY, "Device or resource busy", path)
            for procs in self.root.rglob("cgroup.procs"):
                kept = [q for q in self.procs(procs.parent) if q != pid]
                procs.write_text("\n".join(map(str, kept)))
            (folder / "cgroup.procs").write_text("\n".join(map(str, [*self.procs(folder), pid])))
        else:
            p.write_text(text)

    # -- set-up helpers -----------------------------------------------------------------------
    def group(self, rel: str) -> Path:
        path = self.root
        for part in Path(rel).parts:  # each missing level, as mkdir -p
            path /= part
            if not path.exists():
                self.mkdir(path)
        return path


@pytest.fixture
def v2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Point ``cgroup.py`` at a ``FakeCgroup2`` as this process's only cgroup mount; call the
    returned function with ``real_root``/``controllers`` and this process's cgroup."""

    def make(*, real_root: bool = True, own: str = "/", controllers=("cpu", "io", "memory", "pids")):
        fs = FakeCgroup2(tmp_path / "cgroup", real_root=real_root, controllers=controllers)
        fake_os = types.ModuleType("os")
        fake_os.__dict__.update(os.__dict__)
        fake_os.mkdir, fake_os.makedirs, fake_os.rmdir = fs.mkdir, fs.makedirs, fs.rmdir
        monkeypatch.setattr(cgroup, "os", fake_os)
        monkeypatch.setattr(cgroup, "_write", fs.write)
        monkeypatch.setattr(cgroup, "_mounts", lambda: [(str(fs.root), "cgroup2", "rw,nsdelegate")])
        monkeypatch.setattr(cgroup, "_own_cgroups", lambda: {"": own})
        if own != "/":
            fs.group(own.strip("/"))
        fs.write(str(fs.root / own.strip("/") / "cgroup.procs"), str(os.getpid()))
        return fs

    return make


def read(path: Path | str) -> str:
    return Path(path).read_text()


def test_root_on_a_host_gets_a_limited_cgroup_under_its_own_folder(v2) -> None:
    fs = v2()
    group, note = cgroup.create("123-456", 300 * MB)
    assert group is not None, note
    assert note == "" and group.version == 2
    assert group.path == str(fs.root / "toolbench-sandbox" / "123-456")
    assert read(Path(group.path) / "memory.max") == str(300 * MB)
    assert read(Path(group.path) / "memory.swap.max") == "0"  # no swap: the limit is the memory
    assert read(Path(group.path) / "pids.max") == str(cgroup.PIDS_MAX)
    assert read(fs.root / "cgroup.subtree_control").split() == ["memory", "pids"]
    assert read(fs.root / "toolbench-sandbox" / "cgroup.subtree_control").split() == ["memory", "pids"]

    cgroup.enter(group)  # the zygote moves in; its calls are born there
    assert fs.procs(Path(group.path)) == [os.getpid()] and fs.procs(fs.root) == []
    group.remove()  # back home, then the cgroup goes
    assert fs.procs(fs.root) == [os.getpid()]
    assert not os.path.exists(group.path)


def test_controllers_already_handed_on_are_not_written_again(v2, monkeypatch: pytest.MonkeyPatch) -> None:
    fs = v2()
    written: list[str] = []
    kernel_write = cgroup._write

    def noting(path: str, text: str) -> None:
        written.append(os.path.relpath(path, fs.root))
        kernel_write(path, text)

    monkeypatch.setattr(cgroup, "_write", noting)
    assert cgroup.create("1-2", 100 * MB)[0] is not None
    assert cgroup.create("3-4", 100 * MB)[0] is not None
    handed_on = [w for w in written if w.endswith("cgroup.subtree_control")]
    assert handed_on == ["cgroup.subtree_control", "toolbench-sandbox/cgroup.subtree_control"]


def test_a_container_whose_cgroup_root_holds_processes_says_why_and_what_helps(v2) -> None:
    """In a container the mount's root is the container's cgroup, not the machine's: holding
    the container's processes, it cannot hand the memory controller on."""
    fs = v2(real_root=False)
    group, note = cgroup.create("123-456", 300 * MB)
    assert group is None
    assert f"cgroup2 at {fs.root}: {fs.root} holds processes" in note, note
    assert cgroup.ENV_VAR in note
    assert not (fs.root / "toolbench-sandbox").exists()


def test_an_empty_delegated_cgroup_gets_the_memory_controller_handed_on(v2) -> None:
    """A delegated cgroup as systemd or a user makes it: the controllers available, nothing in
    its ``cgroup.subtree_control``. Before, every child came without ``memory.max`` and the
    zygote fell back to the address-space limit."""
    fs = v2(own="/user/shell")
    fs.write(str(fs.root / "cgroup.subtree_control"), "+memory +pids")
    fs.write(str(fs.root / "user" / "cgroup.subtree_control"), "+memory +pids")
    delegated = fs.group("user/sandbox")
    group, note = cgroup.create("123-456", 300 * MB, str(delegated))
    assert group is not None, note
    assert group.path == str(delegated / "123-456")
    assert read(Path(group.path) / "memory.max") == str(300 * MB)
    assert read(delegated / "cgroup.subtree_control").split() == ["memory", "pids"]
    assert group.home_procs == str(fs.root / "user" / "shell" / "cgroup.procs")
    assert not (fs.root / "toolbench-sandbox").exists()  # nothing made outside the delegation
    cgroup.enter(group)
    group.remove()
    assert fs.procs(fs.root / "user" / "shell") == [os.getpid()] and not os.path.exists(group.path)


def test_a_delegated_cgroup_the_shell_lives_in_says_why(v2) -> None:
    fs = v2(own="/user")
    fs.write(str(fs.root / "cgroup.subtree_control"), "+memory +pids")
    delegated = fs.root / "user"
    group, note = cgroup.create("123-456", 300 * MB, str(delegated))
    assert group is None
    assert f"{delegated} holds processes, so it cannot hand the memory controller" in note, note
    assert [p for p in delegated.iterdir() if p.is_dir()] == []


def test_a_delegation_without_the_memory_controller_says_so(v2) -> None:
    fs = v2(own="/user/shell")
    fs.write(str(fs.root / "cgroup.subtree_control"), "+pids")
    delegated = fs.group("sandbox")
    group, note = cgroup.create("123-456", 300 * MB, str(delegated))
    assert group is None
    assert f"the memory controller is not available in {delegated} (its cgroup.controllers: pids)" in note


def test_a_hierarchy_without_a_memory_controller_says_so(v2) -> None:
    fs = v2(controllers=("cpu", "pids"))
    group, note = cgroup.create("123-456", 300 * MB)
    assert group is None
    assert f"the memory controller is not available in {fs.root}" in note, note


def test_the_pool_places_a_zygote_it_cannot_reach_and_sweeps_what_dead_ones_left(v2) -> None:
    """``place`` (the pool's side, for a zygote under bwrap): the cgroup is named after the
    zygote's host pid and start time, holds it, and has no way home (the pool removes it);
    dead zygotes' cgroups go first, live ones and other folders stay."""
    fs = v2()
    fs.write(str(fs.root / "cgroup.subtree_control"), "+memory +pids")
    base = fs.root / "toolbench-sandbox"
    fs.mkdir(base)
    fs.write(str(base / "cgroup.subtree_control"), "+memory +pids")
    dead = fs.group("toolbench-sandbox/999999999-12345")
    other = fs.group("toolbench-sandbox/not-a-zygote")
    zygote = os.getpid()  # a live process with a start time, as the zygote is
    group, note = cgroup.place(zygote, 200 * MB)
    assert group is not None, note
    assert os.path.basename(group.path) == cgroup.zygote_name(zygote)
    assert fs.procs(Path(group.path)) == [zygote]
    assert group.home_procs == "" and group.version == 2
    assert not dead.exists() and other.exists()

    cgroup.sweep()  # its owner lives: kept
    assert os.path.exists(group.path)
    cgroup.remove_killed(group.path, zygote + 1, wait_s=0)  # not that zygote's: kept
    assert os.path.exists(group.path)
    fs.write(str(fs.root / "cgroup.procs"), str(zygote))  # the kernel empties a killed one's
    cgroup.remove_killed(group.path, zygote, wait_s=0)
    assert not os.path.exists(group.path)


def test_a_cgroup_names_how_many_calls_the_kernel_killed_for_memory(v2) -> None:
    v2()
    group, _ = cgroup.create("123-456", 300 * MB)
    assert group is not None and group.oom_kills() == 0
    Path(group.path, "memory.events").write_text(MEMORY_EVENTS.replace("oom_kill 0", "oom_kill 3"))
    assert group.oom_kills() == 3
