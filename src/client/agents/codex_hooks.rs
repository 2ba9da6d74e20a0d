//! Codex's trust of ckpt's hooks, as the commands see it: Codex runs each hook (one per event:
//! the prompt, the turn's end, each tool call) only once trusted (see [`super::codex_trust`]).
//! `ckpt hook trust codex` grants every event ckpt installed; `hook status` reports the least
//! trusted of them.

use std::path::Path;

use serde_json::{json, Map, Value};

use super::agent::{project_root, Agent};
use super::codex_trust::{self, Granted, Handler, Trust};
use crate::client::commands::settings::{
    home, lock_folder, read_settings, settings_target, write_text,
};
use crate::client::commands::Ctx;
use crate::client::ClientError;

/// ckpt's handlers in Codex's `hooks.json` at `path` (`settings`), one per event ckpt installed,
/// the prompt's first.
fn handlers<'s>(path: &'s Path, settings: &'s Map<String, Value>) -> Vec<Handler<'s>> {
    Agent::Codex
        .events()
        .iter()
        .filter_map(|event| {
            let (group, index, value) = Agent::Codex.find_ours_in(settings, event)?;
            Some(Handler {
                file: path,
                event,
                group,
                index,
                value,
            })
        })
        .collect()
}

/// The trust of the least trusted of `handlers` (Trusted when all are).
fn least(config: &toml::Table, handlers: &[Handler], project: Option<&Path>) -> Trust {
    handlers
        .iter()
        .map(|h| codex_trust::trust(config, h, project))
        .find(|t| *t != Trust::Trusted)
        .unwrap_or(Trust::Trusted)
}

/// Fills `row` (a `hook status` row of Codex's, whose prompt handler is `prompt`) with its trust:
/// `codex_key` and `codex_hash` of the prompt's handler, `codex_trust` the least trusted of
/// ckpt's handlers, `codex_events` each one's; what to tell the user.
pub fn status_row(
    path: &Path,
    settings: &Map<String, Value>,
    prompt: (usize, usize, &Value),
    config: Result<&toml::Table, &String>,
    project: Option<&Path>,
    row: &mut Value,
) -> String {
    let (group, index, value) = prompt;
    let first = Handler {
        file: path,
        event: Agent::Codex.event(),
        group,
        index,
        value,
    };
    row["codex_key"] = json!(first.key());
    row["codex_hash"] = json!(first.hash());
    let config = match config {
        Ok(config) => config,
        Err(e) => return e.clone(),
    };
    let all = handlers(path, settings);
    let trust = least(config, &all, project);
    row["codex_trust"] = json!(trust.code());
    row["codex_events"] = all
        .iter()
        .map(|h| {
            json!({"event": h.event, "key": h.key(), "hash": h.hash(),
            "codex_trust": codex_trust::trust(config, h, project).code()})
        })
        .collect();
    trust.advice().to_string()
}

/// `ckpt hook trust codex`: records in Codex's `config.toml` that each of ckpt's installed
/// hooks is trusted, as trusting them in Codex's `/hooks` does (see [`codex_trust::grant`]).
pub fn trust(ctx: &Ctx, agent: Agent, user: bool) -> Result<i32, ClientError> {
    if agent != Agent::Codex {
        return Err(ClientError::Usage(format!(
            "only Codex asks to trust a hook before running it; {} runs ckpt's hook as installed",
            agent.name()
        )));
    }
    let home = home()?;
    let root = project_root(&ctx.base);
    let path = agent.settings_file(&root, &home, user);
    let settings = read_settings(&path)?;
    let handlers = handlers(&path, &settings);
    if handlers.is_empty() {
        return Err(ClientError::Usage(format!(
            "no ckpt hook for codex in {}: run `ckpt hook install codex{}` first",
            path.display(),
            if user { " --user" } else { "" }
        )));
    }
    let codex_home = codex_trust::codex_home(&home);
    let config_path = codex_home.join("config.toml");
    let io = |e: std::io::Error| {
        ClientError::Usage(format!("cannot write {}: {e}", config_path.display()))
    };
    std::fs::create_dir_all(&codex_home).map_err(io)?;
    let target = settings_target(&config_path)?;
    let _lock = lock_folder(target.parent().unwrap_or(Path::new("/"))).map_err(io)?;
    let mut text = match crate::fs::read_text(&target) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(ClientError::Usage(format!(
                "cannot read {}: {e}",
                target.display()
            )))
        }
    };
    // Every grant is made on the text before anything is written: one that cannot be made
    // changes nothing.
    let mut changed = false;
    for handler in &handlers {
        let (granted, new) = codex_trust::grant(&text, handler).map_err(|why| {
            ClientError::Usage(format!(
                "{}: {why}; nothing was changed (trust it in Codex's `/hooks` instead)",
                target.display()
            ))
        })?;
        changed |= granted == Granted::Now;
        text = new;
    }
    if changed {
        write_text(&target, &text)?;
    }
    let config = codex_trust::read_config(&codex_home).map_err(ClientError::Usage)?;
    let project = (!user).then_some(root.as_path());
    let state = least(&config, &handlers, project);
    let first = &handlers[0];
    let result = json!({
        "agent": agent.name(), "file": target, "key": first.key(), "hash": first.hash(),
        "events": handlers.iter().map(|h| json!({"event": h.event, "key": h.key(), "hash": h.hash()})).collect::<Vec<_>>(),
        "changed": changed, "codex_trust": state.code(),
    });
    if !ctx.out.json_or_quiet(&result) {
        let verb = if changed {
            "trusted"
        } else {
            "already trusted"
        };
        let events: Vec<&str> = handlers.iter().map(|h| h.event).collect();
        outln!(
            "{verb}: ckpt's hooks ({}) in {} ({})",
            events.join(", "),
            path.display(),
            target.display()
        );
        if state == Trust::ProjectUntrusted {
            outln!("{}", state.advice());
        }
    }
    Ok(0)
}
