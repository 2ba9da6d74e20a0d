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
# The client is linked at a fixed address (`-C relocation-model=static`: a static executable, not
# a static-pie one), so nothing relocates it when it starts: a static-pie start applies ~5,400
# relocations and copies the pages they land on (~26 of a start's ~200 page faults), which made
# `ckpt --version` 0.61 ms against 0.51 ms here (posix_spawn to exit, medians of 5 x 300). The
# flag applies to the client's own crate only (`cargo rustc`); its libraries are position-
# independent code, which links into a fixed-address executable as is. The daemon stays a PIE.
#
#   packaging/build.sh              # the daemon and, for musl, the client: two builds of the crates
#   packaging/build.sh --glibc      # the client linked statically against glibc: one build
set -euo pipefail
glibc=false
[ "${1:-}" = "--glibc" ] && glibc=true
cd "$(dirname "$0")/.."
cargo build --release --locked
host=$(rustc -vV | sed -n 's/^host: //p')
case "$host" in
  *-linux-gnu*)
    musl="${host%%-*}-unknown-linux-musl"
    have_musl() { [ -d "$(rustc --print sysroot)/lib/rustlib/$musl/lib" ] && [ "$glibc" = false ]; }
    if ! have_musl && [ "$glibc" = false ] && command -v rustup >/dev/null 2>&1; then
      echo "build.sh: adding the toolchain's $musl target (rustup target add $musl), once" >&2
      rustup target add "$musl" >/dev/null 2>&1 || true
    fi
    if have_musl; then
      echo "build.sh: building the client again for $musl (every crate a second time; --glibc skips this)" >&2
      cargo rustc --release --locked --target "$musl" --bin ckpt -- -C relocation-model=static
      # A copy, not cargo's hard link: the glibc build in target/release/deps stays as it was.
      rm -f target/release/ckpt
      cp "target/$musl/release/ckpt" target/release/ckpt
    else
      echo "build.sh: no $musl target (rustup target add $musl): the client is linked statically against glibc" >&2
      # Only the client's own crate is compiled with the flag (its libraries are not rebuilt,
      # and the proc-macros that a crate-wide RUSTFLAGS would break are untouched).
      cargo rustc --release --locked --bin ckpt -- -C target-feature=+crt-static -C relocation-model=static
    fi
    # A dynamic executable names its loader (PT_INTERP) in its first page; a static one none.
    if grep -aqE 'ld-linux|ld-musl' <(head -c 4096 target/release/ckpt); then
      echo "build.sh: the client was not linked statically" >&2
      exit 1
    fi
    # ELF's e_type (bytes 16-17): 2 is an executable at a fixed address, 3 a position-independent one.
    if [ "$(od -An -tu2 -j16 -N2 target/release/ckpt | tr -d ' ')" != 2 ]; then
      echo "build.sh: the client was linked position-independent (static-pie)" >&2
      exit 1
    fi
    ;;
esac
packaging/build-assets.sh target/release/ckpt
