#!/usr/bin/env bash
# Builds what the packages ship into target/release: ckptd, and the client `ckpt` linked
# statically where the target is glibc Linux (static-pie: no dynamic loader, no libc or libgcc_s
# to map and relocate at each start; an agent starts it on every prompt), then the completions
# and man pages (target/assets). The static link is the only difference from `cargo build
# --release`: the same code, tested by `cargo test`. A later `cargo build --release` relinks the
# client dynamically.
#
#   packaging/build.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked
host=$(rustc -vV | sed -n 's/^host: //p')
case "$host" in
  *-linux-gnu*)
    # Only the client's own crate is compiled with the flag (its libraries are not rebuilt, and
    # the proc-macros that a crate-wide RUSTFLAGS would break are untouched); the link is static.
    cargo rustc --release --locked --bin ckpt -- -C target-feature=+crt-static
    # A dynamic executable names its loader (PT_INTERP) in its first page; a static one none.
    if grep -aq 'ld-linux' <(head -c 4096 target/release/ckpt); then
      echo "build.sh: the client was not linked statically" >&2
      exit 1
    fi
    ;;
esac
packaging/build-assets.sh target/release/ckpt
