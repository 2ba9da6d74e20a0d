#!/usr/bin/env bash
# Builds the RPM from the cargo-generate-rpm metadata (after packaging/ci-deb.sh, which built
# the release binaries and the assets with packaging/build.sh), checks that it holds every file
# the .deb holds, and runs the binaries rpm itself installed from it into a scratch root (the
# package's own dependencies are Fedora's, so --nodeps), then removes it with rpm. Needs
# cargo-generate-rpm and rpm.
set -Eeuo pipefail
trap 'echo "packaging/ci-rpm.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
cd "$(dirname "$0")/.."
command -v cargo-generate-rpm >/dev/null 2>&1 || cargo install cargo-generate-rpm --locked --version 0.21.1
[ -x target/release/ckpt ] && [ -f target/assets/man/ckpt.1.gz ] || packaging/build.sh
rm -rf target/generate-rpm
cargo generate-rpm
rpm_file=$(ls target/generate-rpm/ckpt-*.rpm)
echo "built $rpm_file"
rpm -qip "$rpm_file" | grep -E '^(Name|Version|License|Summary)'
listed=$(rpm -qlp "$rpm_file")
for f in /usr/bin/ckpt /usr/bin/ckptd /usr/lib/systemd/user/ckptd.service \
         /usr/lib/systemd/user/ckptd.socket /usr/lib/systemd/system/ckptd@.service \
         /usr/share/man/man1/ckpt.1.gz /usr/share/bash-completion/completions/ckpt \
         /usr/share/zsh/site-functions/_ckpt /usr/share/fish/vendor_completions.d/ckpt.fish \
         /usr/share/doc/ckpt/config.example.toml /usr/share/doc/ckpt/README.md; do
  grep -qx "$f" <<<"$listed" || { echo "missing from the RPM: $f" >&2; exit 1; }
done
rpm -K "$rpm_file"
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
rpm -i --nodeps --noscripts --root "$root" "$rpm_file" 2>&1 | grep -v 'use Alien\|what you are doing' || true
rpm --root "$root" -q ckpt
"$root/usr/bin/ckpt" --version
if grep -aq 'ld-linux' <(head -c 4096 "$root/usr/bin/ckpt"); then
  echo "the RPM's /usr/bin/ckpt is not linked statically" >&2
  exit 1
fi
"$root/usr/bin/ckptd" --version
[ "$(stat -c %a "$root/usr/bin/ckptd")" = 755 ] ||
  { echo "the RPM's /usr/bin/ckptd is not mode 755" >&2; exit 1; }
grep -q '^ExecStart=/usr/bin/ckptd' "$root/usr/lib/systemd/user/ckptd.service" ||
  { echo "the RPM's ckptd.service does not run /usr/bin/ckptd" >&2; exit 1; }
rpm -e --nodeps --noscripts --root "$root" ckpt 2>&1 | grep -v 'use Alien\|what you are doing' || true
[ ! -e "$root/usr/bin/ckpt" ] || { echo "rpm -e left /usr/bin/ckpt" >&2; exit 1; }
echo "the RPM installs, runs and uninstalls"
