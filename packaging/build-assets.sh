#!/usr/bin/env bash
# Generates what packages ship besides the binaries: shell completions and man pages, from the
# built `ckpt` (their source is the argument definitions). Usage: packaging/build-assets.sh
# [PATH_TO_CKPT]  (default target/release/ckpt); writes target/assets/.
set -euo pipefail
cd "$(dirname "$0")/.."
ckpt=${1:-target/release/ckpt}
out=target/assets
rm -rf "$out"
mkdir -p "$out/completions" "$out/man"
"$ckpt" completions bash > "$out/completions/ckpt"
"$ckpt" completions zsh > "$out/completions/_ckpt"
"$ckpt" completions fish > "$out/completions/ckpt.fish"
"$ckpt" man "$out/man"
gzip -9n "$out"/man/*.1
echo "assets in $out"
