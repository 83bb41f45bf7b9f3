"""The library as another project gets it: built into an sdist and a wheel (once per session, by the build backend
pyproject.toml names), the wheel installed with --no-deps into a folder of its own, and used from
``examples/consumer``, a Pulumi project with its own ``components/`` package, with this repository NOT on the import
path: its pytest tests (with ``aks_gpu.testing.AksGpuMocks``) pass, and mypy reads the wheel's types."""

from __future__ import annotations

import email.parser
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from aks_gpu import __version__
from tests.conftest import PROJECT_DIR

PYPROJECT = tomllib.loads((PROJECT_DIR / "pyproject.toml").read_text(encoding="utf-8"))
CONSUMER = PROJECT_DIR / "examples" / "consumer"
_BUILD = """
import sys
from setuptools import build_meta
out = sys.argv[1]  # read first: the backend rewrites sys.argv as it runs
sdist = build_meta.build_sdist(out)
wheel = build_meta.build_wheel(out)
print("built", sdist, wheel)  # the backend logs to stdout too: this is the last line
"""
_PROBE = """
import json, sys
import aks_gpu, components
print(json.dumps({"aks_gpu": aks_gpu.__file__, "components": components.__file__, "path": sys.path}))
"""


@dataclass(frozen=True)
class Built:
    sdist: Path
    wheel: Path
    site: Path
    """The folder the wheel was installed into (pip install --target), the only place aks_gpu can come from."""
    scratch: Path


def build_command() -> list[str]:
    """The command that builds with the backend pyproject.toml requires (the output folder follows): requirements.txt
    pins it, so the project's environment has it and nothing is fetched while the tests run."""
    [requirement] = [Requirement(text) for text in PYPROJECT["build-system"]["requires"]]
    installed = importlib.metadata.version("setuptools")
    assert requirement.specifier.contains(installed), f"setuptools {installed} does not meet {requirement}: run `make test`"
    return [sys.executable, "-c", _BUILD]


@pytest.fixture(scope="module")
def built() -> Iterator[Built]:
    # A folder of its own rather than pytest's numbered ones, which a concurrent pytest session may prune.
    with tempfile.TemporaryDirectory(prefix="aks-gpu-wheel-") as folder:
        yield build(Path(folder))


