//! Cline CLI's conversations. A session is a folder `~/.cline/data/sessions/<id>/` holding
//! `<id>.json` (its metadata: `session_id`, `messages_path`, …) and `<id>.messages.json`
//! (`{"sessionId", "origin": {"sessionId"}, "messages": [{"role", "content": […]}]}`), and a row
//! of the `sessions` table in `~/.cline/data/db/sessions.db` (SQLite), without which Cline cannot
//! find it ("Resource not found").
//!
//! A prompt is found by its place among the session's prompts (the hook counts the user messages
//! before it: `prompt_index`), as Cline's `TaskStart` sends no text. The fork is a new folder
//! (the messages cut before that prompt, every id replaced), written as the other agents' forks
//! are, then a copy of the original's row under the new id, written by the `sqlite3`
//! command-line tool in one transaction; when that fails the new folder is removed again.
//! `cline --id NEW` continues it (headless: ACP `session/load`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::{CannotFork, Point};
use crate::client::agents::agent::Agent;
use crate::client::agents::cline::is_user_text;

/// How long `sqlite3` may wait for Cline's lock on its index, in milliseconds.
const BUSY_MS: u64 = 5000;

/// Cline's index of sessions, beside their folders.
pub fn index(sessions_root: &Path) -> PathBuf {
    sessions_root
        .parent()
        .unwrap_or(sessions_root)
        .join("db/sessions.db")
}

/// The index of the prompt's user message among the session's messages.
pub fn locate(point: &Point, text: &str) -> Result<usize, CannotFork> {
    let session: Value = serde_json::from_str(text)
        .map_err(|e| CannotFork::format(Agent::Cline, format!("not JSON: {e}")))?;
    let messages = session["messages"]
        .as_array()
        .ok_or_else(|| CannotFork::format(Agent::Cline, "it has no `messages` list"))?;
    let wanted = point.index.unwrap_or(0);
    messages
        .iter()
        .enumerate()
        .filter(|(_, m)| is_user_text(m))
        .nth(wanted)
        .map(|(i, _)| i)
        .ok_or_else(|| {
            CannotFork(format!(
                "Cline session {} holds {} prompts, not the {}th (compacted since?)",
                point.session,
                messages.iter().filter(|m| is_user_text(m)).count(),
                wanted + 1
            ))
        })
}

/// A new session id in Cline's shape: milliseconds, `_`, five random characters.
fn new_id() -> String {
    const CHARS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let ms = jiff::Timestamp::now().as_millisecond();
    let tail: String = super::ids::random16()[..5]
        .iter()
        .map(|b| CHARS[usize::from(*b) % CHARS.len()] as char)
        .collect();
    format!("{ms}_{tail}")
}

/// The fork's files (`<new>.messages.json`, `<new>.json`) and the SQL that indexes it; None
/// when no conversation came before the prompt.
pub struct Planned {
    pub id: String,
    pub messages: Vec<u8>,
    pub meta: Vec<u8>,
    pub sql: String,
}

pub fn fork(
    point: &Point,
    text: &str,
    meta: &str,
    root: &Path,
) -> Result<Option<Planned>, CannotFork> {
    let at = locate(point, text)?;
    if at == 0 {
        return Ok(None);
    }
    let bad = |why: String| CannotFork::format(Agent::Cline, why);
    let mut session: Value = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
    let mut meta: Value =
        serde_json::from_str(meta).map_err(|e| bad(format!("its metadata: {e}")))?;
    if meta["session_id"] != point.session.as_str() {
        return Err(bad("its metadata names another session".into()));
    }
    let id = new_id();
    session["messages"]
        .as_array_mut()
        .expect("located")
        .truncate(at);
    session["sessionId"] = id.clone().into();
    if session["origin"].is_object() {
        session["origin"]["sessionId"] = id.clone().into();
    }
    let messages_path = root.join(&id).join(format!("{id}.messages.json"));
    meta["session_id"] = id.clone().into();
    meta["messages_path"] = messages_path.to_string_lossy().into_owned().into();
    let quote = |s: &str| format!("'{}'", s.replace('\'', "''"));
    // Every column copied but the two that name the session, whatever Cline's schema holds.
    let sql = format!(
        "BEGIN IMMEDIATE;\n\
         CREATE TEMP TABLE ckpt_fork AS SELECT * FROM sessions WHERE session_id = {old};\n\
         UPDATE ckpt_fork SET session_id = {new}, messages_path = {path};\n\
         INSERT INTO sessions SELECT * FROM ckpt_fork;\n\
         SELECT changes();\n\
         COMMIT;\n",
        old = quote(&point.session),
        new = quote(&id),
        path = quote(&messages_path.to_string_lossy()),
    );
    let json = |v: &Value| serde_json::to_vec_pretty(v).expect("JSON values serialise");
    Ok(Some(Planned {
        messages: json(&session),
        meta: json(&meta),
        id,
        sql,
    }))
}

