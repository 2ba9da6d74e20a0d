//! Whether Codex will run ckpt's hook. Codex runs a hook from `hooks.json` only once the user has
//! trusted it in `/hooks`, which records, in `$CODEX_HOME/config.toml`,
//!
//! ```toml
//! [hooks.state."<hooks.json path>:<event>:<group>:<handler>"]
//! trusted_hash = "sha256:<hex>"
//! ```
//!
//! (`<event>`: `user_prompt_submit`, `stop`, `post_tool_use`, each trusted on its own). The hash
//! covers the hook's normalised definition (event, type, command, timeout, async, status
//! message) as compact JSON with sorted keys; a changed entry (another ckpt path, say) needs
//! trusting again. A project's hooks load only in a project Codex trusts
//! (`[projects."<dir>"] trust_level = "trusted"`). Checked against the real Codex binary: its
//! `hooks/list` reports the same key and hash (see `tests/it/agents.rs`).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// Codex's own default when an entry has no timeout, in seconds.
const CODEX_DEFAULT_TIMEOUT_S: u64 = 600;

/// What Codex will do with ckpt's entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// Trusted as it stands: Codex runs it.
    Trusted,
    /// Never trusted: Codex lists it in `/hooks` and does not run it.
    Untrusted,
    /// Trusted once, changed since: Codex does not run it until trusted again.
    Changed,
    /// Turned off in `/hooks`.
    Disabled,
    /// A project hook in a project Codex does not trust: not even loaded.
    ProjectUntrusted,
}

impl Trust {
    pub fn code(self) -> &'static str {
        match self {
            Trust::Trusted => "trusted",
            Trust::Untrusted => "untrusted",
            Trust::Changed => "changed",
            Trust::Disabled => "disabled",
            Trust::ProjectUntrusted => "project-untrusted",
        }
    }

    pub fn advice(self) -> &'static str {
        match self {
            Trust::Trusted => "trusted in Codex",
            Trust::Untrusted => "Codex runs it once you trust it: open `/hooks` in Codex",
            Trust::Changed => "changed since you trusted it: trust it again in Codex's `/hooks`",
            Trust::Disabled => "turned off in Codex's `/hooks`",
            Trust::ProjectUntrusted => {
                "Codex loads this project's hooks only once you trust the project"
            }
        }
    }
}

/// Where ckpt's handler sits in a `hooks.json`, and what Codex calls it.
pub struct Handler<'a> {
    /// The `hooks.json` holding it (absolute, as Codex names it).
    pub file: &'a Path,
    /// The event it is listed under, as `hooks.json` names it (`UserPromptSubmit`, ...).
    pub event: &'a str,
    pub group: usize,
    pub index: usize,
    /// The handler object (`{"type": "command", "command": …, "timeout": …}`).
    pub value: &'a Value,
}

impl Handler<'_> {
    /// Codex's name of the handler's event in its state keys: `hooks.json`'s in snake case.
    fn event_name(&self) -> String {
        let mut out = String::new();
        for (i, c) in self.event.chars().enumerate() {
            if c.is_ascii_uppercase() && i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        }
        out
    }

    /// Codex's key for this handler's state.
    pub fn key(&self) -> String {
        format!(
            "{}:{}:{}:{}",
            self.file.display(),
            self.event_name(),
            self.group,
            self.index
        )
    }

    /// Codex's hash of this handler's normalised definition.
    pub fn hash(&self) -> String {
        let field = |k: &str| self.value.get(k);
        let timeout = field("timeout")
            .or_else(|| field("timeoutSec"))
            .and_then(Value::as_u64)
            .unwrap_or(CODEX_DEFAULT_TIMEOUT_S)
            .max(1);
        let mut handler = json!({
            "async": field("async").and_then(Value::as_bool).unwrap_or(false),
            "command": field("command").and_then(Value::as_str).unwrap_or_default(),
            "timeout": timeout,
            "type": "command",
        });
        if let Some(message) = field("statusMessage").and_then(Value::as_str) {
            handler["statusMessage"] = json!(message);
        }
        // Keys sorted at every level, compact, as Codex hashes it.
        let identity = json!({ "event_name": self.event_name(), "hooks": [handler] });
        let text = serde_json::to_string(&sorted(identity)).expect("JSON values serialise");
        let digest = Sha256::digest(text.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("sha256:{hex}")
    }
}

