//! Binding the daemon's socket safely: a 0700 directory, a lock file so two daemons never
//! race for one path, a stale socket (nobody answering) replaced, a live one never stolen.

use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use interprocess::local_socket::tokio::Listener;
use interprocess::local_socket::traits::Stream as _;
use interprocess::local_socket::{GenericFilePath, ListenerOptions, ToFsName};
use interprocess::os::unix::local_socket::ListenerOptionsExt;

#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("another ckptd is already serving {0}")]
    AlreadyRunning(PathBuf),
    #[error("cannot prepare socket directory {path}: {source}")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot listen on {path}: {source}")]
    Listen {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Holds the lock file while the daemon runs; the socket file goes with the listener.
#[derive(Debug)]
pub struct SocketGuard {
    _lock: File,
}

/// Creates the listener at `path` (socket mode 0600 in a directory we make 0700).
pub fn bind(path: &Path) -> Result<(Listener, SocketGuard), BindError> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    let dir_err = |source| BindError::Dir {
        path: dir.to_path_buf(),
        source,
    };
    if !dir.exists() {
        std::fs::create_dir_all(dir).map_err(dir_err)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(dir_err)?;
    }
    let lock_path = path.with_extension("lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(dir_err)?;
    if rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
        return Err(BindError::AlreadyRunning(path.to_path_buf()));
    }
    if path.exists() {
        if is_answering(path) {
            return Err(BindError::AlreadyRunning(path.to_path_buf()));
        }
        tracing::info!(path = %path.display(), "removing stale socket left by a dead daemon");
        let _ = std::fs::remove_file(path);
    }
    let listen_err = |source| BindError::Listen {
        path: path.to_path_buf(),
        source,
    };
    let name = path.to_fs_name::<GenericFilePath>().map_err(listen_err)?;
    let listener = ListenerOptions::new()
        .name(name)
        .mode(0o600)
        .create_tokio()
        .map_err(listen_err)?;
    Ok((listener, SocketGuard { _lock: lock }))
}

/// True when something accepts connections on `path`.
pub fn is_answering(path: &Path) -> bool {
    match path.to_fs_name::<GenericFilePath>() {
        Ok(name) => interprocess::local_socket::Stream::connect(name).is_ok(),
        Err(_) => false,
    }
}
