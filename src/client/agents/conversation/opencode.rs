//! OpenCode's and Kilo CLI's conversations. Their sessions live in the agent's SQLite database
//! (`~/.local/share/opencode/opencode.db`, `…/kilo/kilo.db`), which ckpt never opens: it reads a
//! session through the agent's own `export ID` (`{"info": session, "messages": [{"info",
//! "parts"}]}`) and writes the fork through its `import FILE`, as the agent's binary on PATH
//! does it (`ckpt` waits for each at most [`WAIT`]).
//!
//! The fork is the export cut before the prompt's user message (found by the message id the
//! plugin sends, else by its text), with every session, message and part id given a new random
//! tail (the time-ordered head kept, so the agent orders them as before): ids are the
//! database's keys, so importing the old ones would move the original's rows. A fork for
//! another folder (a worktree) names that folder as its `directory`. The original session is
//! never changed. `opencode --session NEW` continues it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::{CannotFork, Point};
use crate::client::agents::agent::Agent;

/// How long the agent's `export` or `import` may take.
const WAIT: Duration = Duration::from_secs(60);
/// Largest export read (a long session with its tool outputs fits).
const MAX_EXPORT: u64 = 512 << 20;

/// The agent's database, where its sessions are (only checked for, never opened).
pub fn database(agent: Agent) -> Option<PathBuf> {
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| Some(PathBuf::from(std::env::var_os("HOME")?).join(".local/share")))?;
    Some(data.join(agent.name()).join(format!("{}.db", agent.name())))
}

/// The agent's binary, on PATH.
fn binary(agent: Agent) -> Result<PathBuf, CannotFork> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(agent.name()))
        .find(|file| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(file)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .ok_or_else(|| {
            CannotFork(format!(
                "ckpt reads and writes {} sessions with its own `{} export` and `import`, and \
                 no `{}` is on PATH",
                agent.name(),
                agent.name(),
                agent.name()
            ))
        })
}

/// Whether the prompt's session can be forked, without running the agent (what `ckpt log`
/// shows): its binary is on PATH and its database is there. The session itself is read when a
/// rewind or fork asks.
pub fn check(point: &Point) -> Result<(), CannotFork> {
    binary(point.agent)?;
    match std::fs::symlink_metadata(&point.transcript) {
        Ok(_) => Ok(()),
        Err(e) => Err(CannotFork(format!(
            "{}'s sessions ({}) cannot be read: {e}",
            point.agent.name(),
            point.transcript.display()
        ))),
    }
}

/// Runs the agent with `args`; its standard output, or why not (its last words).
fn run(agent: Agent, args: &[&std::ffi::OsStr], dir: Option<&Path>) -> Result<Vec<u8>, CannotFork> {
    let bin = binary(agent)?;
    let what = format!("`{} {}`", agent.name(), args[0].to_string_lossy());
    let ran = super::child::run(&bin, args, dir, b"", WAIT, MAX_EXPORT)
        .map_err(|why| CannotFork(format!("{what}: {why}")))?;
    match ran.status.success() {
        true => Ok(ran.stdout),
        false => Err(CannotFork(format!(
            "{what} failed ({}): {}",
            ran.status,
            ran.last_words()
        ))),
    }
}

/// The session as the agent exports it.
fn export(point: &Point) -> Result<Value, CannotFork> {
    let out = run(
        point.agent,
        &["export".as_ref(), point.session.as_ref()],
        None,
    )?;
    // The agent may print a notice before the JSON.
    let start = out.iter().position(|&b| b == b'{').unwrap_or(out.len());
    serde_json::from_slice(&out[start..]).map_err(|e| {
        CannotFork(format!(
            "`{} export {}` gave no session: {e}",
            point.agent.name(),
            point.session
        ))
    })
}

/// A fork [`plan`] made: the new session's id, its text, and the folder it belongs to.
pub struct Planned {
    pub id: String,
    pub bytes: Vec<u8>,
    pub directory: PathBuf,
}

