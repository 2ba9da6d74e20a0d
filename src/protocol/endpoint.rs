//! Where a daemon answers: the record a running daemon keeps in its data directory (its pid, then
//! its socket), and a probe of a socket. The daemon writes the record; clients read it to find a
//! daemon that serves the data directory on another socket.

use std::path::Path;

use interprocess::local_socket::traits::Stream as _;
use interprocess::local_socket::{GenericFilePath, ToFsName};

/// The record of the running daemon in the data directory: its pid, then its socket.
pub const PID_FILE: &str = "ckptd.pid";

/// True when something accepts connections on `path`.
pub fn is_answering(path: &Path) -> bool {
    match path.to_fs_name::<GenericFilePath>() {
        Ok(name) => interprocess::local_socket::Stream::connect(name).is_ok(),
        Err(_) => false,
    }
}
