//! What ckpt creates is private to the user (umask 077); folders it creates in a project get the
//! user's own umask.

use std::io::{self};
use std::path::Path;

use rustix::fs::Mode;

/// The umask the user started ckptd with. The daemon itself runs with 077 so that nothing in
/// its data dir is readable by others; folders it creates in a project get the user's own.
static USER_UMASK: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0o022);

/// Makes every file and folder this process creates from now on private to the user,
/// remembering the user's umask for what it creates in projects.
pub fn private_umask() {
    let old = rustix::process::umask(Mode::from_raw_mode(0o077));
    USER_UMASK.store(
        old.as_raw_mode() as u32,
        std::sync::atomic::Ordering::Relaxed,
    );
}

/// Creates the folder `path` in a project with the permissions the user's umask gives.
pub fn create_project_dir(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir(path)?;
    let mode = 0o777 & !USER_UMASK.load(std::sync::atomic::Ordering::Relaxed);
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Removes group and other permissions from `path` and, when `recursive`, from everything
/// below it (never following symlinks): how an install made before stores were private is
/// tightened.
pub fn make_private(path: &Path, recursive: bool) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if meta.file_type().is_symlink() {
        return;
    }
    let mode = meta.permissions().mode();
    if mode & 0o077 != 0 {
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & !0o077));
    }
    if recursive && meta.is_dir() {
        if let Ok(entries) = std::fs::read_dir(path) {
            for entry in entries.flatten() {
                make_private(&entry.path(), true);
            }
        }
    }
}
