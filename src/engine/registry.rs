//! The registered projects (`projects.json` in the data dir), which make registrations survive
//! daemon restarts, and the folders that must not become projects unless asked for by name.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

#[derive(Debug, Default, Serialize, Deserialize)]
struct RegistryFile {
    projects: Vec<RegistryEntry>,
}

#[derive(Debug, Serialize, Deserialize)]
struct RegistryEntry {
    root: PathBuf,
}

/// The registered roots; a missing or unreadable file is an empty registry (logged).
pub fn load_registry(path: &Path) -> Vec<PathBuf> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            tracing::error!(path = %path.display(), error = %e, "cannot read the project registry");
            return Vec::new();
        }
    };
    match serde_json::from_str::<RegistryFile>(&text) {
        Ok(file) => file.projects.into_iter().map(|e| e.root).collect(),
        Err(e) => {
            tracing::error!(path = %path.display(), error = %e, "project registry is corrupt; starting with none");
            Vec::new()
        }
    }
}

/// Writes the registry atomically (temp file + rename).
pub fn save_registry(path: &Path, roots: &[PathBuf]) -> std::io::Result<()> {
    let file = RegistryFile {
        projects: roots
            .iter()
            .map(|r| RegistryEntry { root: r.clone() })
            .collect(),
    };
    let text = serde_json::to_string_pretty(&file).map_err(std::io::Error::other)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Folders of the system itself: watching one would copy the machine's configuration or
/// programs into a store, or read a virtual filesystem.
const SYSTEM_FOLDERS: &[&str] = &[
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/home",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/media",
    "/mnt",
    "/opt",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/srv",
    "/sys",
    "/tmp",
    "/usr",
    "/usr/bin",
    "/usr/lib",
    "/usr/local",
    "/usr/local/bin",
    "/usr/share",
    "/var",
    "/var/lib",
    "/var/tmp",
];
/// Virtual filesystems: no folder in them is a project.
const VIRTUAL_FOLDERS: &[&str] = &["/dev", "/proc", "/run", "/sys"];

/// Why `root` (canonical) is most likely a slip as a project, if it is: `/`, a folder of the
/// system, the home folder (`home`, canonical) or one that holds it. `ckpt watch` takes such a
/// folder only with `--force`; an agent's hook never makes one a project (a folder watched by
/// name still records its prompts).
pub fn dangerous_root(root: &Path, home: Option<&Path>) -> Option<&'static str> {
    if root == Path::new("/") {
        Some("the root of the filesystem")
    } else if home == Some(root) {
        Some("your home folder")
    } else if home.is_some_and(|h| h.starts_with(root)) {
        Some("a folder that holds your home folder")
    } else if SYSTEM_FOLDERS.iter().any(|f| root == Path::new(f))
        || VIRTUAL_FOLDERS.iter().any(|f| root.starts_with(f))
    {
        Some("a folder of the system")
    } else {
        None
    }
}

/// `$HOME`, canonical, if set.
pub fn home_dir() -> Option<PathBuf> {
    let home = PathBuf::from(std::env::var_os("HOME")?);
    Some(std::fs::canonicalize(&home).unwrap_or(home))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_folders_and_home_are_dangerous_projects_below_them_are_not() {
        let home = Path::new("/home/ann");
        for bad in [
            "/",
            "/etc",
            "/usr",
            "/home",
            "/home/ann",
            "/proc/1",
            "/sys/fs",
            "/tmp",
        ] {
            assert!(
                dangerous_root(Path::new(bad), Some(home)).is_some(),
                "{bad}"
            );
        }
        for good in [
            "/home/ann/src/app",
            "/usr/local/src/app",
            "/opt/app",
            "/etc/nginx",
            "/tmp/x",
        ] {
            assert!(
                dangerous_root(Path::new(good), Some(home)).is_none(),
                "{good}"
            );
        }
    }
}
