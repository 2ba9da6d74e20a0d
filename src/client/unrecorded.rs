//! Prompts an agent's hook could not record, and why: kept by the client in
//! `<data dir>/unrecorded.jsonl` (one JSON object a line, the newest last, at most
//! [`KEPT`]), so that no prompt goes unrecorded without the user learning it: `ckpt status`
//! counts them and `ckpt log` shows them among the prompts. The daemon need not be running
//! (often the reason itself), so the client writes and reads the file.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file's name in the data directory.
pub const FILE: &str = "unrecorded.jsonl";
/// Entries kept when the file is cut (the oldest go).
const KEPT: usize = 200;
/// The file is cut once it grows past this.
const MAX_BYTES: u64 = 1 << 20;
/// Largest prompt text kept for an entry (the rest is cut, marked with `…`).
const PROMPT_CHARS: usize = 2000;

/// One prompt that was not recorded.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Unrecorded {
    /// When the hook ran (RFC 3339).
    pub at: String,
    pub agent: String,
    /// The folder the agent worked in.
    pub cwd: PathBuf,
    /// The dialog it would have been recorded on (the agent's session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialog: Option<String>,
    /// The prompt (cut at 2,000 characters); empty when the hook's input could not be read.
    pub prompt: String,
    /// Why it was not recorded.
    pub why: String,
}

impl Unrecorded {
    pub fn new(agent: &str, cwd: &Path, dialog: Option<&str>, prompt: &str, why: &str) -> Self {
        let mut text: String = prompt.chars().take(PROMPT_CHARS).collect();
        if text.len() < prompt.len() {
            text.push('…');
        }
        Unrecorded {
            at: jiff::Timestamp::now().to_string(),
            agent: agent.to_string(),
            cwd: cwd.to_path_buf(),
            dialog: dialog.map(String::from),
            prompt: text,
            why: why.to_string(),
        }
    }

    /// Whether the prompt came from inside `root` (a project), or from a folder that holds it.
    pub fn concerns(&self, root: &Path) -> bool {
        self.cwd.starts_with(root) || root.starts_with(&self.cwd)
    }
}

/// Appends `entry` to the data directory's list (one write of one line); the list is cut to
/// the newest [`KEPT`] when the file has grown past [`MAX_BYTES`]. Failures are ignored: this is the
/// last resort of a hook that must not fail.
pub fn add(data_dir: &Path, entry: &Unrecorded) {
    let Ok(mut line) = serde_json::to_string(entry) else {
        return;
    };
    line.push('\n');
    let path = data_dir.join(FILE);
    let appended = {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(data_dir);
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&path)
            .and_then(|mut f| f.write_all(line.as_bytes()))
    };
    if appended.is_ok() && std::fs::metadata(&path).is_ok_and(|m| m.len() > MAX_BYTES) {
        let kept = read(data_dir);
        let start = kept.len().saturating_sub(KEPT);
        let text: String = kept[start..]
            .iter()
            .filter_map(|e| serde_json::to_string(e).ok())
            .map(|l| l + "\n")
            .collect();
        let tmp = data_dir.join(format!("{FILE}.tmp-{}", std::process::id()));
        if std::fs::write(&tmp, text).is_ok() {
            let _ = std::fs::rename(&tmp, &path);
        }
    }
}

/// Forgets every entry (they have been seen); how many there were.
pub fn clear(data_dir: &Path) -> usize {
    let n = read(data_dir).len();
    let _ = std::fs::remove_file(data_dir.join(FILE));
    n
}

/// Every entry kept, oldest first (lines that do not parse are skipped).
pub fn read(data_dir: &Path) -> Vec<Unrecorded> {
    let Some(bytes) = crate::fs::read_small(&data_dir.join(FILE), 16 << 20) else {
        return Vec::new();
    };
    String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_kept_newest_last_and_the_list_stays_short() {
        let dir = tempfile::tempdir().unwrap();
        let long = "p".repeat(5000);
        for n in 0..600 {
            let e = Unrecorded::new("codex", Path::new("/w"), None, &long, &format!("why {n}"));
            add(dir.path(), &e);
        }
        let kept = read(dir.path());
        assert!(kept.len() < 600 && kept.len() >= KEPT, "{}", kept.len());
        assert_eq!(kept.last().unwrap().why, "why 599");
        assert_eq!(kept[0].prompt.chars().count(), PROMPT_CHARS + 1);
        assert!(kept[0].concerns(Path::new("/w/sub")) && kept[0].concerns(Path::new("/")));
        assert!(!kept[0].concerns(Path::new("/x")));
    }
}
