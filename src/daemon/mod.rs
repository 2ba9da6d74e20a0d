//! The daemon: a tokio server that owns the registered projects and answers clients.
//!
//! [`run`] takes a listener it is handed (so tests, and later systemd socket activation, can
//! supply one) and a shutdown future. Each connection is a task; each request on it is a task,
//! so requests can be pipelined. Project work runs in the [engine](crate::engine), on blocking
//! threads behind one owner per project, so a project's operations are serialised while
//! different projects proceed in parallel.

pub mod allocator;
mod autopush;
mod handlers;
pub mod owner;
mod projects;
mod server;
pub mod service;
pub mod socket;
mod warm;

pub use handlers::{check_params, PANIC_METHOD};
pub use owner::Owner;
pub use server::run;
pub use socket::{bind, lock_data_dir, BindError, DataDirLock, SocketGuard};
mod state;

pub(crate) use state::{blocking, test_hooks};
pub use state::{raise_open_files_limit, Daemon};
