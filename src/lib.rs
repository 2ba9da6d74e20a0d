//! ckpt: an undo button for AI coding agents.
//!
//! `ckptd` (the daemon) watches registered projects and, when a client asks, records a
//! checkpoint of the whole project (every file that is not excluded or ignored) as a commit in
//! a git object store outside the project. Clients list, show, diff and restore checkpoints;
//! a restore first records the current state, so it can always be undone.
//!
//! The layers, each depending only on those listed before it:
//!
//! - [`model`]: the domain's values (checkpoint ids and kinds, skip reasons, watch modes).
//! - [`fs`]: opening paths from projects and requests (no FIFO hangs, no symlinked
//!   parents, no torn reads).
//! - [`config`]: the TOML configuration, XDG paths and the built-in exclusions.
//! - [`filter`]: exclusions + git ignore rules, and the walk of a project.
//! - [`store`]: pure git, synchronous (gix): snapshots, checkpoints and their names, diffs,
//!   retention, bundles, fsck; how a write becomes durable is one folder of it, `store::txn`.
//!   It never writes project files.
//! - [`index`]: what each file was when last read, so a checkpoint reads only what changed;
//!   [`watch`]: the inotify watcher that reports what changed.
//! - [`protocol`]: the wire (JSON-RPC 2.0, one message per line): every method's params and
//!   result types, the events, the error codes.
//! - [`engine`]: the domain, plain synchronous functions of a project and its opened state:
//!   checkpoint, restore, undo, dialogs, sessions, edit transactions, events; the only writer
//!   of project files.
//! - [`daemon`]: the tokio server: accept loop, connections, the dispatch from methods to the
//!   engine, and the one owner of each project's state (its lock, its blocking work, its
//!   timers).
//! - [`client`]: the `ckpt` command line, one file per command, talking to the daemon over the
//!   local socket with the same protocol types.
#![forbid(unsafe_code)]

pub mod client;
pub mod config;
pub mod daemon;
pub mod engine;
pub mod filter;
pub mod fs;
pub mod index;
pub mod model;
pub mod protocol;
pub mod store;
pub mod watch;

/// Helpers for the unit tests.
#[cfg(test)]
pub(crate) mod testing {
    /// What the real `git` prints for `args` (which it must accept).
    pub fn git<S: AsRef<std::ffi::OsStr>>(args: impl IntoIterator<Item = S>) -> String {
        let out = std::process::Command::new("git")
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}