/// `sqlite3`, on PATH.
pub fn sqlite3() -> Result<PathBuf, CannotFork> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join("sqlite3"))
        .find(|file| file.is_file())
        .ok_or_else(|| {
            CannotFork(
                "a Cline session is found through its row in Cline's sessions.db, which ckpt \
                 writes with the sqlite3 command-line tool, and no `sqlite3` is on PATH \
                 (install it: apt install sqlite3)"
                    .into(),
            )
        })
}

/// Runs the fork's SQL on Cline's index: exactly one row copied, or an error and no change.
pub fn register(db: &Path, sql: &str) -> Result<(), CannotFork> {
    let cannot =
        |why: String| CannotFork(format!("cannot index the fork in {}: {why}", db.display()));
    if !db.is_file() {
        return Err(cannot("it is not there".into()));
    }
    let timeout = format!(".timeout {BUSY_MS}");
    let args: [&std::ffi::OsStr; 4] = [
        "-bail".as_ref(),
        "-cmd".as_ref(),
        timeout.as_ref(),
        db.as_ref(),
    ];
    let ran = super::child::run(
        &sqlite3()?,
        &args,
        None,
        sql.as_bytes(),
        Duration::from_millis(BUSY_MS * 2),
        1 << 16,
    )
    .map_err(cannot)?;
    let copied = String::from_utf8_lossy(&ran.stdout).trim().to_string();
    match (ran.status.success(), copied.as_str()) {
        (true, "1") => Ok(()),
        (true, other) => Err(cannot(format!(
            "{other} rows copied (the original session's row is not there)"
        ))),
        (false, _) => Err(cannot(ran.last_words().to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn point(index: usize) -> Point {
        Point {
            agent: Agent::Cline,
            session: "1796285589570_jpew7".into(),
            transcript: "/x".into(),
            prompt: "Cline prompt 2".into(),
            message_id: None,
            hook_time: None,
            occurrence: 0,
            index: Some(index),
            after_tool: None,
        }
    }

    #[test]
    fn the_fork_is_cut_before_the_nth_prompt_and_renamed() {
        let user = |t: &str| json!({"role": "user", "content": [{"type": "text", "text": t}]});
        let session = json!({"sessionId": "1796285589570_jpew7",
            "origin": {"sessionId": "1796285589570_jpew7"}, "messages": [
            user("A"), {"role": "assistant", "content": [{"type": "tool_use", "id": "t"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]},
            user("B")]})
        .to_string();
        let meta = json!({"session_id": "1796285589570_jpew7", "prompt": "A"}).to_string();
        let root = Path::new("/h/.cline/data/sessions");
        assert!(fork(&point(0), &session, &meta, root).unwrap().is_none());
        let planned = fork(&point(1), &session, &meta, root).unwrap().unwrap();
        let messages: Value = serde_json::from_slice(&planned.messages).unwrap();
        assert_eq!(messages["messages"].as_array().unwrap().len(), 3);
        assert_eq!(messages["sessionId"], planned.id.as_str());
        assert_eq!(messages["origin"]["sessionId"], planned.id.as_str());
        let meta: Value = serde_json::from_slice(&planned.meta).unwrap();
        assert!(meta["messages_path"]
            .as_str()
            .unwrap()
            .ends_with(&format!("{0}/{0}.messages.json", planned.id)));
        assert!(planned
            .sql
            .contains("WHERE session_id = '1796285589570_jpew7'"));
        assert!(fork(&point(2), &session, &meta.to_string(), root).is_err());
        let (ms, tail) = planned.id.split_once('_').unwrap();
        assert!(
            ms.parse::<u64>().is_ok() && tail.len() == 5,
            "{}",
            planned.id
        );
    }
}
