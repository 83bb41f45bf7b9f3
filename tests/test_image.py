"""The aks-gpu image recipe (Dockerfile, .dockerignore), read: there is no container engine here to build it, so these
tests check what can be known without one. It installs what the CI workflow installs (one way to install aksgpu,
examples/ci/gpu-diagnose.yml); everything it copies is in the checkout and in the build context; it runs as the
user the diagnostic schedule's CronJob names (aks_gpu.validation.schedule.IMAGE_USER_ID); and it keeps hadolint's
rules that apply to it (https://github.com/hadolint/hadolint#rules), checked by reading."""

from __future__ import annotations

import fnmatch
import re
import shlex
import tomllib
from dataclasses import dataclass, field

import yaml

from aks_gpu.validation.schedule import IMAGE_USER_ID, schedule_command
from tests.conftest import PROJECT_DIR, stack_model

DOCKERFILE = PROJECT_DIR / "Dockerfile"
DOCKERIGNORE = PROJECT_DIR / ".dockerignore"
WORKFLOW = PROJECT_DIR / "examples" / "ci" / "gpu-diagnose.yml"
PYPROJECT = tomllib.loads((PROJECT_DIR / "pyproject.toml").read_text(encoding="utf-8"))


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def of(self, keyword: str) -> list[str]:
        return [args for key, args in self.instructions if key == keyword]


def stages() -> tuple[dict[str, str], list[Stage]]:
    """The build arguments declared before the first FROM (with their defaults) and the stages, each instruction as
    (KEYWORD, its arguments), continuation lines joined and comments left out."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text(encoding="utf-8"))
    args: dict[str, str] = {}
    found: list[Stage] = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        keyword, _, rest = line.strip().partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            words = rest.split()
            base = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], words[0])
            found.append(Stage(base, words[2] if len(words) == 3 and words[1].upper() == "AS" else None))
        elif not found and keyword == "ARG":
            name, _, default = rest.partition("=")
            args[name] = default
        else:
            found[-1].instructions.append((keyword, rest.strip()))
    return args, found


def commands(stage: Stage) -> list[list[str]]:
    return [shlex.split(part) for run in stage.of("RUN") for part in run.split("&&")]


def pip_installs(lines: list[list[str]]) -> list[list[str]]:
    """The arguments of each ``python -m pip install``."""
    prefix = ["python", "-m", "pip", "install"]
    return [line[len(prefix) :] for line in lines if line[: len(prefix)] == prefix]


def test_the_image_installs_what_the_ci_workflow_installs() -> None:
    _args, (build, _image) = stages()
    [install] = [
        step for step in yaml.safe_load(WORKFLOW.read_text())["jobs"]["diagnose"]["steps"] if step.get("name") == "Install aksgpu"
    ]
    workflow = pip_installs([shlex.split(line) for line in install["run"].splitlines() if line.strip()])
    assert pip_installs(commands(build)) == workflow == [["-r", "requirements.txt"], ["--no-deps", "."]]


def ignored(path: str, patterns: list[str]) -> bool:
    """Whether .dockerignore keeps ``path`` out of the build context: the last pattern that matches it or a folder
    above it decides (https://docs.docker.com/build/concepts/context/#dockerignore-files)."""
    parts = path.split("/")
    verdict = False
    for pattern in patterns:
        exception = pattern.startswith("!")
        glob = pattern.removeprefix("!").removeprefix("**/")
        candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if pattern.removeprefix("!").startswith("**/"):
            candidates += parts
        if any(fnmatch.fnmatchcase(candidate, glob) for candidate in candidates):
            verdict = not exception
    return verdict


def copied_sources(stage: Stage) -> list[str]:
    return [source for args in stage.of("COPY") if not args.startswith("--from") for source in shlex.split(args)[:-1]]


def test_what_it_copies_is_in_the_checkout_and_in_the_build_context() -> None:
    patterns = [line.strip() for line in DOCKERIGNORE.read_text().splitlines() if line.strip() and not line.startswith("#")]
    _args, (build, _image) = stages()
    sources = copied_sources(build)
    for source in sources:
        assert (PROJECT_DIR / source).exists(), source
        assert not ignored(source, patterns), f"{source}: .dockerignore keeps it out of the build context"
    assert (PROJECT_DIR / "components/aks_gpu/cli/__init__.py").exists()
    assert not ignored("components/aks_gpu/cli/__init__.py", patterns)
    # What the build of `.` reads besides the package: the readme and licence pyproject.toml names.
    project = PYPROJECT["project"]
    for needed in ("pyproject.toml", "requirements.txt", project["readme"], *project["license-files"]):
        assert any(needed == s or needed.startswith(s + "/") for s in sources), f"{needed} is not copied"
    # Nothing of the checkout's environments, tools or local state goes to the builder.
    for kept_out in (".venv/bin/python", ".tools/bin/kwokctl", ".local/prod/state", "stacks/Pulumi.prod.yaml", ".git/HEAD"):
        assert ignored(kept_out, patterns), kept_out


def test_it_runs_as_the_user_the_cron_job_names() -> None:
    _args, (_build, image) = stages()
    [user] = image.of("USER")
    assert user == f"{IMAGE_USER_ID}:{IMAGE_USER_ID}"
    [useradd] = [line for line in commands(image) if line[0] == "useradd"]
    assert useradd[useradd.index("--uid") + 1] == str(IMAGE_USER_ID)


def test_its_entrypoint_is_the_command_the_cron_job_runs() -> None:
    _args, (_build, image) = stages()
    [entrypoint] = image.of("ENTRYPOINT")
    # JSON form (hadolint DL3025); the command pyproject.toml installs, on the PATH, and the one the CronJob names.
    assert yaml.safe_load(entrypoint) == ["aksgpu"] == schedule_command(stack_model("prod"), "prod")[:1]
    assert "aksgpu" in PYPROJECT["project"]["scripts"]
    assert "PATH=/opt/aks-gpu/bin:" in " ".join(image.of("ENV"))


def test_the_image_holds_the_environment_only() -> None:
    args, stages_ = stages()
    build, image = stages_
    # DL3006/DL3007: an explicit tag, not latest.
    for stage in stages_:
        assert ":" in stage.base and not stage.base.endswith(":latest"), stage.base
    assert args["PYTHON_IMAGE"] == build.base == image.base
    # The image itself copies only the build stage's virtual environment (DL3022: from a named stage): no source tree,
    # no compiler, no package manager run in it besides the user it adds.
    assert image.of("COPY") == [f"--from={build.name} /opt/aks-gpu /opt/aks-gpu"]
    assert [line[0] for line in commands(image)] == ["useradd"]
    # DL3042: pip keeps no cache in the layers; pip itself is gone from the environment the image copies.
    assert "PIP_NO_CACHE_DIR=1" in " ".join(build.of("ENV"))
    assert ["python", "-m", "pip", "uninstall", "--yes", "pip"] in commands(build)
    # DL3000 (absolute WORKDIR), DL3003 (no cd), DL3004 (no sudo).
    for stage in stages_:
        assert all(w.startswith("/") for w in stage.of("WORKDIR"))
        assert not any(line[0] in ("cd", "sudo") for line in commands(stage))
