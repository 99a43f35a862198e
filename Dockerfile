# llmc-mcp in a container: `llmc-mcp serve` over stdio (the default) or streamable HTTP, the rasters
# mounted at /workspace and the server's private state (the gate's HMAC key) in /state, outside it.
#
#   docker build -t llmc-mcp .
#   stdio (a host's "command"):
#     docker run -i --rm --init --network none --read-only --tmpfs /tmp \
#       -v /path/to/rasters:/workspace -v llmc-mcp-state:/state llmc-mcp
#   streamable HTTP on http://127.0.0.1:8000/mcp (published on loopback only: no authentication):
#     docker run --rm --init --read-only --tmpfs /tmp -p 127.0.0.1:8000:8000 \
#       -v /path/to/rasters:/workspace -v llmc-mcp-state:/state \
#       llmc-mcp serve --transport http --host 0.0.0.0 --port 8000
#
# Any `llmc-mcp serve` flag goes after the image name (`serve --mode classic`). The server runs as an
# unprivileged user (uid 10001) and writes only to /workspace, /state and /tmp, so --read-only works.
# A host folder mounted at /workspace must be writable by that uid, or run with
# --user "$(id -u):$(id -g)" and mount a state folder that user owns at /state too.
# The server needs no network: over stdio, --network none cuts the container off entirely. Workers
# still try their own network namespace; Docker's default seccomp profile may refuse it, and the
# worker then says so in its log and relies on the container's isolation and GDAL's settings.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY pyproject.toml README.md LICENSE /src/
COPY llmc_mcp /src/llmc_mcp
# Binary wheels only: the slim image has no compiler, and a dependency that would have to be built
# from source should fail here, naming itself, not halfway through a C build.
RUN python -m pip wheel --no-deps --wheel-dir /wheels /src \
    && python -m venv /opt/llmc-mcp \
    && /opt/llmc-mcp/bin/pip install --only-binary=:all: /wheels/llmc_mcp-*.whl \
    && /opt/llmc-mcp/bin/llmc-mcp --version

FROM ${PYTHON_IMAGE}
COPY --from=build /opt/llmc-mcp /opt/llmc-mcp
RUN useradd --system --uid 10001 --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin llmc \
    && mkdir -p /workspace /state \
    && chown llmc:llmc /workspace /state \
    && chmod 0700 /state
# HOME points at the tmpfs: nothing is kept there, but libraries that probe it find a writable folder.
# Bytecode was compiled at install time; a read-only root must not be written to at run time.
ENV PATH=/opt/llmc-mcp/bin:$PATH \
    HOME=/tmp \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    LLMC_MCP_WORKSPACE=/workspace \
    LLMC_MCP_STATE_DIR=/state
USER 10001:10001
WORKDIR /workspace
# Declared volumes stay writable under --read-only even when the user mounts nothing.
VOLUME ["/workspace", "/state"]
EXPOSE 8000
ENTRYPOINT ["llmc-mcp"]
CMD ["serve"]
