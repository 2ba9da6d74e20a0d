//! `ckpt mcp install|uninstall AGENT`: `ckpt mcp` registered in an agent's own configuration as
//! the agent's own `mcp add` writes it, merged into what is there and idempotent like `ckpt hook
//! install` (see `commands::settings`):
//!
//! | agent | file | entry |
//! |---|---|---|
//! | Claude Code | `~/.claude.json` (`$CLAUDE_CONFIG_DIR/.claude.json`), the project's own entry (Claude's "local" scope) | `projects[ROOT].mcpServers.ckpt = {type: stdio, command, args, env}` |
//! | Codex | `$CODEX_HOME/config.toml` | `[mcp_servers.ckpt]` `command`, `args`, and `env` with the `XDG_*` variables set (Codex passes a server few of its own) |
//! | Gemini CLI | the project's `.gemini/settings.json` | `mcpServers.ckpt = {command, args}` |
//! | Cursor | the project's `.cursor/mcp.json` | `mcpServers.ckpt = {command, args}` |
//! | Qwen Code | the project's `.qwen/settings.json` | `mcpServers.ckpt = {command, args}` |
//!
//! The agents start the server in the folder they work in, which is the project it serves.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::client::agents::agent::Agent;
use crate::client::agents::codex_trust::codex_home;
use crate::client::commands::settings::{
    edit_settings, home, lock_folder, read_settings, settings_target, write_text,
};
use crate::client::commands::Ctx;
use crate::client::ClientError;

/// The name the server is registered under.
const NAME: &str = "ckpt";

/// The variables that tell ckpt where its daemon and data are.
const XDG: [&str; 3] = ["XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_CONFIG_HOME"];

/// Where `agent` keeps MCP servers for the project at `root`.
pub fn config_file(agent: Agent, root: &Path, home: &Path) -> Result<PathBuf, ClientError> {
    Ok(match agent {
        Agent::ClaudeCode => std::env::var_os("CLAUDE_CONFIG_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| home.to_path_buf())
            .join(".claude.json"),
        Agent::Codex => codex_home(home).join("config.toml"),
        Agent::Gemini => root.join(".gemini/settings.json"),
        Agent::Cursor => root.join(".cursor/mcp.json"),
        Agent::Qwen => root.join(".qwen/settings.json"),
        Agent::Copilot | Agent::Generic | Agent::OpenCode | Agent::Kilo | Agent::Cline => {
            return Err(ClientError::Usage(
                "ckpt mcp install: Claude Code, Codex, Gemini CLI, Cursor or Qwen Code".into(),
            ))
        }
    })
}

/// The project's root as the agents name it: the top of the git work tree holding the folder,
/// else the folder.
pub fn project_root(ctx: &Ctx) -> PathBuf {
    crate::client::agents::agent::project_root(&ctx.base)
}

/// The server's command and arguments: this `ckpt`, by absolute path.
fn command(allow_restore: bool) -> Result<(String, Vec<String>), ClientError> {
    let exe = std::env::current_exe()
        .map_err(|e| ClientError::Usage(format!("cannot tell where ckpt is installed: {e}")))?;
    let exe = exe
        .to_str()
        .ok_or_else(|| ClientError::Usage(format!("ckpt's path {} is not UTF-8", exe.display())))?
        .to_string();
    let mut args = vec!["mcp".to_string()];
    if allow_restore {
        args.push("--allow-restore".into());
    }
    Ok((exe, args))
}

/// The object holding the agent's servers in `settings`, made if absent.
fn servers<'a>(
    agent: Agent,
    root: &Path,
    settings: &'a mut Map<String, Value>,
) -> Result<&'a mut Map<String, Value>, String> {
    let mut at = settings;
    if agent == Agent::ClaudeCode {
        let projects = at.entry("projects").or_insert_with(|| json!({}));
        let projects = projects
            .as_object_mut()
            .ok_or("its `projects` is not an object")?;
        let project = projects
            .entry(root.to_string_lossy())
            .or_insert_with(|| json!({}));
        at = project
            .as_object_mut()
            .ok_or("the project's entry is not an object")?;
    }
    at.entry("mcpServers")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| "its `mcpServers` is not an object".to_string())
}

pub fn install(ctx: &Ctx, agent: Agent, allow_restore: bool) -> Result<i32, ClientError> {
    let root = project_root(ctx);
    let path = config_file(agent, &root, &home()?)?;
    let (exe, args) = command(allow_restore)?;
    let changed = match agent {
        Agent::Codex => edit_toml(&path, |text| {
            let kept = without_table(text);
            let mut entry = format!(
                "[mcp_servers.{NAME}]\ncommand = {}\nargs = {}\n",
                toml_string(&exe),
                json!(args)
            );
            // Codex gives an MCP server only a few variables of its environment: the ones that
            // say where ckpt's daemon is go along, as they are now.
            let env: Vec<String> = XDG
                .iter()
                .filter_map(|k| {
                    std::env::var(k)
                        .ok()
                        .map(|v| format!("{k} = {}", toml_string(&v)))
                })
                .collect();
            if !env.is_empty() {
                entry.push_str(&format!("env = {{ {} }}\n", env.join(", ")));
            }
            let mut new = kept.trim_end().to_string();
            if !new.is_empty() {
                new.push_str("\n\n");
            }
            new.push_str(&entry);
            new
        })?,
        _ => edit_settings(&path, |settings| {
            let entry = match agent {
                Agent::ClaudeCode => {
                    json!({"type": "stdio", "command": exe, "args": args, "env": {}})
                }
                _ => json!({"command": exe, "args": args}),
            };
            let list = servers(agent, &root, settings).map_err(|why| {
                ClientError::Usage(format!("{}: {why} (nothing was changed)", path.display()))
            })?;
            if list.get(NAME) == Some(&entry) {
                return Ok(false);
            }
            list.insert(NAME.into(), entry);
            Ok(true)
        })?,
    };
    let what = if changed {
        "installed"
    } else {
        "already installed"
    };
    let text = format!(
        "{what}: {} starts `{exe} {}` for {} ({})",
        agent.name(),
        args.join(" "),
        root.display(),
        path.display()
    );
    ctx.out.value_or(
        &json!({"agent": agent.name(), "file": path, "changed": changed, "command": exe,
            "args": args, "project": root}),
        &text,
    );
    Ok(0)
}

