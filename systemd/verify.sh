#!/usr/bin/env bash
# `systemd-analyze verify` on every unit, with ExecStart pointed at a built ckptd (the units
# name /usr/bin/ckptd, where packages install it). Usage: systemd/verify.sh PATH_TO_CKPTD
set -euo pipefail
ckptd=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here"/*.service "$here"/*.socket "$work"/
sed -i "s#/usr/bin/ckptd#$ckptd#" "$work"/*.service
# A template is verified through an instance.
cp "$work/ckptd@.service" "$work/ckptd@root.service"
mkdir -m 700 "$work/runtime"
XDG_RUNTIME_DIR="$work/runtime" systemd-analyze verify --user "$work/ckptd.service" "$work/ckptd.socket"
systemd-analyze verify "$work/ckptd@root.service"
echo "systemd units verified"
