#!/usr/bin/env bash
# Install what the web app's browser test needs: Debian's Chromium (/usr/bin/chromium) and
# Playwright for Python in the project's virtualenv. Idempotent: a second run changes nothing.
# Playwright drives the system Chromium; its own browser download (`playwright install`)
# is never used, so nothing is fetched at test time.
set -euo pipefail

cd "$(dirname "$0")/../.."
VENV="${VENV:-.venv}"
PLAYWRIGHT_VERSION="${PLAYWRIGHT_VERSION:-1.65.2}"

if [ ! -x /usr/bin/chromium ]; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update
  $SUDO apt-get install -y --no-install-recommends chromium fonts-dejavu-core
fi
/usr/bin/chromium --version

if ! "$VENV/bin/python" -c "import playwright" 2>/dev/null; then
  "$VENV/bin/pip" install "playwright==${PLAYWRIGHT_VERSION}"
fi
"$VENV/bin/python" -c "from importlib.metadata import version; print('playwright', version('playwright'))"
