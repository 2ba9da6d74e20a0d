//! Differences between two checkpoints, or between a checkpoint and the working tree, as a
//! list of changed paths with line counts and, when asked, a git-style unified diff.

use gix::bstr::ByteSlice;
use gix::objs::tree::EntryKind;

use super::tree::FileState;
use super::treediff::TreeChange;
use super::StoreError;

/// How a path changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeStatus {
    Added,
    Modified,
    Deleted,
    /// Only the executable bit changed.
    ModeChanged,
    /// File became symlink or the other way round.
    TypeChanged,
}

#[derive(Debug, Clone)]
pub struct FileChange {
    /// The tree path (lossy when it is not UTF-8; see `path_bytes`).
    pub path: String,
    pub path_bytes: Option<Vec<u8>>,
    pub status: ChangeStatus,
    pub old_mode: Option<String>,
    pub new_mode: Option<String>,
    pub binary: bool,
    pub lines_added: u64,
    pub lines_removed: u64,
}

#[derive(Debug, Clone, Default)]
pub struct DiffResult {
    pub files: Vec<FileChange>,
    /// The unified diff, when asked for.
    pub patch: Option<String>,
}

/// Describes `changes` (from [`diff_trees`](super::treediff::diff_trees)), with line counts
/// and a unified diff when asked for.
pub fn diff(
    repo: &gix::Repository,
    changes: &[TreeChange],
    with_patch: bool,
    with_counts: bool,
) -> Result<DiffResult, StoreError> {
    let mut result = DiffResult {
        files: Vec::new(),
        patch: with_patch.then(String::new),
    };
    for c in changes {
        let (a, b, path) = (c.old.as_ref(), c.new.as_ref(), &c.path);
        let status = match (a, b) {
            (None, Some(_)) => ChangeStatus::Added,
            (Some(_), None) => ChangeStatus::Deleted,
            (Some(x), Some(y)) if (x.kind == EntryKind::Link) != (y.kind == EntryKind::Link) => {
                ChangeStatus::TypeChanged
            }
            (Some(x), Some(y)) if x.id == y.id => ChangeStatus::ModeChanged,
            (Some(_), Some(_)) => ChangeStatus::Modified,
            (None, None) => continue,
        };
        let mut change = FileChange {
            path: path.to_str_lossy().into_owned(),
            path_bytes: crate::model::path_bytes(path),
            status,
            old_mode: a.map(|s| mode_text(s.kind)),
            new_mode: b.map(|s| mode_text(s.kind)),
            binary: false,
            lines_added: 0,
            lines_removed: 0,
        };
        if with_patch || with_counts {
            let old_data = a
                .map(|s| load_blob(repo, s))
                .transpose()?
                .unwrap_or_default();
            let new_data = b
                .map(|s| load_blob(repo, s))
                .transpose()?
                .unwrap_or_default();
            change.binary = is_binary(&old_data) || is_binary(&new_data);
            let text = if change.binary {
                None
            } else {
                Some(unified(
                    &old_data,
                    &new_data,
                    path,
                    a.is_some(),
                    b.is_some(),
                ))
            };
            if let Some((body, plus, minus)) = &text {
                change.lines_added = *plus;
                change.lines_removed = *minus;
                if let Some(patch) = result.patch.as_mut() {
                    patch.push_str(&header(path, a, b, status));
                    patch.push_str(body);
                }
            } else if let Some(patch) = result.patch.as_mut() {
                patch.push_str(&header(path, a, b, status));
                if old_data != new_data {
                    patch.push_str(&format!(
                        "Binary files {} and {} differ\n",
                        side_name("a", path, a),
                        side_name("b", path, b)
                    ));
                }
            }
        }
        result.files.push(change);
    }
    Ok(result)
}

fn mode_text(kind: EntryKind) -> String {
    format!("{:06o}", kind as u16)
}

fn load_blob(repo: &gix::Repository, state: &FileState) -> Result<Vec<u8>, StoreError> {
    if state.kind == EntryKind::Commit {
        return Ok(format!("Subproject commit {}\n", state.id).into_bytes());
    }
    let object = repo
        .find_object(state.id)
        .map_err(|e| StoreError::git("reading a blob", e))?;
    Ok(object.detach().data)
}

pub(crate) fn is_binary(data: &[u8]) -> bool {
    data[..data.len().min(8000)].contains(&0) || std::str::from_utf8(data).is_err()
}

fn side_name(prefix: &str, path: &[u8], state: Option<&FileState>) -> String {
    match state {
        Some(_) => quoted(prefix, path),
        None => "/dev/null".into(),
    }
}

/// `prefix/path` as git writes it in patch headers: as is when plain, else in double quotes
/// with C escapes (octal for bytes that are not printable ASCII), so a name that is not UTF-8,
/// or holds a tab or a newline, survives `git apply`.
pub(crate) fn quoted(prefix: &str, path: &[u8]) -> String {
    let plain = path
        .iter()
        .all(|&b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\');
    if plain {
        return format!("{prefix}/{}", path.to_str_lossy());
    }
    let mut out = format!("\"{prefix}/");
    for &b in path {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            0x20..0x7f => out.push(b as char),
            _ => out.push_str(&format!("\\{b:03o}")),
        }
    }
    out.push('"');
    out
}

fn header(
    path: &[u8],
    a: Option<&FileState>,
    b: Option<&FileState>,
    status: ChangeStatus,
) -> String {
    let mut h = format!("diff --git {} {}\n", quoted("a", path), quoted("b", path));
    let short = |s: &FileState| s.id.to_hex_with_len(7).to_string();
    match (a, b) {
        (None, Some(n)) => {
            h.push_str(&format!(
                "new file mode {}\nindex 0000000..{}\n",
                mode_text(n.kind),
                short(n)
            ));
        }
        (Some(o), None) => {
            h.push_str(&format!(
                "deleted file mode {}\nindex {}..0000000\n",
                mode_text(o.kind),
                short(o)
            ));
        }
        (Some(o), Some(n)) if status == ChangeStatus::TypeChanged || o.kind != n.kind => {
            h.push_str(&format!(
                "old mode {}\nnew mode {}\n",
                mode_text(o.kind),
                mode_text(n.kind)
            ));
            if o.id != n.id {
                h.push_str(&format!("index {}..{}\n", short(o), short(n)));
            }
        }
        (Some(o), Some(n)) => h.push_str(&format!(
            "index {}..{} {}\n",
            short(o),
            short(n),
            mode_text(n.kind)
        )),
        (None, None) => {}
    }
    h
}

/// The hunks between two texts, with `---`/`+++` lines, and the added/removed line counts.
pub(crate) fn unified(
    old: &[u8],
    new: &[u8],
    path: &[u8],
    has_old: bool,
    has_new: bool,
) -> (String, u64, u64) {
    let old = String::from_utf8_lossy(old);
    let new = String::from_utf8_lossy(new);
    if old == new {
        return (String::new(), 0, 0);
    }
    let diff = similar::TextDiff::from_lines(old.as_ref(), new.as_ref());
    let (mut plus, mut minus) = (0, 0);
    for change in diff.iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Insert => plus += 1,
            similar::ChangeTag::Delete => minus += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    let a = if !has_old {
        "/dev/null".to_string()
    } else {
        quoted("a", path)
    };
    let b = if !has_new {
        "/dev/null".to_string()
    } else {
        quoted("b", path)
    };
    let body = diff
        .unified_diff()
        .context_radius(3)
        .header(&a, &b)
        .to_string();
    (body, plus, minus)
}
