#!/usr/bin/env bash
# Installs what the browser test of `ckpt ui` drives: Debian's Chromium and ChromeDriver (when
# missing) and Selenium (pinned, from PyPI) into target/ui-venv, once.
# Usage: tests/ui/install.sh   (needs apt as root, python3 and PyPI)
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver
fi
venv=target/ui-venv
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import importlib.metadata as m; assert m.version("selenium") == "4.51.0"' 2>/dev/null; then
  exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "selenium==4.51.0"
"$venv/bin/python" -c 'import importlib.metadata as m; print("selenium", m.version("selenium"))'
