//! Whether Gemini CLI will run a project's hooks: only in a folder it trusts, as recorded in
//! `~/.gemini/trustedFolders.json` (`{"<path>": "TRUST_FOLDER" | "TRUST_PARENT" |
//! "DO_NOT_TRUST"}`, the longest matching rule wins; `TRUST_PARENT` trusts the rule's parent).
//! `gemini --skip-trust` trusts the session only after the settings are read, so it never
//! runs a project's hooks (tried with the pinned Gemini CLI, `tests/it/agents.rs`); a user-level
//! hook (`ckpt hook install gemini --user`) runs everywhere.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// What Gemini CLI decides for a project folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FolderTrust {
    Trusted,
    Distrusted,
    /// No rule: Gemini asks when opened there; until then it runs no project hook.
    Undecided,
}

impl FolderTrust {
    pub fn code(self) -> &'static str {
        match self {
            FolderTrust::Trusted => "trusted",
            FolderTrust::Distrusted => "distrusted",
            FolderTrust::Undecided => "undecided",
        }
    }

    pub fn advice(self) -> &'static str {
        match self {
            FolderTrust::Trusted => "folder trusted in Gemini",
            FolderTrust::Distrusted => {
                "Gemini does not trust this folder and runs none of its hooks (`--user` installs \
                 one that runs everywhere)"
            }
            FolderTrust::Undecided => {
                "Gemini runs it once you trust this folder (it asks when opened here); \
                 `gemini --skip-trust` does not run project hooks (`--user` installs one that does)"
            }
        }
    }
}

/// Gemini's own folder: `$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`.
pub fn gemini_dir(home: &Path) -> PathBuf {
    std::env::var_os("GEMINI_CLI_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.to_path_buf())
        .join(".gemini")
}

/// What Gemini decides for `folder` from the trust file in `gemini_dir`.
pub fn folder_trust(gemini_dir: &Path, folder: &Path) -> FolderTrust {
    let rules = crate::fs::read_small(&gemini_dir.join("trustedFolders.json"), 1 << 20)
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
    let Some(Value::Object(rules)) = rules else {
        return FolderTrust::Undecided;
    };
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let folder = real(folder);
    let mut best: Option<(usize, &str)> = None;
    for (rule, level) in &rules {
        let Some(level) = level.as_str() else {
            continue;
        };
        let rule_path = Path::new(rule);
        let effective = match level {
            "TRUST_PARENT" => rule_path.parent().unwrap_or(rule_path),
            _ => rule_path,
        };
        if folder.starts_with(real(effective)) && best.is_none_or(|(len, _)| rule.len() > len) {
            best = Some((rule.len(), level));
        }
    }
    match best.map(|(_, level)| level) {
        Some("TRUST_FOLDER" | "TRUST_PARENT") => FolderTrust::Trusted,
        Some("DO_NOT_TRUST") => FolderTrust::Distrusted,
        _ => FolderTrust::Undecided,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_rule_decides() {
        let dir = tempfile::tempdir().unwrap();
        let rules = serde_json::json!({
            "/w": "TRUST_FOLDER",
            "/w/secret": "DO_NOT_TRUST",
            "/p/child": "TRUST_PARENT",
        });
        std::fs::write(dir.path().join("trustedFolders.json"), rules.to_string()).unwrap();
        let trust = |p: &str| folder_trust(dir.path(), Path::new(p));
        assert_eq!(trust("/w/app"), FolderTrust::Trusted);
        assert_eq!(trust("/w/secret/app"), FolderTrust::Distrusted);
        assert_eq!(trust("/p/other"), FolderTrust::Trusted);
        assert_eq!(trust("/q"), FolderTrust::Undecided);
        assert_eq!(
            folder_trust(Path::new("/nowhere"), Path::new("/w")),
            FolderTrust::Undecided
        );
    }
}
