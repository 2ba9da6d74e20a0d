//! Binding the daemon's socket safely: a 0700 directory, a lock file so two daemons never
//! race for one path, a stale socket (nobody answering) replaced, a live one never stolen.

use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use interprocess::local_socket::tokio::Listener;
use interprocess::local_socket::{GenericFilePath, ListenerOptions, ToFsName};
use interprocess::os::unix::local_socket::ListenerOptionsExt;

use crate::protocol::endpoint::{is_answering, PID_FILE};

#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("another ckptd is already serving {0}")]
    AlreadyRunning(PathBuf),
    #[error("another ckptd (pid {pid}, socket {socket}) is using the data directory {data_dir}; talk to that one, or stop it first")]
    DataDirTaken {
        data_dir: PathBuf,
        pid: String,
        socket: String,
    },
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

/// Holds the data directory's lock while the daemon runs: one daemon per set of stores.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

/// Takes the data directory's lock (`ckptd.lock`), or says which daemon holds it, and records
/// this daemon's pid and socket in `ckptd.pid` for clients that cannot find the socket. Two
/// daemons on the same stores (one started from a shell without `XDG_RUNTIME_DIR`, whose
/// socket path differs) would race for every ref; the socket's own lock cannot see that, this
/// one can. Neither file is ever opened through a symlink: the lock is opened with
/// `O_NOFOLLOW`, and the record replaces whatever has its name by a rename.
pub fn lock_data_dir(data_dir: &Path, socket: &Path) -> Result<DataDirLock, BindError> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir_err = |source| BindError::Dir {
        path: data_dir.to_path_buf(),
        source,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(data_dir)
        .map_err(dir_err)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(data_dir.join("ckptd.lock"))
        .map_err(dir_err)?;
    if rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
        let holder = crate::fs::read_small(&data_dir.join(PID_FILE), 4096)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let mut lines = holder.lines();
        let (pid, other) = (lines.next().unwrap_or("?"), lines.next().unwrap_or("?"));
        return Err(BindError::DataDirTaken {
            data_dir: data_dir.to_path_buf(),
            pid: pid.to_string(),
            socket: other.to_string(),
        });
    }
    // Private like everything else there (an older file may have been created looser).
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(dir_err)?;
    let record = format!("{}\n{}\n", std::process::id(), socket.display());
    write_replacing(&data_dir.join(PID_FILE), record.as_bytes()).map_err(dir_err)?;
    Ok(DataDirLock { _file: file })
}

/// Writes `bytes` as the new file `path` (0600): a temporary file created exclusively beside
/// it, renamed over whatever had the name (a symlink is replaced, never followed).
fn write_replacing(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
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
    private_dir(dir).map_err(dir_err)?;
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
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if is_answering(path) {
                return Err(BindError::AlreadyRunning(path.to_path_buf()));
            }
            tracing::info!(path = %path.display(), "removing stale socket left by a dead daemon");
            let _ = std::fs::remove_file(path);
        }
        // Only a socket nobody answers on may be replaced: anything else is someone's file.
        Ok(_) => {
            return Err(BindError::Listen {
                path: path.to_path_buf(),
                source: std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "something other than a socket is there; refusing to replace it",
                ),
            })
        }
        Err(_) => {}
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

/// Makes sure `dir` is a private folder of ours: created 0700 when missing; a folder of ours
/// with looser permissions is tightened; a symlink, a non-folder or a folder of another user
/// is refused (its owner could swap the socket and read every request).
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let refuse = |why: String| {
        Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            why,
        ))
    };
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let me = rustix::process::geteuid().as_raw();
    if !meta.is_dir() {
        return refuse("it is not a folder (a symlink or a file); refusing to use it".into());
    }
    if meta.uid() != me {
        return refuse(format!(
            "it belongs to uid {}, not to this user (uid {me}); refusing to use it",
            meta.uid()
        ));
    }
    if meta.mode() & 0o077 != 0 {
        tracing::warn!(path = %dir.display(), mode = format!("{:o}", meta.mode() & 0o777), "tightening the socket folder to 0700");
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}
