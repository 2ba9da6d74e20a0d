//! `ckpt hook AGENT`: an agent's hook. It reads the hook's JSON on stdin and, for a prompt,
//! records the checkpoint of that user message, in the project the agent works in, on the
//! dialog of the agent's session; for a tool call's end or the turn's end, a step or the turn's
//! end of that dialog's running turn (see `engine::turns`). It never hurts the user's turn: it exits 0 on every path, prints exactly
//! what the agent expects on stdout, and gives up after [`HOOK_BUDGET`] (the checkpoint request,
//! once sent, still completes in the daemon).
//!
//! `ckpt hook install|uninstall|status` manage the agents' settings
//! ([`install`](crate::client::agents::install)).

use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::client::agents::agent as agents;
use crate::client::agents::agent::{project_root, Moment};
use crate::client::agents::tools::tool_call;
pub use crate::client::agents::Agent;

use super::Ctx;
use crate::client::agents::conversation::AGENT_KEY;
use crate::client::{unrecorded, ClientError};
use crate::protocol::methods::{CheckpointParams, WatchParams};
use crate::protocol::rpc;
use crate::protocol::turns::StepParams;
use crate::protocol::ErrorCode;

/// How long the prompt may wait for the hook, at most.
pub const HOOK_BUDGET: Duration = Duration::from_secs(2);
/// Largest hook payload read (a prompt with pasted files fits many times over).
const MAX_PAYLOAD: u64 = 32 * 1024 * 1024;

static ANSWERED: AtomicBool = AtomicBool::new(false);
/// The call is not a prompt's (its payload named another moment): what it prints differs.
static NOT_A_PROMPT: AtomicBool = AtomicBool::new(false);

/// Prints the agent's expected stdout, once, whoever gets there first (the work or the
/// watchdog).
pub fn answer(agent: Agent) {
    if !ANSWERED.swap(true, Ordering::SeqCst) {
        let moment = match NOT_A_PROMPT.load(Ordering::SeqCst) {
            true => Moment::Other,
            false => Moment::Prompt,
        };
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(agent.stdout(moment).as_bytes());
        let _ = out.flush();
    }
}

/// Runs the hook; the exit status is always 0. A prompt it cannot record is noted (see
/// [`not_recorded`]).
pub fn run(ctx: &Ctx, agent: Agent) -> Result<i32, ClientError> {
    let log_dir = ctx.paths.data_dir.clone();
    std::thread::spawn(move || {
        std::thread::sleep(HOOK_BUDGET);
        note(
            &log_dir,
            agent,
            "gave up waiting for ckptd after 2 s (the checkpoint completes in the background)",
        );
        answer(agent);
        std::process::exit(0);
    });
    if let Some(problem) = &ctx.config_problem {
        note(&ctx.paths.data_dir, agent, &format!("warning: {problem}"));
    }
    match read_input(agent) {
        Err(why) => not_recorded(ctx, agent, &ctx.base, None, "", &why),
        Ok((payload, prompt)) => {
            let cwd = match &prompt.cwd {
                // An empty or relative `cwd` is read against the folder the agent ran it in.
                Some(cwd) if !cwd.as_os_str().is_empty() => ctx.base.join(cwd),
                _ => ctx.base.clone(),
            };
            let moment = agent.moment(&payload);
            if moment != Moment::Prompt {
                NOT_A_PROMPT.store(true, Ordering::SeqCst);
                if let Err(e) = record_step(ctx, agent, &cwd, &payload, &prompt, moment) {
                    note(
                        &ctx.paths.data_dir,
                        agent,
                        &format!("turn's step or end not recorded: {e}"),
                    );
                }
                answer(agent);
                return Ok(0);
            }
            let session = prompt.session.clone();
            let text = prompt.prompt.clone();
            match record(ctx, agent, &cwd, payload, prompt) {
                Ok(id) => tracing::debug!(%id, "checkpoint recorded"),
                Err(e) => not_recorded(ctx, agent, &cwd, session.as_deref(), &text, &e.to_string()),
            }
        }
    }
    answer(agent);
    Ok(0)
}

