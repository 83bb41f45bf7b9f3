# The aks-gpu image: the `aksgpu` command line, for the diagnostic schedule's CronJob (validation.diagnosticsSchedule,
# docs/validation.md "The diagnostic schedule"). It installs what the CI workflow installs (examples/ci/gpu-diagnose.yml:
# requirements.txt, then this checkout with --no-deps; tests/test_image.py holds the two to the same commands), in a
# build stage; the image itself gets only the finished virtual environment: no compiler, no pip cache, no source tree.
# Build it into the team's registry from the checkout's root (the build context) and refer to it by its digest:
#   az acr build --registry <registry> --image aks-gpu:<version> .
# There is no build of it in this repository's tests (no container engine here): see docs/validation.md.

# The base, pinned by tag here; pin it by digest in the team's build: --build-arg PYTHON_IMAGE=python:3.12-slim-bookworm@sha256:<digest>
ARG PYTHON_IMAGE=python:3.12-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/aks-gpu \
    PATH=/opt/aks-gpu/bin:$PATH
RUN python -m venv /opt/aks-gpu
WORKDIR /src
COPY requirements.txt ./
RUN python -m pip install -r requirements.txt
# What `pip install .` reads: pyproject.toml, the readme and licence it names, the package.
COPY pyproject.toml LICENSE ./
COPY docs/package.md docs/
COPY components/aks_gpu components/aks_gpu
RUN python -m pip install --no-deps . \
    && python -m pip uninstall --yes pip

FROM ${PYTHON_IMAGE}
# The user the CronJob's pod runs as (aks_gpu.validation.schedule.IMAGE_USER_ID): a number, so the kubelet can check
# runAsNonRoot without reading the image's /etc/passwd.
RUN useradd --uid 10001 --user-group --no-create-home --home-dir /tmp --shell /usr/sbin/nologin aksgpu
COPY --from=build /opt/aks-gpu /opt/aks-gpu
# The pod's root filesystem is read-only (the bytecode was compiled at install); /tmp is its only writable folder.
ENV PATH=/opt/aks-gpu/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
USER 10001:10001
WORKDIR /tmp
ENTRYPOINT ["aksgpu"]
CMD ["--help"]
