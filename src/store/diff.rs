//! Differences between two checkpoints, or between a checkpoint and the working tree, as a
//! list of changed paths with line counts and, when asked, a git-style unified diff.

use gix::bstr::ByteSlice;
use gix::objs::tree::EntryKind;

use std::ops::ControlFlow;

use super::tree::FileState;
use super::treediff::{changes_in_order, TreeChange};
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
    /// When the answer was cut (see [`Page`]): whether files were left out of the list, and
    /// where the patch's next part starts.
    pub files_cut: bool,
    pub next_offset: Option<u64>,
}

/// How much of a diff to give: at most `max_files` entries of the file list (all when None),
/// and the patch's text from byte `offset` on, at most `max_bytes` of it (all when None). The
/// walk stops once both are full, so a page of a huge diff costs what comes before it, not
/// the whole diff.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Page {
    pub max_files: Option<usize>,
    pub offset: u64,
    pub max_bytes: Option<u64>,
}

impl Page {
    pub fn is_whole(&self) -> bool {
        *self == Page::default()
    }
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
        patch: with_patch.then(String::new),
        ..DiffResult::default()
    };
    for c in changes {
        let Some((change, text)) = describe(repo, c, with_patch || with_counts)? else {
            continue;
        };
        if let Some(patch) = result.patch.as_mut() {
            patch.push_str(&text);
        }
        result.files.push(change);
    }
    Ok(result)
}

/// The diff from tree `old` to tree `new` within `paths`, as much of it as `page` asks for
/// (see [`Page`]).
pub fn diff_page(
    repo: &gix::Repository,
    trees: (Option<gix::ObjectId>, Option<gix::ObjectId>),
    paths: &[gix::bstr::BString],
    (with_patch, with_counts): (bool, bool),
    page: Page,
) -> Result<DiffResult, StoreError> {
    let max_files = page.max_files.unwrap_or(usize::MAX);
    let end = page.max_bytes.map(|m| page.offset.saturating_add(m));
    let mut result = DiffResult {
        patch: with_patch.then(String::new),
        ..DiffResult::default()
    };
    let mut at = 0u64;
    let mut patch_full = !with_patch;
    let complete = changes_in_order(repo, trees.0, trees.1, paths, &mut |c| {
        let files_full = result.files.len() >= max_files;
        if files_full && patch_full {
            return Ok(ControlFlow::Break(()));
        }
        let text = (with_counts && !files_full) || !patch_full;
        let Some((change, chunk)) = describe(repo, &c, text)? else {
            return Ok(ControlFlow::Continue(()));
        };
        if !files_full {
            result.files.push(change);
        }
        if let (false, Some(patch)) = (patch_full, result.patch.as_mut()) {
            let (start, stop) = (at, at + chunk.len() as u64);
            at = stop;
            let from = page.offset.max(start);
            let to = end.map_or(stop, |e| e.min(stop));
            if from < to {
                patch.push_str(&chunk[cut(&chunk, from - start)..cut(&chunk, to - start)]);
            }
            if end.is_some_and(|e| stop >= e) {
                patch_full = true;
                // Where the next part starts, if any text is left in this file's part.
                result.next_offset = end.filter(|e| *e < stop);
            }
        }
        Ok(ControlFlow::Continue(()))
    })?;
    if !complete {
        // Text is left after this part (in later files) and so are files.
        if with_patch && result.next_offset.is_none() {
            result.next_offset = end;
        }
        result.files_cut = max_files > 0 && result.files.len() >= max_files;
    }
    Ok(result)
}

