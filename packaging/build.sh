#!/usr/bin/env bash
# Builds what the packages ship into target/release: ckptd, and the client `ckpt` as a static
# executable where the target is Linux (an agent starts it on every prompt: no dynamic loader, no
# libc or libgcc_s to map and relocate), then the completions and man pages (target/assets).
#
# The client is built for musl where the toolchain has (or rustup can add) the musl target: a
# static glibc executable still runs glibc's start-up, which asks the processor about its caches
# with dozens of `cpuid` instructions, and under a hypervisor each one traps (~7 us here: a third
# of a `ckpt hook` process's own time). Without the musl target it is linked statically against
# glibc. Either way it is the same code `cargo test` tests; only the libc and the link differ.
#
#   packaging/build.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked
host=$(rustc -vV | sed -n 's/^host: //p')
case "$host" in
  *-linux-gnu*)
    musl="${host%%-*}-unknown-linux-musl"
    have_musl() { [ -d "$(rustc --print sysroot)/lib/rustlib/$musl/lib" ]; }
    if ! have_musl && command -v rustup >/dev/null 2>&1; then
      rustup target add "$musl" >/dev/null 2>&1 || true
    fi
    if have_musl; then
      cargo build --release --locked --target "$musl" --bin ckpt
      # A copy, not cargo's hard link: the glibc build in target/release/deps stays as it was.
      rm -f target/release/ckpt
      cp "target/$musl/release/ckpt" target/release/ckpt
    else
      echo "build.sh: no $musl target (rustup target add $musl): the client is linked statically against glibc" >&2
      # Only the client's own crate is compiled with the flag (its libraries are not rebuilt,
      # and the proc-macros that a crate-wide RUSTFLAGS would break are untouched).
      cargo rustc --release --locked --bin ckpt -- -C target-feature=+crt-static
    fi
    # A dynamic executable names its loader (PT_INTERP) in its first page; a static one none.
    if grep -aqE 'ld-linux|ld-musl' <(head -c 4096 target/release/ckpt); then
      echo "build.sh: the client was not linked statically" >&2
      exit 1
    fi
    ;;
esac
packaging/build-assets.sh target/release/ckpt
