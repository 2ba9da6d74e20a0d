//! Files of a test project: written, made executable or a symlink, and the whole tree as a map
//! to compare.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Writes `content` to `root/rel`, creating parents.
pub fn write(root: &Path, rel: &str, content: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

pub fn chmod(root: &Path, rel: &str, mode: u32) {
    std::fs::set_permissions(root.join(rel), std::fs::Permissions::from_mode(mode)).unwrap();
}

pub fn symlink(root: &Path, rel: &str, target: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, path).unwrap();
}

/// Every file and symlink below `root` (nothing excluded, symlinks not followed): path ->
/// kind, permission bits, and content or target.
pub fn tree_state(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            // Folders are implied by their files: git (and so a checkpoint) has no empty ones.
            let desc = if meta.file_type().is_symlink() {
                format!("link -> {}", std::fs::read_link(&path).unwrap().display())
            } else if meta.is_dir() {
                stack.push(path.clone());
                continue;
            } else {
                let content = std::fs::read(&path).unwrap();
                format!(
                    "file {:o} {}",
                    meta.permissions().mode() & 0o777,
                    String::from_utf8_lossy(&content)
                )
            };
            out.insert(rel, desc);
        }
    }
    out
}
