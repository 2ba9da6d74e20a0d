//! How glibc's allocator is set up for a long-running daemon, before anything is allocated.
//!
//! glibc raises its `mmap` threshold each time a block it mapped is freed (up to 32 MiB): once
//! a checkpoint has freed a file's or a pack's buffer, every later buffer below that size comes
//! from the heap and stays there, scattered between small allocations, and the daemon's memory
//! only grows (100,000 files, 200 checkpoints of a 250 KB file and a blame: 55 MiB resident,
//! against 40 MiB with the threshold fixed at its default and two arenas). These settings are read
//! from the environment when the process starts, so ckptd starts itself again, once, with them
//! set: the same process (its pid, the sockets systemd passed it) with the same arguments,
//! under the same name (`ps`, `pgrep ckptd`, `top`: the kernel would call it `exe`).

/// glibc's own starting threshold, kept fixed instead of rising.
const MMAP_THRESHOLD: &str = "131072";
/// Two arenas: the daemon's threads rarely allocate at once.
const ARENA_MAX: &str = "2";
/// What the heap grows by beyond a request (and keeps when it shrinks): a checkpoint's
/// buffers are reused instead of mapped and faulted in again each time.
const TOP_PAD: &str = "1048576";

/// Starts this program again with the allocator's settings in its environment, unless they
/// are there already (set by the user, or by this very step). Returns only when that is not
/// done or fails (no `/proc`, say), and the daemon then runs with glibc's defaults.
pub fn settle() {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return;
    }
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_else(|| "ckptd".into());
    let set = |name| std::env::var_os(name).is_some();
    if set("MALLOC_MMAP_THRESHOLD_") || set("MALLOC_ARENA_MAX") {
        keep_name(&argv0);
        return;
    }
    use std::os::unix::process::CommandExt;
    let error = std::process::Command::new("/proc/self/exe")
        .arg0(argv0)
        .args(args)
        .env("MALLOC_MMAP_THRESHOLD_", MMAP_THRESHOLD)
        .env("MALLOC_ARENA_MAX", ARENA_MAX)
        .env("MALLOC_TOP_PAD_", TOP_PAD)
        .exec();
    eprintln!("ckptd: running with the allocator's defaults (cannot start again with its settings: {error})");
}

/// The kernel names a process after the file it executes, here `/proc/self/exe`: the name is
/// set back to the program's own (the last part of `argv0`, at most 15 bytes, as the kernel
/// keeps it) wherever it reads `exe`.
fn keep_name(argv0: &std::ffi::OsStr) {
    let Ok(current) = rustix::thread::name() else {
        return;
    };
    if current.to_bytes() != b"exe" {
        return;
    }
    use std::os::unix::ffi::OsStrExt;
    let base = std::path::Path::new(argv0)
        .file_name()
        .map(|n| n.as_bytes())
        .filter(|n| !n.is_empty() && *n != b"exe")
        .unwrap_or(b"ckptd");
    let base = &base[..base.len().min(15)];
    if let Ok(name) = std::ffi::CString::new(base) {
        let _ = rustix::thread::set_name(&name);
    }
}
