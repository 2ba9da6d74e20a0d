//! Cline CLI's hooks as ckpt writes them: one executable file per event, named after it
//! (`TaskStart`, `TaskComplete`, `PostToolUse`), in the project's `.clinerules/hooks/` or the
//! user's `~/.cline/hooks/`, each running `ckpt hook cline` (Cline hands it the event's JSON on
//! stdin; see [`super::cline`]). Cline asks no trust for them. A file of that name that ckpt did
//! not write is refused, never replaced.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::agent::Agent;
use super::plugin::Found;
use crate::client::commands::settings::shell_word;
use crate::client::ClientError;

/// The second line of ckpt's hook file: a file without it is not ckpt's.
const MARKER: &str = "# Written by `ckpt hook install cline`";

/// The hook files: one per event, beside the prompt's (`first`, the agent's settings file).
pub fn files(first: &Path) -> Vec<PathBuf> {
    let dir = first.parent().expect("a hook file is in a folder");
    Agent::Cline
        .events()
        .iter()
        .map(|event| dir.join(event))
        .collect()
}

/// A hook file running `exe hook cline`.
pub fn script(exe: &str) -> String {
    format!(
        "#!/bin/sh\n{MARKER}: ckpt records a checkpoint at each prompt, a step after each \
         tool and the turn's end.\n# `ckpt hook uninstall cline` removes it.\nexec {} hook \
         cline\n",
        shell_word(exe)
    )
}

/// What is at one hook file's place.
pub fn found(path: &Path) -> Found {
    let text = match crate::fs::read_text(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Found::Absent,
        Err(e) => return Found::Foreign(format!("unreadable: {e}")),
    };
    if text.lines().nth(1).is_none_or(|l| !l.starts_with(MARKER)) {
        return Found::Foreign("a hook ckpt did not write".into());
    }
    match text.lines().find_map(|l| l.strip_prefix("exec ")) {
        Some(command) => Found::Ours(command.to_string()),
        None => Found::Foreign("ckpt's hook, damaged (no `exec`)".into()),
    }
}

/// Writes the three hook files (executable, each through a new file renamed into place); a
/// file ckpt did not write at any of their places is refused before anything is written.
/// Whether any changed.
pub fn install(first: &Path, exe: &str) -> Result<bool, ClientError> {
    let files = files(first);
    for file in &files {
        if let Found::Foreign(why) = found(file) {
            return Err(ClientError::Usage(format!(
                "{}: {why}; nothing was changed (move it away to install ckpt's)",
                file.display()
            )));
        }
    }
    let text = script(exe);
    let mut changed = false;
    for file in &files {
        if crate::fs::read_text(file).ok().as_deref() == Some(text.as_str()) {
            continue;
        }
        let dir = file.parent().expect("in a folder");
        let cannot =
            |e: std::io::Error| ClientError::Usage(format!("cannot write {}: {e}", file.display()));
        std::fs::create_dir_all(dir).map_err(cannot)?;
        let tmp = dir.join(format!(
            ".{}.ckpt-tmp-{}",
            file.file_name().expect("named").to_string_lossy(),
            std::process::id()
        ));
        let _ = std::fs::remove_file(&tmp);
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o755)
            .open(&tmp)
            .and_then(|mut f| {
                f.write_all(text.as_bytes())?;
                f.sync_all()
            })
            .and_then(|()| std::fs::rename(&tmp, file));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.map_err(cannot)?;
        changed = true;
    }
    Ok(changed)
}

/// Removes ckpt's hook files; how many. One that is not ckpt's is left, and said.
pub fn uninstall(first: &Path) -> Result<usize, ClientError> {
    let files = files(first);
    if let Some((file, why)) = files.iter().find_map(|f| match found(f) {
        Found::Foreign(why) => Some((f, why)),
        _ => None,
    }) {
        return Err(ClientError::Usage(format!(
            "{}: {why}; nothing was removed",
            file.display()
        )));
    }
    let mut removed = 0;
    for file in files {
        if let Found::Ours(_) = found(&file) {
            std::fs::remove_file(&file).map_err(|e| {
                ClientError::Usage(format!("cannot remove {}: {e}", file.display()))
            })?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// `hook status`'s row for the hook files beside `first`.
pub fn status_row(first: &Path, user: bool) -> Value {
    let found: Vec<(PathBuf, Found)> = files(first)
        .into_iter()
        .map(|f| {
            let state = found(&f);
            (f, state)
        })
        .collect();
    let ours: Vec<&str> = found
        .iter()
        .filter_map(|(f, s)| match s {
            Found::Ours(_) => f.file_name().and_then(|n| n.to_str()),
            _ => None,
        })
        .collect();
    let command = found.iter().find_map(|(_, s)| match s {
        Found::Ours(c) => Some(c.clone()),
        _ => None,
    });
    let state = match (command, ours.len()) {
        (None, _) => match found.iter().find_map(|(f, s)| match s {
            Found::Foreign(why) => Some(format!("{why} at {}", f.display())),
            _ => None,
        }) {
            Some(foreign) => format!("not installed ({foreign})"),
            None => "not installed".into(),
        },
        (Some(c), 3) => format!("installed with turn ends and steps ({c}); no trust step"),
        (Some(c), _) => format!(
            "installed ({c}) for {} only: `ckpt hook install cline` adds the others",
            ours.join(", ")
        ),
    };
    json!({
        "agent": "cline",
        "scope": if user { "user" } else { "project" },
        "file": first,
        "state": state,
        "turn_events": ours.iter().filter(|e| **e != "TaskStart").collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hook_files_are_ckpts_executables_and_others_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let first = dir.path().join("hooks/TaskStart");
        assert!(install(&first, "/opt/my tools/ckpt").unwrap());
        assert!(!install(&first, "/opt/my tools/ckpt").unwrap());
        for file in files(&first) {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&file).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o755, "{}", file.display());
            assert_eq!(
                found(&file),
                Found::Ours("'/opt/my tools/ckpt' hook cline".into())
            );
        }
        assert!(status_row(&first, false)["state"]
            .as_str()
            .unwrap()
            .starts_with("installed with turn ends"));
        let mine = dir.path().join("hooks/TaskComplete");
        std::fs::write(&mine, "#!/bin/sh\necho mine\n").unwrap();
        assert!(uninstall(&first).is_err());
        assert!(install(&first, "/bin/ckpt").is_err());
        assert_eq!(
            std::fs::read_to_string(&mine).unwrap(),
            "#!/bin/sh\necho mine\n"
        );
        std::fs::remove_file(&mine).unwrap();
        assert_eq!(uninstall(&first).unwrap(), 2);
        assert!(files(&first).iter().all(|f| !f.exists()));
    }
}
