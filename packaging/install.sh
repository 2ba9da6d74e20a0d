#!/usr/bin/env bash
# Installs ckpt from this source tree for the current user: builds it as the packages do
# (packaging/build.sh: the client linked statically), installs both binaries into cargo's bin
# folder, writes the systemd user units pointing at the installed ckptd, and enables the socket,
# so the daemon starts at the first `ckpt` command or agent prompt. Re-running it upgrades.
#
#   packaging/install.sh            # binaries into ~/.cargo/bin, units into ~/.config/systemd/user
#   packaging/install.sh --glibc    # the same, built once (the client linked against glibc)
#   packaging/install.sh --no-build # only the units, for binaries already installed on PATH
# The binaries go to $CKPT_BIN_DIR when it is set; completions to the user's folders for them
# (~/.local/share/bash-completion, ~/.config/fish), man pages beside the binaries' folder
# (~/.cargo/share/man: man finds it through the bin folder on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" != "--no-build" ]; then
  echo "install.sh: building (the first time takes 10-15 minutes: the release build, then the client for musl; --glibc builds once)" >&2
  packaging/build.sh "$@"
  bin="${CKPT_BIN_DIR:-${CARGO_HOME:-$HOME/.cargo}/bin}"
  mkdir -p "$bin"
  # Under temporary names, then renamed: a running ckptd or an agent's hook keeps its file.
  for b in ckpt ckptd; do
    install -m 755 "target/release/$b" "$bin/.$b.new"
    mv -f "$bin/.$b.new" "$bin/$b"
  done
  echo "installed ckpt and ckptd in $bin"
  case ":$PATH:" in *":$bin:"*) ;; *) echo "note: $bin is not on your PATH: add it (agents' hooks name ckpt by its full path anyway)";; esac
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
# Completions and man pages of what was just built, where each shell and man look for a user's
# own (with --no-build, the binaries came from elsewhere, and so do their pages).
assets=target/assets
if [ "${1:-}" != "--no-build" ] && [ -d "$assets/completions" ]; then
  data="${XDG_DATA_HOME:-$HOME/.local/share}"
  man="$(dirname "$(dirname "$ckptd")")/share/man"
  mkdir -p "$data/bash-completion/completions" "$data/zsh/site-functions" \
    "${XDG_CONFIG_HOME:-$HOME/.config}/fish/completions" "$man/man1"
  cp "$assets/completions/ckpt" "$data/bash-completion/completions/ckpt"
  cp "$assets/completions/_ckpt" "$data/zsh/site-functions/_ckpt"
  cp "$assets/completions/ckpt.fish" "${XDG_CONFIG_HOME:-$HOME/.config}/fish/completions/ckpt.fish"
  cp "$assets"/man/*.1.gz "$man/man1/"
  echo "installed completions (bash; fish; zsh: add $data/zsh/site-functions to fpath) and man pages in $man (man ckpt)"
fi
echo "next: in a project, \`ckpt hook install claude-code\` (or gemini, codex, cursor, copilot)"
