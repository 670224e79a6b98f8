#!/usr/bin/env bash
# Creates .venv and installs what Prisma needs. `setup.sh dev` adds the test tools and Debian's chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
requirements=requirements.txt
[ "${1:-}" = dev ] && requirements=requirements-dev.txt

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
stamp=".venv/.installed-$(sha256sum requirements.txt requirements-dev.txt | sha256sum | cut -c1-12)-${1:-app}"
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -r "$requirements"
  touch "$stamp"
fi

if [ "${1:-}" = dev ] && ! command -v chromium >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
fi
