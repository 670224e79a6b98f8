#!/usr/bin/env bash
# Creates .venv and installs what Prisma needs. `setup.sh dev` adds the test tools and Debian's chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
requirements=requirements.txt
[ "${1:-}" = dev ] && requirements=requirements-dev.txt

# uv installs the same versions as pip (`pip freeze` identical), in 75 s against pip's 163 s on a 2-core CI machine.
# It does not read pip's configuration, so the package indexes, wheel folders and constraints pip is set up with on
# this machine are handed to it, and like pip it takes the best version any index offers. Should uv fail all the same,
# pip installs.
uv_options() {
  .venv/bin/python -m pip config list | while IFS="=" read -r key value; do
    for item in ${value//\'/}; do
      case "${key#*.}" in
        index-url | extra-index-url | find-links | constraint) printf -- '--%s\n%s\n' "${key#*.}" "$item" ;;
      esac
    done
  done
}

install_requirements() {
  .venv/bin/python -m pip install --quiet --upgrade pip uv==0.13.9
  local options
  mapfile -t options < <(uv_options)
  .venv/bin/uv pip install --quiet --python .venv/bin/python --compile-bytecode \
    --index-strategy unsafe-best-match "${options[@]}" -r "$requirements" || {
    echo "uv could not install the packages (above); pip installs them instead." >&2
    .venv/bin/python -m pip install --quiet -r "$requirements"
  }
}

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
stamp=".venv/.installed-$(sha256sum requirements.txt requirements-dev.txt | sha256sum | cut -c1-12)-${1:-app}"
if [ ! -f "$stamp" ]; then
  install_requirements
  touch "$stamp"
fi

if [ "${1:-}" = dev ] && ! command -v chromium >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
fi
