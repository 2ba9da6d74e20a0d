//! Agents' settings files, edited as a person would: merged into what is there (the user's
//! other settings keep their content and order), a file that is not valid JSON refused and never
//! overwritten, written through a temporary file and a rename under a lock on the folder, so
//! concurrent edits each merge into what the one before wrote. `ckpt hook install` and `ckpt mcp
//! install` edit through here.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::client::ClientError;

/// `s` as one word for `sh -c` (agents run hook commands through a shell).
pub fn shell_word(s: &str) -> String {
    let plain = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

pub fn home() -> Result<PathBuf, ClientError> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .ok_or_else(|| ClientError::Usage("HOME is not set".into()))
}

/// Reads a settings file: empty when absent; an error naming the file when it is not a JSON
/// object.
pub fn read_settings(path: &Path) -> Result<Map<String, Value>, ClientError> {
    read_settings_text(path).map(|(_, map)| map)
}

/// [`read_settings`], with the file's text (empty when absent).
fn read_settings_text(path: &Path) -> Result<(String, Map<String, Value>), ClientError> {
    // Never blocks on a FIFO or reads a device: only a regular file (symlinks followed, as the
    // agents follow them), at most 16 MiB.
    let text = match crate::fs::read_text(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok((String::new(), Map::new()))
        }
        Err(e) => {
            return Err(ClientError::Usage(format!(
                "cannot read {}: {e}",
                path.display()
            )))
        }
    };
    if text.trim().is_empty() {
        return Ok((text, Map::new()));
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => Ok((text, map)),
        Ok(_) => Err(ClientError::Usage(format!(
            "{} is not a JSON object; fix or move it, then run this again (nothing was changed)",
            path.display()
        ))),
        Err(e) => Err(ClientError::Usage(format!(
            "{} is not valid JSON ({e}); fix or move it, then run this again (nothing was changed)",
            path.display()
        ))),
    }
}

/// The file a settings path names: itself, or, for a symlink (dotfiles kept elsewhere), its
/// target, which is what gets replaced (the link stays a link).
pub fn settings_target(path: &Path) -> Result<PathBuf, ClientError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path).map_err(|e| {
            ClientError::Usage(format!("{} is a broken symlink: {e}", path.display()))
        }),
        _ => Ok(path.to_path_buf()),
    }
}

/// How long an install waits for another ckpt editing the same folder's settings.
const EDIT_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

/// Reads the settings at `path`, lets `change` edit them, and writes them back if it says it
/// changed them; whether it did. Another `ckpt hook install|uninstall` on the same folder
/// waits (a lock on the folder, at most [`EDIT_PATIENCE`]), so that concurrent installs each
/// merge into what the one before wrote and every entry stays.
pub fn edit_settings(
    path: &Path,
    change: impl FnMut(&mut Map<String, Value>) -> Result<bool, ClientError>,
) -> Result<bool, ClientError> {
    edit_settings_in_place(path, change, |_| None)
}

/// [`edit_settings`], the file edited as text by `in_place` where it can be (the user's
/// formatting kept) and that text holds exactly what `change` made; else written whole.
pub fn edit_settings_in_place(
    path: &Path,
    mut change: impl FnMut(&mut Map<String, Value>) -> Result<bool, ClientError>,
    in_place: impl FnOnce(&str) -> Option<String>,
) -> Result<bool, ClientError> {
    let target = settings_target(path)?;
    let io =
        |e: std::io::Error| ClientError::Usage(format!("cannot write {}: {e}", target.display()));
    let dir = target.parent().unwrap_or(Path::new("/"));
    if !dir.is_dir() {
        // Nothing there yet: only an edit that adds makes the folder.
        if !change(&mut Map::new())? {
            return Ok(false);
        }
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let _lock = lock_folder(dir).map_err(io)?;
    let (text, mut settings) = read_settings_text(path)?;
    if !change(&mut settings)? {
        return Ok(false);
    }
    let expected = Value::Object(settings.clone());
    let edited =
        in_place(&text).filter(|t| serde_json::from_str::<Value>(t).is_ok_and(|v| v == expected));
    match edited {
        Some(text) => write_text(&target, &text)?,
        None => write_settings(&target, &settings)?,
    }
    Ok(true)
}

/// Takes an exclusive lock on the folder `dir` (released when the descriptor closes), waiting
/// for it at most [`EDIT_PATIENCE`].
pub fn lock_folder(dir: &Path) -> std::io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::{FlockOperation, Mode, OFlags};
    let fd = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let deadline = std::time::Instant::now() + EDIT_PATIENCE;
    loop {
        match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(fd),
            Err(rustix::io::Errno::WOULDBLOCK) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(std::io::Error::other(format!(
                    "another ckpt kept {} locked for {EDIT_PATIENCE:?}",
                    dir.display()
                )))
            }
            Err(e) => return Err(e.into()),
        }
    }
}

static TEMP_COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Writes `target` (not a symlink) through a temporary file and a rename, keeping the file's
/// permissions.
pub fn write_settings(target: &Path, settings: &Map<String, Value>) -> Result<(), ClientError> {
    let mut text = serde_json::to_string_pretty(settings).expect("JSON values serialise");
    text.push('\n');
    write_text(target, &text)
}

/// Writes `text` as `path` (not a symlink) through a temporary file and a rename, keeping the
/// file's permissions.
pub fn write_text(path: &Path, text: &str) -> Result<(), ClientError> {
    let io =
        |e: std::io::Error| ClientError::Usage(format!("cannot write {}: {e}", path.display()));
    // A name of this process's own, created exclusively: never written through a symlink (a
    // cloned repository could plant one beside the settings), never another writer's file.
    let n = TEMP_COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("ckpt-tmp-{}-{n}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut file| {
            std::io::Write::write_all(&mut file, text.as_bytes())?;
            if let Ok(meta) = std::fs::metadata(path) {
                file.set_permissions(meta.permissions())?;
            }
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(io)
}
