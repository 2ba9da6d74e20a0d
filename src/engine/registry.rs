//! The registered projects (`projects.json` in the data dir), which make registrations survive
//! daemon restarts.

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
