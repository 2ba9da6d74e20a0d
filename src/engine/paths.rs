//! Which paths the writer of project files may touch: a tree path that could escape the root or
//! reach into a repository is refused, and every parent below the root must be a real folder
//! (never a symlink, never followed or replaced).

use std::collections::BTreeSet;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use gix::bstr::{BStr, BString, ByteSlice};

use crate::model::SkipReason;

/// A reason to leave a path alone.
pub type Skip = (SkipReason, String);

/// Checks every ancestor of `path` below `root` is a real folder (not a symlink, never
/// followed or replaced), creating missing ones when `create` is set. In a dry run
/// (`would_delete` is the set of paths the run would delete) nothing is created, and a parent
/// that would be deleted first counts as room.
pub fn check_parents(
    root: &Path,
    path: &BStr,
    create: bool,
    would_delete: Option<&BTreeSet<BString>>,
) -> Result<(), Skip> {
    let mut cur = PathBuf::from(root);
    let mut rel = BString::default();
    let components: Vec<&[u8]> = path.split(|b| *b == b'/').collect();
    for comp in &components[..components.len().saturating_sub(1)] {
        cur.push(std::ffi::OsStr::from_bytes(comp));
        rel = crate::filter::join_rel(&rel, comp);
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.is_dir() => {}
            Ok(_) if would_delete.is_some_and(|d| d.contains(&rel)) => return Ok(()),
            Ok(m) => {
                let what = if m.file_type().is_symlink() {
                    "a symlink"
                } else {
                    "not a folder"
                };
                let why = format!(
                    "parent `{}` is {what}; never followed or replaced",
                    rel.to_str_lossy()
                );
                return Err((SkipReason::ParentNotFolder, why));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
                if would_delete.is_some() {
                    return Ok(());
                }
                crate::fs::create_project_dir(&cur).map_err(|e| {
                    let why = format!("cannot create folder `{}`: {e}", rel.to_str_lossy());
                    (SkipReason::Unwritable, why)
                })?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                let why = format!("cannot stat parent `{}`: {e}", rel.to_str_lossy());
                return Err((SkipReason::Unreadable, why));
            }
        }
    }
    Ok(())
}

/// Refuses tree paths that could escape the root or reach into a repository.
pub fn safe_tree_path(path: &BStr) -> Result<(), Skip> {
    for comp in path.split(|b| *b == b'/') {
        let bad = comp.is_empty()
            || comp == b"."
            || comp == b".."
            || comp.contains(&0)
            || comp.eq_ignore_ascii_case(b".git");
        if bad {
            let why = format!(
                "unsafe path in checkpoint (component {:?}); refused",
                comp.as_bstr()
            );
            return Err((SkipReason::UnsafePath, why));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_paths_are_refused() {
        for bad in [
            "../x",
            "a/../../x",
            "a//b",
            ".git/config",
            "sub/.GIT/hooks/x",
            "./a",
        ] {
            assert!(safe_tree_path(bad.as_bytes().as_bstr()).is_err(), "{bad}");
        }
        for good in [
            "a",
            "a/b.txt",
            ".github/workflows/ci.yml",
            "..foo",
            ".gitignore",
        ] {
            assert!(safe_tree_path(good.as_bytes().as_bstr()).is_ok(), "{good}");
        }
    }
}
