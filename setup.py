"""The one build step pyproject.toml cannot declare: the wheel carries the bundled samples.

``data/`` (the samples ``--data sample`` reads, and Meta-Bench's reconstruction, which every
Meta-Bench run reads) sits at the repository root, beside the package. A wheel built from the
package alone left it out, so ``pip install .`` (not ``-e``) broke Meta-Bench, ``--data sample``
outside a checkout and ``toolbench list``. The wheel now holds it as
``pytest_toolbench/bundled_data``, where ``benchmarks/data_source.py`` looks first. An editable
install reads ``data/`` in place, so nothing is copied for it.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithBundledData(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib) / "pytest_toolbench" / "bundled_data"
        shutil.rmtree(target, ignore_errors=True)  # a samples file removed since the last build
        shutil.copytree(Path("data"), target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildWithBundledData})
