#!/usr/bin/env bash
# Installs ckpt from this source tree for the current user: builds it as the packages do
# (packaging/build.sh: the client linked statically), installs both binaries into cargo's bin
# folder, writes the systemd user units pointing at the installed ckptd, and enables the socket,
# so the daemon starts at the first `ckpt` command or agent prompt. Re-running it upgrades.
#
#   packaging/install.sh            # binaries into ~/.cargo/bin, units into ~/.config/systemd/user
#   packaging/install.sh --no-build # only the units, for binaries already installed on PATH
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" != "--no-build" ]; then
  packaging/build.sh
  bin="${CARGO_HOME:-$HOME/.cargo}/bin"
  mkdir -p "$bin"
  # Under temporary names, then renamed: a running ckptd or an agent's hook keeps its file.
  for b in ckpt ckptd; do
    install -m 755 "target/release/$b" "$bin/.$b.new"
    mv -f "$bin/.$b.new" "$bin/$b"
  done
  echo "installed ckpt and ckptd in $bin"
  # The units run the daemon just installed, whatever else is on PATH (a packaged /usr/bin one).
  ckptd="$bin/ckptd"
else
  ckptd=$(command -v ckptd || true)
  [ -n "$ckptd" ] || ckptd="${CARGO_HOME:-$HOME/.cargo}/bin/ckptd"
fi
[ -x "$ckptd" ] || { echo "install.sh: no ckptd found (looked on PATH and in $ckptd)" >&2; exit 1; }
ckptd=$(realpath "$ckptd")
units="${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user"
mkdir -p "$units"
sed "s#^ExecStart=/usr/bin/ckptd#ExecStart=$ckptd#" systemd/ckptd.service > "$units/ckptd.service"
cp systemd/ckptd.socket "$units/ckptd.socket"
echo "installed the units in $units (ExecStart=$ckptd)"
if command -v systemctl >/dev/null 2>&1 && systemctl --user show-environment >/dev/null 2>&1; then
  systemctl --user daemon-reload
  systemctl --user enable --now ckptd.socket ckptd.service
  echo "enabled ckptd.socket and ckptd.service: the daemon starts at login (and on first use)"
else
  echo "no systemd user manager here: start ckptd yourself (ckpt starts it on first use)"
fi
echo "next: in a project, \`ckpt hook install claude-code\` (or gemini, codex, cursor, copilot)"