def build(scratch: Path) -> Built:
    source = scratch / "source"
    # What the build reads: the project file, the files it names and the package folder (no caches, no venvs).
    source.mkdir()
    for name in ("pyproject.toml", PYPROJECT["project"]["readme"], *PYPROJECT["project"]["license-files"]):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(PROJECT_DIR / name, source / name)
    shutil.copytree(
        PROJECT_DIR / "components", source / "components", ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".venv")
    )
    dist = scratch / "dist"
    done = subprocess.run([*build_command(), str(dist)], cwd=source, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    _, sdist_name, wheel_name = done.stdout.strip().splitlines()[-1].split()
    site = scratch / "site"
    install = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", "--no-compile"]
    done = subprocess.run([*install, "--target", str(site), str(dist / wheel_name)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return Built(dist / sdist_name, dist / wheel_name, site, scratch)


def consumer_env(built: Built) -> dict[str, str]:
    """The environment a consumer's commands run in: the wheel's folder on the path and nothing of the repository's;
    the Azure CLI login GpuCluster reads to guess the deployer's principal type is an empty folder."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    azure = built.scratch / "azure-cli"
    azure.mkdir(exist_ok=True)
    return env | {"PYTHONPATH": str(built.site), "AZURE_CONFIG_DIR": str(azure), "PYTHONDONTWRITEBYTECODE": "1"}


def consumer_copy(built: Built, name: str) -> Path:
    target = built.scratch / name
    shutil.copytree(CONSUMER, target, ignore=shutil.ignore_patterns("__pycache__", ".venv", ".pytest_cache", ".mypy_cache"))
    return target


def test_the_wheel_installs_aks_gpu_typed_and_licensed_and_no_top_level_components(built: Built) -> None:
    with zipfile.ZipFile(built.wheel) as wheel:
        names = wheel.namelist()
        [license_name] = [n for n in names if n.endswith("/licenses/LICENSE")]
        license_text = wheel.read(license_name).decode()
    assert {name.split("/")[0] for name in names} == {"aks_gpu", f"aks_gpu-{__version__}.dist-info"}
    assert {"aks_gpu/py.typed", "aks_gpu/testing.py", "aks_gpu/__init__.py", "aks_gpu/schema.json"} <= set(names)
    assert license_text == (PROJECT_DIR / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text


def test_the_installed_aksgpu_schema_prints_the_stack_file_schema(built: Built) -> None:
    # `aksgpu schema` prints the copy the wheel ships (package data), not one it builds: it must be in the wheel.
    done = subprocess.run(
        [sys.executable, "-m", "aks_gpu.cli", "schema"],
        cwd=built.scratch,
        env=consumer_env(built),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (PROJECT_DIR / "stacks" / "stack-config.schema.json").read_text(encoding="utf-8")


def test_the_sdist_carries_the_license_and_the_description(built: Built) -> None:
    with tarfile.open(built.sdist) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    package = ("components/aks_gpu/py.typed", "components/aks_gpu/testing.py")
    assert {"LICENSE", "pyproject.toml", "docs/package.md", *package} <= names


def test_the_metadata_tells_an_installer_what_it_is_and_where_to_read_more(built: Built) -> None:
    with zipfile.ZipFile(built.wheel) as wheel:
        metadata = email.parser.Parser().parsestr(wheel.read(f"aks_gpu-{__version__}.dist-info/METADATA").decode())
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert {"pulumi", "aks", "gpu"} <= set(metadata["Keywords"].split(","))
    urls = dict(value.split(", ", 1) for value in metadata.get_all("Project-URL") or [])
    assert set(urls) >= {"Homepage", "Documentation", "Changelog", "Issues"}
    assert all(url.startswith(urls["Homepage"]) for url in urls.values()), urls
    description = metadata.get_payload()
    # Written for someone running pip: how to install and use it, not how to develop it.
    assert "pip install" in description and "from aks_gpu import" in description
    assert "make test" not in description and "make plan" not in description
    # A description is read on the package index, where a link relative to the repository leads nowhere.
    assert "](docs/" not in description and "](../" not in description


def test_the_consumer_project_imports_the_wheel_and_its_own_components(built: Built) -> None:
    consumer = consumer_copy(built, "consumer-probe")
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=consumer, env=consumer_env(built), capture_output=True, text=True, check=True
    )
    found = json.loads(done.stdout)
    assert Path(found["aks_gpu"]).is_relative_to(built.site), found["aks_gpu"]
    assert Path(found["components"]).resolve() == (consumer / "components" / "__init__.py").resolve()
    # Nothing of the repository is on the path but the environment the tests run in (in a clean clone, .venv sits
    # inside the repository: its site-packages brings pulumi and the other dependencies, never aks_gpu first).
    # The development install's own entry (components/, from its .pth) may follow; the wheel's folder comes first.
    repository, environment = PROJECT_DIR.resolve(), Path(sys.prefix).resolve()
    development = (PROJECT_DIR / "components").resolve()
    assert not [
        entry
        for entry in found["path"]
        if entry
        and Path(entry).resolve().is_relative_to(repository)
        and not Path(entry).resolve().is_relative_to(environment)
        and Path(entry).resolve() != development
    ]
    if str(development) in found["path"]:
        assert found["path"].index(str(built.site)) < found["path"].index(str(development))


def test_the_consumer_projects_tests_pass_with_the_shipped_mocks_against_the_wheel(built: Built) -> None:
    consumer = consumer_copy(built, "consumer-tests")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"],
        cwd=consumer,
        env=consumer_env(built),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "4 passed" in done.stdout


CONSUMER_FILES = ("components", "tests", "__main__.py")
TYPO = '''
from aks_gpu import GpuPoolSpec, GpuWorkloadNamespace

pool: GpuPoolSpec = {"name": "gpu", "vendor": "nvidia", "vm_sise": "Standard_NC24ads_A100_v4", "workload": "training"}
team = GpuWorkloadNamespace("team", {"workload": {"name": "a", "type": "training"}, "node_selector": {}, "tolerationz": []})
'''


def test_mypy_reads_the_wheels_types_and_catches_a_misspelt_key_in_a_consumer(built: Built) -> None:
    consumer = consumer_copy(built, "consumer-mypy")
    (consumer / "typo.py").write_text(TYPO, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(built.scratch / "mypy-cache"), *CONSUMER_FILES, "typo.py"],
        cwd=consumer,
        env=consumer_env(built),
        capture_output=True,
        text=True,
        check=False,
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    # The consumer's own code type-checks against the wheel; only the misspelt keys are errors.
    assert {line.split(":")[0] for line in errors} == {"typo.py"}, done.stdout
    assert any('"vm_sise"' in line for line in errors), done.stdout
    assert any('"tolerationz"' in line for line in errors), done.stdout
    assert "missing library stubs or py.typed marker" not in done.stdout
