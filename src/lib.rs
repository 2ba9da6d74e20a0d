//! ckpt: an undo button for AI coding agents.
//!
//! `ckptd` (the daemon) watches registered projects and, when a client asks, records a
//! checkpoint of the whole project (every file that is not excluded or ignored) as a commit in
//! a git object store outside the project. Clients list, show, diff and restore checkpoints;
//! a restore first records the current state, so it can always be undone.
//!
//! - [`config`]: the TOML configuration and XDG paths.
//! - [`filter`]: built-in exclusions + git ignore rules, and the walk of a project.
//! - [`store`]: synchronous gix code: snapshots, checkpoints, diffs, restores.
//! - [`safe_io`]: opening paths from projects and requests (no FIFO hangs, no symlinked
//!   parents, no torn reads).
//! - [`protocol`]: JSON-RPC 2.0 messages, one per line, and their error codes.
//! - [`daemon`]: the tokio server: accept loop, connections, one lock per project.
//! - [`client`]: the `ckpt` command line, talking to the daemon over the local socket.
#![forbid(unsafe_code)]

pub mod client;
pub mod config;
pub mod daemon;
pub mod engine;
pub mod filter;
pub mod index;
pub mod model;
pub mod protocol;
pub mod safe_io;
pub mod store;
pub mod watch;
