//! Where an agent keeps its sessions, and reading and writing there without being led
//! elsewhere. A prompt's checkpoint names its session file (the hook's `transcript_path`), but
//! that name is only trusted inside the agent's own folder of sessions (Claude Code's
//! `projects/`, Codex's `sessions/`, Gemini CLI's `tmp/`, Qwen Code's `projects/`, Copilot CLI's `session-state/`, found as the agent finds them), in the
//! shape the agent gives it; below that folder every component is opened without following a
//! symlink, so a session file or a date folder swapped for a link cannot lead a read or a fork
//! out of it.

use std::ffi::OsStr;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use super::{Agent, CannotFork};

/// The folder under which `agent` keeps every session file: the folder itself may be a link
/// (a user's dotfiles); nothing below it may.
pub fn sessions_root(agent: Agent) -> Option<PathBuf> {
    use crate::client::agents::{codex_trust, gemini_trust};
    let home = PathBuf::from(std::env::var_os("HOME")?);
    Some(match agent {
        Agent::ClaudeCode => std::env::var_os("CLAUDE_CONFIG_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(".claude"))
            .join("projects"),
        Agent::Codex => codex_trust::codex_home(&home).join("sessions"),
        Agent::Gemini => gemini_trust::gemini_dir(&home).join("tmp"),
        Agent::Qwen => home.join(".qwen/projects"),
        Agent::Copilot => home.join(".copilot/session-state"),
        Agent::Cline => crate::client::agents::cline::sessions_root(&home),
        _ => return None,
    })
}

/// A session file inside its agent's folder: the folder, and the file's path below it (plain
/// names only).
#[derive(Debug, Clone)]
pub struct Located {
    pub root: PathBuf,
    pub rel: PathBuf,
}

impl Located {
    /// Where `path` is, if it is inside `agent`'s folder in the shape the agent gives its
    /// session `id`: Claude Code's `<folder>/<id>.jsonl`, Codex's
    /// `YYYY/MM/DD/rollout-…-<id>.jsonl`, Gemini CLI's `<project>/chats/session-…-<id
    /// prefix>.jsonl`.
    pub fn of(agent: Agent, path: &Path, id: &str) -> Result<Located, CannotFork> {
        let root = sessions_root(agent).ok_or_else(|| {
            CannotFork(format!(
                "ckpt does not know where {} keeps sessions",
                agent.name()
            ))
        })?;
        Self::within(root, agent, path, id)
    }

    /// [`Located::of`] with the agent's folder given.
    pub fn within(
        root: PathBuf,
        agent: Agent,
        path: &Path,
        id: &str,
    ) -> Result<Located, CannotFork> {
        let not_there = || {
            CannotFork(format!(
                "{} is not where {} keeps session {id} (below {})",
                path.display(),
                agent.name(),
                root.display()
            ))
        };
        let rel = path.strip_prefix(&root).map_err(|_| not_there())?;
        let names: Vec<&OsStr> = rel
            .components()
            .map(|c| match c {
                Component::Normal(name) => Ok(name),
                _ => Err(not_there()),
            })
            .collect::<Result<_, _>>()?;
        let file = names
            .last()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        if agent == Agent::Cline {
            // `<id>/<id>.messages.json`: one JSON document.
            let fits = names.len() == 2 && names[0] == id && file == format!("{id}.messages.json");
            return match fits {
                true => Ok(Located {
                    rel: rel.to_path_buf(),
                    root,
                }),
                false => Err(not_there()),
            };
        }
        let Some(stem) = file.strip_suffix(".jsonl") else {
            return Err(not_there());
        };
        let fits = match agent {
            Agent::ClaudeCode => names.len() == 2 && stem == id,
            Agent::Codex => names.len() == 4 && stem.starts_with("rollout-") && stem.ends_with(id),
            Agent::Qwen => names.len() == 3 && names[1] == "chats" && stem == id,
            Agent::Copilot => names.len() == 2 && names[0] == id && stem == "events",
            _ => {
                names.len() == 3
                    && names[1] == "chats"
                    && stem.starts_with("session-")
                    && id.get(..8).is_some_and(|prefix| stem.ends_with(prefix))
            }
        };
        match fits {
            true => Ok(Located {
                rel: rel.to_path_buf(),
                root,
            }),
            false => Err(not_there()),
        }
    }

    pub fn path(&self) -> PathBuf {
        self.root.join(&self.rel)
    }
}

/// Opens `rel` below `root` for reading: never through a symlink, never blocking on a FIFO,
/// a regular file only.
pub fn open(root: &Path, rel: &Path) -> std::io::Result<std::fs::File> {
    let dir = crate::fs::open_dir(root)?;
    let file = crate::fs::open_beneath(dir.as_fd(), rel.as_os_str().as_encoded_bytes())?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// Creates `root/folder/name` holding `bytes`: each folder below `root` made or opened without
/// following a symlink, the file written under a temporary name (which no agent lists),
/// flushed, then renamed into place without replacing anything, and the folder flushed. A
/// failure leaves no file behind.
pub fn write_new(root: &Path, folder: &Path, name: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let mut dir = crate::fs::open_dir(root)?;
    for component in folder.components() {
        let Component::Normal(part) = component else {
            return Err(std::io::Error::other("a folder that is not a plain name"));
        };
        match rustix::fs::mkdirat(&dir, part, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        dir = rustix::fs::openat(&dir, part, flags, Mode::empty())?;
    }
    let tmp = format!(".ckpt-fork-{}-{name}.tmp", std::process::id());
    let written = write_in(&dir, &tmp, name, bytes);
    if written.is_err() {
        let _ = rustix::fs::unlinkat(&dir, tmp.as_str(), rustix::fs::AtFlags::empty());
    }
    written.map(|()| root.join(folder).join(name))
}

/// Creates the folder `root/folder` holding `files`: the folders above it made or opened
/// without following a symlink, the files written and flushed in a folder under a temporary
/// name (which no agent lists), then that folder renamed into place without replacing anything
/// (an agent listing its sessions sees the whole session or none). A failure leaves nothing.
pub fn write_new_folder(
    root: &Path,
    folder: &Path,
    files: &[(&str, &[u8])],
) -> std::io::Result<PathBuf> {
    let name = folder
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| std::io::Error::other("a folder that is not a plain name"))?;
    let parent = folder.parent().unwrap_or(Path::new(""));
    let mut dir = crate::fs::open_dir(root)?;
    for component in parent.components() {
        let Component::Normal(part) = component else {
            return Err(std::io::Error::other("a folder that is not a plain name"));
        };
        match rustix::fs::mkdirat(&dir, part, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        dir = rustix::fs::openat(&dir, part, flags, Mode::empty())?;
    }
    let tmp = format!(".ckpt-fork-{}-{name}.tmp", std::process::id());
    rustix::fs::mkdirat(&dir, tmp.as_str(), Mode::from_raw_mode(0o700))?;
    let written = (|| -> std::io::Result<()> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let inner = rustix::fs::openat(&dir, tmp.as_str(), flags, Mode::empty())?;
        for (file, bytes) in files {
            let tmp_file = format!(".{file}.tmp");
            write_in(&inner, &tmp_file, file, bytes)?;
        }
        rustix::fs::renameat_with(
            &dir,
            tmp.as_str(),
            &dir,
            name,
            rustix::fs::RenameFlags::NOREPLACE,
        )?;
        Ok(rustix::fs::fsync(&dir)?)
    })();
    if written.is_err() {
        // Only what this call wrote: the temporary folder and the files in it.
        if let Ok(inner) = rustix::fs::openat(
            &dir,
            tmp.as_str(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            for (file, _) in files {
                let _ = rustix::fs::unlinkat(&inner, *file, rustix::fs::AtFlags::empty());
                let _ = rustix::fs::unlinkat(
                    &inner,
                    format!(".{file}.tmp").as_str(),
                    rustix::fs::AtFlags::empty(),
                );
            }
        }
        let _ = rustix::fs::unlinkat(&dir, tmp.as_str(), rustix::fs::AtFlags::REMOVEDIR);
    }
    written.map(|()| root.join(folder))
}

fn write_in(dir: &OwnedFd, tmp: &str, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, tmp, flags, Mode::from_raw_mode(0o600))?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)?;
    file.sync_all()?;
    rustix::fs::renameat_with(dir, tmp, dir, name, rustix::fs::RenameFlags::NOREPLACE)?;
    rustix::fs::fsync(dir)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_only_found_inside_its_agents_folder_in_its_shape() {
        let root = PathBuf::from("/h/.codex/sessions");
        let id = "01a2";
        let at = |p: &str| Located::within(root.clone(), Agent::Codex, Path::new(p), id);
        let found = at("/h/.codex/sessions/2026/11/27/rollout-x-01a2.jsonl").unwrap();
        assert_eq!(found.rel, Path::new("2026/11/27/rollout-x-01a2.jsonl"));
        for bad in [
            "/etc/passwd",
            "/h/.codex/sessions/../../../etc/2026/11/27/rollout-x-01a2.jsonl",
            "/h/.codex/sessions/2026/11/rollout-x-01a2.jsonl",
            "/h/.codex/sessions/2026/11/27/other-01a2.jsonl",
            "/h/.codex/sessions/2026/11/27/rollout-x-99.jsonl",
            "/h/.codex/elsewhere/2026/11/27/rollout-x-01a2.jsonl",
        ] {
            assert!(at(bad).is_err(), "{bad}");
        }
    }

    /// Below the agent's folder nothing is followed: a date folder or a session file that is
    /// a symlink is refused, for reading and for writing a fork.
    #[test]
    fn symlinks_below_the_agents_folder_are_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let (root, outside) = (dir.path().join("sessions"), dir.path().join("outside"));
        std::fs::create_dir_all(root.join("2026/11")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("s.jsonl"), "{}\n").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("2026/11/27")).unwrap();
        assert!(open(&root, Path::new("2026/11/27/s.jsonl")).is_err());
        assert!(write_new(&root, Path::new("2026/11/27"), "new.jsonl", b"x\n").is_err());
        assert!(!outside.join("new.jsonl").exists());
        std::fs::create_dir_all(root.join("2026/12/01")).unwrap();
        std::os::unix::fs::symlink(outside.join("s.jsonl"), root.join("2026/12/01/l.jsonl"))
            .unwrap();
        assert!(open(&root, Path::new("2026/12/01/l.jsonl")).is_err());
        // A FIFO is not read (and never blocks).
        rustix::fs::mknodat(
            rustix::fs::CWD,
            root.join("2026/12/01/f.jsonl"),
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        assert!(open(&root, Path::new("2026/12/01/f.jsonl")).is_err());
    }

    #[test]
    fn a_new_folder_never_replaces_one_and_a_failure_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let files: [(&str, &[u8]); 2] = [("events.jsonl", b"{}\n"), ("workspace.yaml", b"id: x\n")];
        let made = write_new_folder(dir.path(), Path::new("x"), &files).unwrap();
        assert_eq!(
            std::fs::read(made.join("workspace.yaml")).unwrap(),
            b"id: x\n"
        );
        let again: [(&str, &[u8]); 1] = [("events.jsonl", b"other\n")];
        assert!(write_new_folder(dir.path(), Path::new("x"), &again).is_err());
        assert_eq!(std::fs::read(made.join("events.jsonl")).unwrap(), b"{}\n");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["x"], "no temporary folder is left");
    }

    #[test]
    fn a_new_file_never_replaces_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_new(dir.path(), Path::new("sub/day"), "s.jsonl", b"one\n").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"one\n");
        let again = write_new(dir.path(), Path::new("sub/day"), "s.jsonl", b"two\n");
        assert!(again.is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"one\n");
        let names: Vec<_> = std::fs::read_dir(dir.path().join("sub/day"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["s.jsonl"], "no temporary file is left");
    }
}
