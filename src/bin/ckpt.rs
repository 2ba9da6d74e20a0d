//! `ckpt`: the command-line client of ckptd.
#![forbid(unsafe_code)]

/// Built for musl (the packages' client): an allocator that keeps what it freed for the next
/// allocation instead of unmapping it (see Cargo.toml).
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

fn main() {
    std::process::exit(ckpt::client::main());
}