/// The fork: the session exported, cut and re-id'd, to be imported by [`import`]; None when no
/// conversation came before the prompt. `folder`: the folder the fork is for (a worktree),
/// when not the original's.
pub fn plan(point: &Point, folder: Option<&Path>) -> Result<Option<Planned>, CannotFork> {
    let exported = export(point)?;
    let Some(mut fork) = cut(point, exported)? else {
        return Ok(None);
    };
    if let Some(dir) = folder {
        fork["info"]["directory"] = dir.to_string_lossy().into_owned().into();
    }
    let directory = match fork["info"]["directory"].as_str() {
        Some(dir) if Path::new(dir).is_absolute() => PathBuf::from(dir),
        _ => {
            return Err(CannotFork::format(
                point.agent,
                "the exported session names no folder (`info.directory`)",
            ))
        }
    };
    Ok(Some(Planned {
        id: fork["info"]["id"].as_str().unwrap_or_default().to_string(),
        bytes: serde_json::to_vec(&fork).expect("JSON values serialise"),
        directory,
    }))
}

/// Imports a fork [`plan`] made: written to a private file of its own, handed to the agent's
/// `import` run in the session's folder (the agent files an imported session under the folder
/// it runs in, whatever its `directory` says: tried), removed.
pub fn import(agent: Agent, bytes: &[u8], directory: &Path) -> Result<(), CannotFork> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tail: String = super::ids::random16()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let path = std::env::temp_dir().join(format!("ckpt-fork-{}-{tail}.json", std::process::id()));
    let cannot = |e: std::io::Error| {
        CannotFork(format!(
            "cannot write the fork for `{} import` ({}): {e}",
            agent.name(),
            path.display()
        ))
    };
    // Private and new: the conversation is the user's, and no other file is written through.
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(cannot)?;
    let imported = run(
        agent,
        &["import".as_ref(), path.as_os_str()],
        Some(directory),
    );
    let _ = std::fs::remove_file(&path);
    imported.map(drop)
}

/// The user texts of a message (its non-synthetic text parts), as the plugin sent the prompt.
fn user_text(message: &Value) -> Option<String> {
    if message["info"]["role"] != "user" {
        return None;
    }
    let parts = message["parts"].as_array()?;
    let texts: Vec<&str> = parts
        .iter()
        .filter(|p| p["type"] == "text" && p["synthetic"] != true)
        .filter_map(|p| p["text"].as_str())
        .collect();
    Some(texts.join("\n"))
}

/// The export cut before the prompt's user message, every id renewed; None when nothing came
/// before it (the agent then starts a new session).
fn cut(point: &Point, mut exported: Value) -> Result<Option<Value>, CannotFork> {
    let bad = |why: &str| CannotFork::format(point.agent, why.to_string());
    let messages = exported["messages"]
        .as_array()
        .ok_or_else(|| bad("its export has no `messages` list"))?;
    let at = match &point.message_id {
        Some(id) => messages.iter().position(|m| m["info"]["id"] == id.as_str()),
        None => messages
            .iter()
            .enumerate()
            .filter(|(_, m)| user_text(m).as_deref() == Some(point.prompt.as_str()))
            .nth(point.occurrence)
            .map(|(i, _)| i),
    };
    let at = at.ok_or_else(|| {
        CannotFork(format!(
            "the prompt is not in {} session {} (deleted or compacted since?)",
            point.agent.name(),
            point.session
        ))
    })?;
    if at == 0 {
        return Ok(None);
    }
    exported["messages"]
        .as_array_mut()
        .expect("checked")
        .truncate(at);
    // Every id the export defines, with its new name.
    let mut renamed = std::collections::HashMap::new();
    let mut rename = |v: &Value| {
        if let Some(id) = v.as_str() {
            renamed.entry(id.to_string()).or_insert_with(|| renewed(id));
        }
    };
    rename(&exported["info"]["id"]);
    for m in exported["messages"].as_array().expect("checked") {
        rename(&m["info"]["id"]);
        for p in m["parts"].as_array().into_iter().flatten() {
            rename(&p["id"]);
        }
    }
    if exported["info"]["id"].as_str().is_none() {
        return Err(bad("its export names no session id"));
    }
    replace_ids(&mut exported, &renamed);
    if let Some(title) = exported["info"]["title"].as_str() {
        exported["info"]["title"] = format!("{title} (ckpt fork)").into();
    }
    Ok(Some(exported))
}

