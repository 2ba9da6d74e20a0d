//! Opening paths that come from a project or a request without being fooled by them.
//!
//! A project is a folder other processes change while ckpt reads it, and a request names
//! paths a client chose. So every open here is non-blocking (a FIFO never hangs a thread),
//! checks the type on the opened descriptor (not on an earlier `stat`), and, below a project
//! root, resolves with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`: a parent folder
//! swapped for a symlink cannot lead a read outside the project. A file is read until two
//! looks agree, so an in-place rewrite is never stored as a mix of two versions.
//!
//! [`beneath`] opens below a root, [`read`] reads a file whole and stable, [`stat`] is what a
//! look at a file saw, [`private`] keeps what ckpt creates private, [`retired`] frees replaced
//! files after the reply.

pub mod beneath;
pub mod private;
pub mod read;
pub mod retired;
pub mod stat;

pub use beneath::{
    as_root, open_beneath, open_dir, open_dir_beneath, read_link_beneath, remove_beneath, Beneath,
};
pub use private::{create_project_dir, make_private, private_umask};
pub use read::{open_regular, read_small, read_stable, read_stable_seen, read_text, StableRead};
pub use retired::Retired;
pub use stat::{nanos, now_ns, Stat};

#[cfg(test)]
mod tests;