pub fn uninstall(ctx: &Ctx, agent: Agent) -> Result<i32, ClientError> {
    let root = project_root(ctx);
    let path = config_file(agent, &root, &home()?)?;
    let changed = match agent {
        Agent::Codex => edit_toml(&path, |text| without_table(text).to_string())?,
        _ => edit_settings(&path, |settings| {
            Ok(servers(agent, &root, settings)
                .ok()
                .and_then(|list| list.remove(NAME))
                .is_some())
        })?,
    };
    let text = match changed {
        true => format!(
            "removed: {} no longer starts ckpt's MCP server",
            agent.name()
        ),
        false => format!("{}: ckpt's MCP server was not installed", agent.name()),
    };
    ctx.out.value_or(
        &json!({"agent": agent.name(), "file": path, "changed": changed}),
        &text,
    );
    Ok(0)
}

/// Whether `agent` starts ckpt's server for the project at `root`, and with what arguments.
pub fn installed(agent: Agent, root: &Path, home: &Path) -> Result<Option<Vec<String>>, String> {
    let path = config_file(agent, root, home).map_err(|e| e.to_string())?;
    let entry = match agent {
        Agent::Codex => {
            let text = match crate::fs::read_text(&path) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e.to_string()),
            };
            let table: toml::Table = text
                .parse()
                .map_err(|e: toml::de::Error| e.message().to_string())?;
            let entry = table.get("mcp_servers").and_then(|s| s.get(NAME));
            return Ok(entry.map(|e| {
                e.get("args")
                    .and_then(|a| a.as_array())
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default()
            }));
        }
        _ => {
            let mut settings = read_settings(&path).map_err(|e| e.to_string())?;
            servers(agent, root, &mut settings)
                .ok()
                .and_then(|s| s.remove(NAME))
        }
    };
    Ok(entry.map(|e| {
        e.get("args")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }))
}

/// Edits the TOML file at `path` as text (the user's comments and order stay), under the same
/// lock as the JSON settings; whether it changed. A file that is not valid TOML is refused.
fn edit_toml(path: &Path, change: impl FnOnce(&str) -> String) -> Result<bool, ClientError> {
    let target = settings_target(path)?;
    let dir = target.parent().unwrap_or(Path::new("/"));
    let io =
        |e: std::io::Error| ClientError::Usage(format!("cannot write {}: {e}", target.display()));
    std::fs::create_dir_all(dir).map_err(io)?;
    let _lock = lock_folder(dir).map_err(io)?;
    let text = match crate::fs::read_text(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io(e)),
    };
    if let Err(e) = text.parse::<toml::Table>() {
        return Err(ClientError::Usage(format!(
            "{} is not valid TOML ({}); fix it, then run this again (nothing was changed)",
            path.display(),
            e.message()
        )));
    }
    let new = change(&text);
    if new == text {
        return Ok(false);
    }
    write_text(&target, &new)?;
    Ok(true)
}

/// `text` without the `[mcp_servers.ckpt]` table (its header line to the next header).
fn without_table(text: &str) -> String {
    let header = format!("[mcp_servers.{NAME}]");
    let mut out = String::with_capacity(text.len());
    let mut inside = false;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            inside = trimmed == header;
        }
        if !inside {
            out.push_str(line);
        }
    }
    if out.len() != text.len() {
        return out.trim_end().to_string() + if out.trim_end().is_empty() { "" } else { "\n" };
    }
    out
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_codex_table_is_taken_out_alone() {
        let text = "model = \"x\"\n\n[mcp_servers.ckpt]\ncommand = \"/c\"\nargs = [\"mcp\"]\n\n[projects.\"/p\"]\ntrust_level = \"trusted\"\n";
        let out = without_table(text);
        assert_eq!(
            out,
            "model = \"x\"\n\n[projects.\"/p\"]\ntrust_level = \"trusted\"\n"
        );
        assert_eq!(without_table("a = 1\n"), "a = 1\n");
        assert_eq!(without_table("[mcp_servers.ckpt]\ncommand = \"c\"\n"), "");
        for path in ["/a \"b\"", "/c'd", "/plain"] {
            let table: toml::Table = format!("x = {}", toml_string(path)).parse().unwrap();
            assert_eq!(table["x"].as_str(), Some(path));
        }
    }
}