/// Replaces every string equal to a renamed id, anywhere in `v`.
fn replace_ids(v: &mut Value, renamed: &std::collections::HashMap<String, String>) {
    match v {
        Value::String(s) => {
            if let Some(new) = renamed.get(s.as_str()) {
                *s = new.clone();
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| replace_ids(i, renamed)),
        Value::Object(map) => map.values_mut().for_each(|i| replace_ids(i, renamed)),
        _ => {}
    }
}

/// `ses_`/`msg_`/`prt_` ids: a prefix, 12 hex digits of time, 14 random base62 characters.
/// The new id keeps everything but the random tail.
fn renewed(id: &str) -> String {
    const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let keep = id.len().saturating_sub(14).min(id.len());
    let head = id.get(..keep).unwrap_or(id);
    let random = super::ids::random16();
    let tail: String = random[..14]
        .iter()
        .map(|b| BASE62[usize::from(*b) % 62] as char)
        .collect();
    format!("{head}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn point(message_id: Option<&str>) -> Point {
        Point {
            agent: Agent::OpenCode,
            session: "ses_aaaaaaaaaaaaSESSIONxxxxxxx".into(),
            transcript: "/db".into(),
            prompt: "B".into(),
            message_id: message_id.map(String::from),
            hook_time: None,
            occurrence: 0,
            index: None,
            after_tool: None,
        }
    }

    fn export() -> Value {
        let s = "ses_aaaaaaaaaaaaSESSIONxxxxxxx";
        let user = |id: &str, text: &str| {
            json!({"info": {"id": id, "role": "user", "sessionID": s},
            "parts": [{"id": format!("prt_{id}"), "type": "text", "text": text, "messageID": id, "sessionID": s}]})
        };
        let reply = |id: &str, parent: &str| {
            json!({"info": {"id": id, "role": "assistant",
            "parentID": parent, "sessionID": s}, "parts": []})
        };
        json!({"info": {"id": s, "title": "t", "directory": "/p"}, "messages": [
            user("msg_000000000001AAAAAAAAAAAAAA", "A"), reply("msg_000000000002AAAAAAAAAAAAAA", "msg_000000000001AAAAAAAAAAAAAA"),
            user("msg_000000000003AAAAAAAAAAAAAA", "B"), reply("msg_000000000004AAAAAAAAAAAAAA", "msg_000000000003AAAAAAAAAAAAAA"),
        ]})
    }

    #[test]
    fn the_fork_is_cut_before_the_prompt_and_every_id_is_new() {
        for id in [Some("msg_000000000003AAAAAAAAAAAAAA"), None] {
            let fork = cut(&point(id), export()).unwrap().unwrap();
            let text = fork.to_string();
            assert_eq!(fork["messages"].as_array().unwrap().len(), 2, "{text}");
            for old in ["SESSIONxxxxxx", "AAAAAAAAAAAAAA"] {
                assert!(!text.contains(old), "{old} left in {text}");
            }
            let new = fork["info"]["id"].as_str().unwrap();
            assert!(
                new.starts_with("ses_aaaaaaaaaaaa") && new.len() == 30,
                "{new}"
            );
            assert_eq!(fork["messages"][0]["info"]["sessionID"], new);
            // A reply still points at its own (renamed) user message.
            assert_eq!(
                fork["messages"][1]["info"]["parentID"],
                fork["messages"][0]["info"]["id"]
            );
            assert!(fork["messages"][0]["info"]["id"]
                .as_str()
                .unwrap()
                .starts_with("msg_000000000001"));
        }
        // The first prompt: nothing before it.
        let mut first = point(Some("msg_000000000001AAAAAAAAAAAAAA"));
        assert!(cut(&first, export()).unwrap().is_none());
        first.message_id = Some("msg_gone".into());
        assert!(cut(&first, export())
            .unwrap_err()
            .0
            .contains("not in opencode session"));
        assert!(cut(&point(None), json!({"info": {}})).is_err());
    }
}