/// Says why the hook did nothing, on stderr and in `hook.log` in the data directory (the agent
/// may hide stderr): one line, written at once.
fn note(data_dir: &Path, agent: Agent, what: &str) {
    let what = what.replace('\n', " ");
    eprintln!("ckpt hook {}: {what}", agent.name());
    let line = format!(
        "{} ckpt hook {}: {what}\n",
        jiff::Timestamp::now(),
        agent.name()
    );
    let file = {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(data_dir);
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(data_dir.join("hook.log"))
    };
    if let Ok(mut file) = file {
        let _ = file.write_all(line.as_bytes());
    }
}

/// A prompt that was not recorded: said in `hook.log` and kept in the list `ckpt status` and
/// `ckpt log` show (see [`unrecorded`]).
fn not_recorded(
    ctx: &Ctx,
    agent: Agent,
    cwd: &Path,
    session: Option<&str>,
    prompt: &str,
    why: &str,
) {
    note(
        &ctx.paths.data_dir,
        agent,
        &format!("prompt not recorded: {why}"),
    );
    let dialog = session.map(|s| dialog_name(agent, Some(s)));
    let entry = unrecorded::Unrecorded::new(agent.name(), cwd, dialog.as_deref(), prompt, why);
    unrecorded::add(&ctx.paths.data_dir, &entry);
}

/// The hook's input: its JSON and the prompt the agent describes in it.
fn read_input(agent: Agent) -> Result<(Value, agents::Prompt), String> {
    let mut payload = Vec::new();
    std::io::stdin()
        .take(MAX_PAYLOAD)
        .read_to_end(&mut payload)
        .map_err(|e| format!("cannot read the hook's input: {e}"))?;
    let payload: Value = serde_json::from_slice(&payload)
        .map_err(|e| format!("the hook's input is not JSON: {e}"))?;
    if !payload.is_object() {
        return Err("the hook's input is not a JSON object".into());
    }
    let prompt = agent.parse(&payload);
    Ok((payload, prompt))
}

/// Records the prompt's checkpoint in the project holding `cwd`, registering the project
/// first where there is none: the top of the git work tree holding `cwd`, else `cwd` itself,
/// beside any project it holds (see [`WatchParams::nest`]); the daemon refuses `/`, the home
/// folder, folders of the system and its own data (see `engine::registry::dangerous_root`).
fn record(
    ctx: &Ctx,
    agent: Agent,
    cwd: &Path,
    payload: Value,
    prompt: agents::Prompt,
) -> Result<String, ClientError> {
    let message_id = prompt
        .message_id
        .filter(|m| m.len() <= 256 && !m.contains('\n'));
    let mut label = prompt.prompt;
    let mut earlier = None;
    if agent == Agent::Cline && label.is_empty() {
        // Cline sends no text: its session's files say it (see `agents::cline`).
        if let (Ok(home), Some(session)) = (super::settings::home(), &prompt.session) {
            let (text, n) = crate::client::agents::cline::prompt_text(&home, session);
            label = text;
            earlier = Some(n);
        }
    }
    // The metadata is what stays true of the session (the transcript, the model): the prompt
    // is the label and its id the message id. Without them it is the same blob for every prompt
    // of a session, stored and kept alive once (a new one costs a ref and two more flushes). An
    // id that cannot be the message id stays in the metadata.
    // Which agent sent it is kept too: a rewind finds the prompt in that agent's session.
    let mut meta = payload;
    if let Value::Object(map) = &mut meta {
        // Qwen Code sends the prompt twice (`submitted_prompt` too).
        map.remove("prompt");
        map.remove("submitted_prompt");
        if let (Some(key), Some(_)) = (agent.message_id_key(), &message_id) {
            map.remove(key);
        }
        map.insert(AGENT_KEY.into(), agent.name().into());
        if let Some(n) = earlier {
            // The prompt's place among the session's (a rewind finds it by it).
            map.insert("prompt_index".into(), n.into());
        }
    }
    let params = CheckpointParams {
        project: cwd.to_path_buf(),
        label: Some(label),
        dialog: Some(dialog_name(agent, prompt.session.as_deref())),
        message_id,
        kind: None,
        meta: Some(meta),
    };
    let mut conn = ctx.connect_for_checkpoint()?;
    let c = match conn.call::<rpc::Checkpoint>(&params) {
        Err(ClientError::Rpc(e)) if e.kind() == Some(ErrorCode::NotAProject) => {
            // First use in this project: register it, then record.
            let watch = WatchParams {
                path: project_root(cwd),
                force: false,
                nest: true,
            };
            let w = conn.call::<rpc::Watch>(&watch)?;
            for other in &w.nested {
                note(
                    &ctx.paths.data_dir,
                    agent,
                    &format!(
                        "{} is now a project of its own, beside {} (which keeps its history: \
                         `ckpt -C {} log`)",
                        w.root.display(),
                        other.display(),
                        other.display()
                    ),
                );
            }
            conn.call::<rpc::Checkpoint>(&params)?
        }
        other => other?,
    };
    Ok(c.id.to_string())
}