/// `value` with every object's keys in sorted order.
fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

/// `$CODEX_HOME` (default `~/.codex`).
pub fn codex_home(home: &Path) -> PathBuf {
    std::env::var_os("CODEX_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".codex"))
}

/// What Codex will do with `handler`, from its user config (`project`: the folder of a project
/// hook, `None` for the user's hooks).
pub fn trust(config: &toml::Table, handler: &Handler, project: Option<&Path>) -> Trust {
    if let Some(project) = project {
        let level = config
            .get("projects")
            .and_then(|p| p.get(&*project.to_string_lossy()))
            .and_then(|p| p.get("trust_level"))
            .and_then(toml::Value::as_str);
        if level != Some("trusted") {
            return Trust::ProjectUntrusted;
        }
    }
    let state = config
        .get("hooks")
        .and_then(|h| h.get("state"))
        .and_then(|s| s.get(handler.key()));
    let get = |k: &str| state.and_then(|s| s.get(k));
    if get("enabled").and_then(toml::Value::as_bool) == Some(false) {
        return Trust::Disabled;
    }
    match get("trusted_hash").and_then(toml::Value::as_str) {
        None => Trust::Untrusted,
        Some(h) if h == handler.hash() => Trust::Trusted,
        Some(_) => Trust::Changed,
    }
}

/// Reads `$CODEX_HOME/config.toml` (empty when absent); an error says why it cannot be read.
pub fn read_config(codex_home: &Path) -> Result<toml::Table, String> {
    let path = codex_home.join("config.toml");
    let text = match crate::fs::read_text(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(toml::Table::new()),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    text.parse::<toml::Table>()
        .map_err(|e| format!("{} is not valid TOML: {}", path.display(), e.message()))
}

/// What [`grant`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Granted {
    /// It was trusted already.
    Already,
    /// `config.toml` now trusts it.
    Now,
}

/// Records in Codex's `config` text (its `config.toml`, possibly empty) that `handler` is
/// trusted, as trusting it in `/hooks` does: a new `[hooks.state."<key>"]` table at the end,
/// or the recorded hash replaced where the entry changed since it was trusted. Everything else
/// in the file stays byte for byte. Refuses an entry turned off in `/hooks` (the user's
/// choice) and a file it cannot edit without rewriting it; the new text, re-read, must trust
/// the handler.
pub fn grant(config: &str, handler: &Handler) -> Result<(Granted, String), String> {
    let table: toml::Table = config
        .parse()
        .map_err(|e: toml::de::Error| format!("it is not valid TOML: {}", e.message()))?;
    let text = match trust(&table, handler, None) {
        Trust::Trusted => return Ok((Granted::Already, config.to_string())),
        Trust::Disabled => {
            return Err("ckpt's hook is turned off in Codex's `/hooks`: turn it on there".into())
        }
        Trust::Untrusted => {
            let key = toml::Value::String(handler.key()).to_string();
            let hash = toml::Value::String(handler.hash()).to_string();
            let mut text = config.to_string();
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!(
                "\n# ckpt's hook, trusted with `ckpt hook trust codex`\n\
                 [hooks.state.{key}]\ntrusted_hash = {hash}\n"
            ));
            text
        }
        Trust::Changed | Trust::ProjectUntrusted => {
            let old = table
                .get("hooks")
                .and_then(|h| h.get("state"))
                .and_then(|s| s.get(handler.key()))
                .and_then(|s| s.get("trusted_hash"))
                .and_then(toml::Value::as_str)
                .unwrap_or_default();
            let quoted = toml::Value::String(old.to_string()).to_string();
            if old.is_empty() || config.matches(&quoted).count() != 1 {
                return Err("its entry for ckpt's hook cannot be changed in place".into());
            }
            config.replacen(&quoted, &toml::Value::String(handler.hash()).to_string(), 1)
        }
    };
    let reread: toml::Table = text
        .parse()
        .map_err(|_| "ckpt's entry cannot be added without rewriting the file".to_string())?;
    if trust(&reread, handler, None) != Trust::Trusted {
        return Err("ckpt's entry cannot be added without rewriting the file".into());
    }
    Ok((Granted::Now, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handler(value: &Value) -> Handler<'_> {
        Handler {
            file: Path::new("/tmp/cxh/proj/.codex/hooks.json"),
            event: "UserPromptSubmit",
            group: 0,
            index: 0,
            value,
        }
    }

    /// The key and hash the real Codex (0.169.0, `codex app-server` → `hooks/list`) reported for
    /// this entry.
    #[test]
    fn key_and_hash_match_what_codex_reports() {
        let value = json!({"type": "command", "command": "/usr/bin/ckpt hook codex", "timeout": 5});
        let h = handler(&value);
        assert_eq!(
            h.key(),
            "/tmp/cxh/proj/.codex/hooks.json:user_prompt_submit:0:0"
        );
        assert_eq!(
            h.hash(),
            "sha256:299525da4d8798411b7db05290d75ccf3c56f877e02cd4fdb3a57ec7096db184"
        );
    }

    #[test]
    fn trust_follows_the_recorded_hash_and_the_project() {
        let value = json!({"type": "command", "command": "/usr/bin/ckpt hook codex", "timeout": 5});
        let h = handler(&value);
        let project = Path::new("/tmp/cxh/proj");
        let trusted_project = "[projects.\"/tmp/cxh/proj\"]\ntrust_level = \"trusted\"\n";
        let config = |extra: &str| format!("{trusted_project}{extra}").parse().unwrap();
        assert_eq!(
            trust(&toml::Table::new(), &h, Some(project)),
            Trust::ProjectUntrusted
        );
        assert_eq!(trust(&config(""), &h, Some(project)), Trust::Untrusted);
        let state = |body: &str| {
            config(&format!(
                "[hooks.state.\"{}\"]\n{body}\n",
                h.key().replace('"', "\\\"")
            ))
        };
        let trusted = state(&format!("trusted_hash = \"{}\"", h.hash()));
        assert_eq!(trust(&trusted, &h, Some(project)), Trust::Trusted);
        assert_eq!(trust(&trusted, &h, None), Trust::Trusted);
        let other = state("trusted_hash = \"sha256:00\"");
        assert_eq!(trust(&other, &h, Some(project)), Trust::Changed);
        let off = state(&format!("trusted_hash = \"{}\"\nenabled = false", h.hash()));
        assert_eq!(trust(&off, &h, Some(project)), Trust::Disabled);
    }

    #[test]
    fn grant_adds_or_updates_only_ckpts_entry() {
        let value = json!({"type": "command", "command": "/usr/bin/ckpt hook codex", "timeout": 5});
        let h = handler(&value);
        let mine = "# my settings\nmodel = \"o4\"  # keep this comment\n\n[projects.\"/x\"]\ntrust_level = \"trusted\"\n";
        let (granted, text) = grant(mine, &h).unwrap();
        assert_eq!(granted, Granted::Now);
        assert!(text.starts_with(mine), "{text}");
        let table: toml::Table = text.parse().unwrap();
        assert_eq!(trust(&table, &h, None), Trust::Trusted);
        assert_eq!(grant(&text, &h).unwrap().0, Granted::Already);
        // The entry changed (another ckpt path): its hash is replaced, nothing else.
        let moved = json!({"type": "command", "command": "/opt/ckpt hook codex", "timeout": 5});
        let h2 = handler(&moved);
        let (_, again) = grant(&text, &h2).unwrap();
        assert!(again.starts_with(mine));
        assert_eq!(again.len(), text.len());
        let table: toml::Table = again.parse().unwrap();
        assert_eq!(trust(&table, &h2, None), Trust::Trusted);
        // Turned off by the user: left so.
        let off = format!("{again}enabled = false\n");
        assert!(grant(&off, &h2).unwrap_err().contains("turned off"));
        assert!(grant("model = [", &h).is_err());
        assert_eq!(grant("", &h).unwrap().0, Granted::Now);
    }
}