/// The nearest character boundary at or before byte `at` of `text`.
fn cut(text: &str, at: u64) -> usize {
    let mut at = (at as usize).min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// One change described: its entry of the file list and, when `with_text`, its line counts
/// and its part of the patch (a header and the hunks, or `Binary files … differ`). None for a
/// change that is none.
fn describe(
    repo: &gix::Repository,
    c: &TreeChange,
    with_text: bool,
) -> Result<Option<(FileChange, String)>, StoreError> {
    let (a, b, path) = (c.old.as_ref(), c.new.as_ref(), &c.path);
    let status = match (a, b) {
        (None, Some(_)) => ChangeStatus::Added,
        (Some(_), None) => ChangeStatus::Deleted,
        (Some(x), Some(y)) if (x.kind == EntryKind::Link) != (y.kind == EntryKind::Link) => {
            ChangeStatus::TypeChanged
        }
        (Some(x), Some(y)) if x.id == y.id => ChangeStatus::ModeChanged,
        (Some(_), Some(_)) => ChangeStatus::Modified,
        (None, None) => return Ok(None),
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
    let mut text = String::new();
    if !with_text {
        return Ok(Some((change, text)));
    }
    let old_data = a
        .map(|s| load_blob(repo, s))
        .transpose()?
        .unwrap_or_default();
    let new_data = b
        .map(|s| load_blob(repo, s))
        .transpose()?
        .unwrap_or_default();
    change.binary = is_binary(&old_data) || is_binary(&new_data);
    text.push_str(&header(path, a, b, status));
    if change.binary {
        if old_data != new_data {
            text.push_str(&format!(
                "Binary files {} and {} differ\n",
                side_name("a", path, a),
                side_name("b", path, b)
            ));
        }
    } else {
        let (body, plus, minus) = unified(&old_data, &new_data, path, a.is_some(), b.is_some());
        change.lines_added = plus;
        change.lines_removed = minus;
        text.push_str(&body);
    }
    Ok(Some((change, text)))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A patch read page by page, each as long as asked (a character never split), is the whole
    /// patch; a file list cut at a number says how many files there are.
    #[test]
    fn pages_of_a_diff_make_the_whole_diff() {
        let dir = tempfile::tempdir().unwrap();
        let repo = gix::init_bare(dir.path()).unwrap();
        let tree = |files: &[(&str, String)]| {
            let empty = gix::ObjectId::empty_tree(gix::hash::Kind::Sha1);
            let mut editor = repo.edit_tree(empty).unwrap();
            for (path, content) in files {
                let blob = repo.write_blob(content.as_bytes()).unwrap().detach();
                editor.upsert(*path, EntryKind::Blob, blob).unwrap();
            }
            editor.write().unwrap().detach()
        };
        let old = tree(&[("a.txt", "one\n".into()), ("z/é.txt", "é\n".repeat(50))]);
        let new = tree(&[
            ("a.txt", "two\n".into()),
            ("b.bin", "\0\u{1}".into()),
            ("z/é.txt", "è€\n".repeat(50)),
        ]);
        let trees = (Some(old), Some(new));
        let whole = diff_page(&repo, trees, &[], (true, true), Page::default()).unwrap();
        let whole_patch = whole.patch.clone().unwrap();
        assert_eq!(whole.files.len(), 3);
        assert_eq!((whole.files_cut, whole.next_offset), (false, None));
        for size in [1, 7, 64, 1000] {
            let (mut text, mut offset) = (String::new(), Some(0));
            while let Some(at) = offset {
                let page = Page {
                    max_files: Some(0),
                    offset: at,
                    max_bytes: Some(size),
                };
                let part = diff_page(&repo, trees, &[], (true, false), page).unwrap();
                let patch = part.patch.unwrap();
                assert!(patch.len() as u64 <= size + 3, "{size}: {}", patch.len());
                text.push_str(&patch);
                assert!(part.files.is_empty());
                offset = part.next_offset;
            }
            assert_eq!(text, whole_patch, "pages of {size}");
        }
        let cut = Page {
            max_files: Some(2),
            ..Page::default()
        };
        let listed = diff_page(&repo, trees, &[], (false, true), cut).unwrap();
        assert_eq!(listed.files.len(), 2);
        assert!(listed.files_cut);
        assert_eq!(listed.files[0].lines_added, 1);
        assert!(listed.files[1].binary);
    }
}