/// Records a tool call's end (a step) or the turn's end on the running turn of the agent's
/// session; nothing where the project is not watched (its prompt was never recorded either).
fn record_step(
    ctx: &Ctx,
    agent: Agent,
    cwd: &Path,
    payload: &Value,
    prompt: &agents::Prompt,
    moment: Moment,
) -> Result<(), ClientError> {
    if moment == Moment::Other {
        return Ok(());
    }
    let call = match moment {
        Moment::Step => tool_call(agent, payload),
        _ => Default::default(),
    };
    let params = StepParams {
        project: cwd.to_path_buf(),
        dialog: dialog_name(agent, prompt.session.as_deref()),
        end: moment == Moment::End,
        tool: call.tool.filter(|t| t.len() <= 200 && !t.contains('\n')),
        paths: call.paths.into_iter().map(|p| cwd.join(p)).collect(),
        declared: call.declared,
        tool_use_id: call
            .tool_use_id
            .filter(|t| t.len() <= 200 && !t.contains('\n')),
        point: call.point,
    };
    let mut conn = ctx.connect_for_checkpoint()?;
    match conn.call::<rpc::Step>(&params) {
        Err(ClientError::Rpc(e)) if e.kind() == Some(ErrorCode::NotAProject) => Ok(()),
        other => other.map(drop),
    }
}

/// The dialog of an agent session: its id when it is a valid dialog name, else the id with
/// other characters replaced; the agent's name when it sends no session.
pub fn dialog_name(agent: Agent, session: Option<&str>) -> String {
    let Some(session) = session.filter(|s| !s.is_empty()) else {
        return agent.name().to_string();
    };
    let mut name: String = session
        .chars()
        .map(|c| match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '.' | '_' | '-' => c,
            _ => '-',
        })
        .take(100)
        .collect();
    if name.starts_with(['.', '-']) || name.ends_with(".lock") || name.contains("..") {
        name = format!("{}-{}", agent.name(), name.replace("..", "-"));
        name.truncate(100);
        if name.ends_with(".lock") {
            name.push('_');
        }
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_become_dialog_names() {
        let id = "3f2a9c1b-7d4e-4f00-9a1b-2c3d4e5f6a7b";
        assert_eq!(dialog_name(Agent::ClaudeCode, Some(id)), id);
        assert_eq!(dialog_name(Agent::Copilot, None), "copilot");
        assert_eq!(dialog_name(Agent::Gemini, Some("a/b c")), "a-b-c");
        assert_eq!(dialog_name(Agent::Codex, Some(".x")), "codex-.x");
        for odd in ["..", "-", "x.lock", &"z".repeat(300)] {
            let name = dialog_name(Agent::Cursor, Some(odd));
            crate::store::checkpoint::validate_dialog(&name).unwrap();
        }
    }
}
