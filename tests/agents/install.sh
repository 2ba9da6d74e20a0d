#!/usr/bin/env bash
# Installs the real agents the agent tests drive (pinned versions) under target/agents/, once.
# Usage: tests/agents/install.sh   (needs npm and the npm registry)
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=target/agents
install() {
  local name=$1 package=$2 version=$3 bin=$4
  if [ -x "$dest/$name/node_modules/.bin/$bin" ] && [ -f "$dest/$name/.version-$version" ]; then
    return
  fi
  rm -rf "${dest:?}/$name"
  mkdir -p "$dest/$name"
  npm install --silent --no-fund --no-audit --prefix "$dest/$name" "$package@$version" >/dev/null
  touch "$dest/$name/.version-$version"
}
install claude @anthropic-ai/claude-code 2.1.328 claude
install gemini @google/gemini-cli 0.61.0 gemini
install codex @openai/codex 0.169.0 codex
install copilot @github/copilot 1.0.102 copilot
install qwen @qwen-code/qwen-code 0.24.4 qwen
install opencode opencode-ai 1.18.33 opencode
# 7.7.7: the newest whose linux-x64 binary is on the registry (7.8.1 has none).
install kilo @kilocode/cli 7.7.7 kilo
install cline cline 3.0.65 cline
"$dest/claude/node_modules/.bin/claude" --version
"$dest/gemini/node_modules/.bin/gemini" --version
"$dest/codex/node_modules/.bin/codex" --version
"$dest/copilot/node_modules/.bin/copilot" --version
"$dest/qwen/node_modules/.bin/qwen" --version
"$dest/opencode/node_modules/.bin/opencode" --version
"$dest/kilo/node_modules/.bin/kilo" --version
"$dest/cline/node_modules/.bin/cline" --version
