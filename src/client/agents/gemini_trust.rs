//! Whether Gemini CLI will run a project's hooks: only in a folder it trusts, as recorded in
//! `~/.gemini/trustedFolders.json` (`{"<path>": "TRUST_FOLDER" | "TRUST_PARENT" |
//! "DO_NOT_TRUST"}`, the longest matching rule wins; `TRUST_PARENT` trusts the rule's parent).
//! `gemini --skip-trust` trusts the session only after the settings are read, so it never
//! runs a project's hooks (tried with the pinned Gemini CLI, `tests/it/agents.rs`); a user-level
//! hook (`ckpt hook install gemini --user`) runs everywhere.
//!
//! Qwen Code keeps the same file in `~/.qwen`, but reads it only when its folder trust is on
//! (`security.folderTrust.enabled` in the user's `~/.qwen/settings.json`, off by default):
//! then an untrusted folder's hooks are skipped without a word (tried with the pinned Qwen Code).

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

/// What Qwen Code decides for `folder`: None while its folder trust is off (every folder's
/// hooks run).
pub fn qwen_folder_trust(home: &Path, folder: &Path) -> Option<FolderTrust> {
    let dir = home.join(".qwen");
    let settings = crate::fs::read_small(&dir.join("settings.json"), 1 << 20)
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
    let enabled = settings
        .as_ref()
        .and_then(|s| s.pointer("/security/folderTrust/enabled"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    enabled.then(|| folder_trust(&dir, folder))
}

/// What `hook status` says of Qwen Code's trust for a project's hooks: its code and advice.
pub fn qwen_advice(trust: Option<FolderTrust>) -> (&'static str, &'static str) {
    match trust {
        None => ("off", "Qwen Code's folder trust is off: project hooks run"),
        Some(FolderTrust::Trusted) => ("trusted", "folder trusted in Qwen Code"),
        Some(_) => (
            "untrusted",
            "Qwen Code's folder trust is on and this folder is not trusted: it skips the \
             project's hooks (trust the folder in Qwen Code, or `--user` installs one that runs \
             everywhere)",
        ),
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

    #[test]
    fn qwen_reads_its_trust_file_only_when_folder_trust_is_on() {
        let home = tempfile::tempdir().unwrap();
        let qwen = home.path().join(".qwen");
        std::fs::create_dir_all(&qwen).unwrap();
        let rules = serde_json::json!({ "/w": "TRUST_FOLDER" });
        std::fs::write(qwen.join("trustedFolders.json"), rules.to_string()).unwrap();
        assert_eq!(qwen_folder_trust(home.path(), Path::new("/q")), None);
        let on = serde_json::json!({ "security": { "folderTrust": { "enabled": true } } });
        std::fs::write(qwen.join("settings.json"), on.to_string()).unwrap();
        assert_eq!(
            qwen_folder_trust(home.path(), Path::new("/w/app")),
            Some(FolderTrust::Trusted)
        );
        let untrusted = qwen_folder_trust(home.path(), Path::new("/q"));
        assert_eq!(qwen_advice(untrusted).0, "untrusted");
    }
}
