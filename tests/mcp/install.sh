#!/usr/bin/env bash
# Installs the official MCP Python SDK (pinned) into target/mcp-venv, once: the client the MCP
# tests drive `ckpt mcp` with. Usage: tests/mcp/install.sh   (needs python3 and PyPI)
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=target/mcp-venv
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import importlib.metadata as m; assert m.version("mcp") == "2.3.0"' 2>/dev/null; then
  exit 0
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "mcp==2.3.0"
"$venv/bin/python" -c 'import importlib.metadata as m; print("mcp", m.version("mcp"))'
