//! The store's private folders: [`TRASH_DIR`] for the second names of the files an operation
//! replaces (see `Store::retire`) and [`SPARE_DIR`] for the files the next publish writes into.
//! A leaf.

use std::path::{Path, PathBuf};

/// The store's folder for the second names of the files an operation replaces (see
/// `Store::retire`); emptied at open.
pub const TRASH_DIR: &str = "ckpt-trash";
/// Where the files the next publish writes into are made ahead of time (see `txn::spares`).
pub const SPARE_DIR: &str = "ckpt-spare";

/// The store's folder `name` ([`TRASH_DIR`], [`SPARE_DIR`]), made if missing; None where it is
/// not a real folder.
pub(crate) fn private_folder(dir: &Path, name: &str) -> Option<PathBuf> {
    let folder = dir.join(name);
    let ready = match std::fs::symlink_metadata(&folder) {
        Ok(m) => m.is_dir(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&folder)
                .is_ok()
        }
        Err(_) => false,
    };
    ready.then_some(folder)
}

/// Removes what a daemon that stopped left in the store's folder `name` (second names in
/// [`TRASH_DIR`], spare files in [`SPARE_DIR`]), never through a symlink in its place.
pub(crate) fn empty_folder(dir: &Path, name: &str) {
    use rustix::fs::{AtFlags, Dir, Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(fd) = rustix::fs::open(dir.join(name), flags, Mode::empty()) else {
        return;
    };
    let Ok(entries) = Dir::read_from(&fd) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name != c"." && name != c".." {
            // A folder fails (`EISDIR`): only files are ever put there.
            let _ = rustix::fs::unlinkat(&fd, name, AtFlags::empty());
        }
    }
}
