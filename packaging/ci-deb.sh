#!/usr/bin/env bash
# Builds the .deb, installs it with dpkg, runs the installed binaries (a daemon started from
# /usr/bin/ckptd, a checkpoint and a restore with /usr/bin/ckpt, the units where the package
# put them), then removes the package. Needs root and cargo-deb. Where a ckpt package is
# installed already, it only lists the .deb's files: it never replaces or removes one it did
# not install.
set -Eeuo pipefail
trap 'echo "packaging/ci-deb.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
cd "$(dirname "$0")/.."
# dpkg runs ldconfig and start-stop-daemon from the system's sbin folders: a PATH without them
# (a user's login shell on some systems) makes it refuse to install anything.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
command -v cargo-deb >/dev/null 2>&1 || cargo install cargo-deb --locked --version 3.8.0
packaging/build.sh
deb=$(cargo deb --no-build --quiet --output target/debian/ 2>/dev/null | tail -n 1)
[ -f "$deb" ] || deb=$(ls -t target/debian/ckpt_*.deb | head -n 1)
echo "built $deb"
# Never replace (and then remove) a ckpt package someone installed on this machine.
if dpkg-query -W -f='${Status}' ckpt 2>/dev/null | grep -q 'install ok installed'; then
  echo "a ckpt package is installed here: its files are listed, not installed over it" >&2
  dpkg-deb -c "$deb" | grep -q './usr/bin/ckpt$' || { echo "the .deb holds no /usr/bin/ckpt" >&2; exit 1; }
  exit 0
fi
dpkg -i "$deb"
trap 'dpkg -r ckpt >/dev/null 2>&1 || true' EXIT
/usr/bin/ckpt --version
/usr/bin/ckptd --version
# The client the package ships is the static one packaging/build.sh made.
if grep -aq 'ld-linux' <(head -c 4096 /usr/bin/ckpt); then
  echo "the packaged /usr/bin/ckpt is not linked statically" >&2
  exit 1
fi
# ... and at a fixed address (ELF type 2, not a static-pie's 3): nothing to relocate at start.
if [ "$(od -An -tu2 -j16 -N2 /usr/bin/ckpt | tr -d ' ')" != 2 ]; then
  echo "the packaged /usr/bin/ckpt is position-independent" >&2
  exit 1
fi
for f in /usr/lib/systemd/user/ckptd.service /usr/lib/systemd/user/ckptd.socket \
         /usr/lib/systemd/system/ckptd@.service /usr/share/man/man1/ckpt.1.gz \
         /usr/share/bash-completion/completions/ckpt /usr/share/doc/ckpt/config.example.toml; do
  [ -f "$f" ] || { echo "missing from the package: $f" >&2; exit 1; }
done
repo=$(pwd)
home=$(mktemp -d)
mkdir -m 700 "$home/run"
mkdir -p "$home/proj"
export HOME=$home XDG_RUNTIME_DIR=$home/run XDG_DATA_HOME=$home/data XDG_CONFIG_HOME=$home/config
/usr/bin/ckpt config check /usr/share/doc/ckpt/config.example.toml >/dev/null
# packaging/install.sh (for source users) writes units for the ckptd on PATH; no user manager
# here, so it only writes them: check them. /usr/bin first: a ckptd installed from source
# (~/.cargo/bin, often first on PATH) must not stand in for the package's.
(cd "$repo" && PATH=/usr/bin:/bin:$PATH packaging/install.sh --no-build) | tail -n 2
unit="$XDG_CONFIG_HOME/systemd/user/ckptd.service"
want="ExecStart=$(realpath /usr/bin/ckptd)"
grep -qx "$want" "$unit" || {
  echo "packaging/install.sh --no-build wrote a unit for another ckptd: want $want, got $(grep '^ExecStart=' "$unit")" >&2
  exit 1
}
XDG_RUNTIME_DIR=$home/run systemd-analyze verify --user "$XDG_CONFIG_HOME/systemd/user/ckptd.service" \
  "$XDG_CONFIG_HOME/systemd/user/ckptd.socket"
/usr/bin/ckptd 2>"$home/ckptd.log" &
daemon=$!
trap 'kill $daemon 2>/dev/null || true; dpkg -r ckpt >/dev/null 2>&1 || true; rm -rf "$home"' EXIT
cd "$home/proj"
echo one > a.txt
for _ in $(seq 100); do /usr/bin/ckpt --no-spawn status >/dev/null 2>&1 && break; sleep 0.1; done
/usr/bin/ckpt --no-spawn watch
/usr/bin/ckpt --no-spawn checkpoint -m "from the package"
echo two > a.txt
/usr/bin/ckpt --no-spawn restore --yes @ >/dev/null
[ "$(cat a.txt)" = one ] || { echo "restore through the installed binaries failed" >&2; exit 1; }
/usr/bin/ckpt --no-spawn shutdown >/dev/null
wait "$daemon"
cd /
dpkg -r ckpt >/dev/null
[ ! -e /usr/bin/ckpt ] || { echo "dpkg -r left /usr/bin/ckpt" >&2; exit 1; }
echo "the .deb installs, runs and removes cleanly"
