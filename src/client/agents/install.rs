//! `ckpt hook install|uninstall|status`: ckpt's entry in an agent's settings, merged into what
//! is there. The user's other settings keep their content and their order; a file that is not
//! valid JSON is refused, never overwritten; installing twice changes nothing.

use std::path::Path;

use serde_json::{json, Map, Value};

use super::agent::{project_root, Agent, ALL};
use super::{cline_hooks, codex_trust, gemini_trust, plugin};
use crate::client::commands::json_text;
use crate::client::commands::settings::{
    edit_settings, edit_settings_in_place, home, read_settings, shell_word, write_text,
};
use crate::client::commands::Ctx;
use crate::client::mcp;
use crate::client::ClientError;
use crate::protocol::methods::WatchParams;
use crate::protocol::rpc;

/// This `ckpt`'s absolute path, which agents run, so that their PATH does not matter.
fn exe() -> Result<String, ClientError> {
    let exe = std::env::current_exe()
        .map_err(|e| ClientError::Usage(format!("cannot tell where ckpt is installed: {e}")))?;
    exe.to_str()
        .map(String::from)
        .ok_or_else(|| ClientError::Usage(format!("ckpt's path {} is not UTF-8", exe.display())))
}

/// The command an agent runs.
fn hook_command(agent: Agent) -> Result<String, ClientError> {
    Ok(format!("{} hook {}", shell_word(&exe()?), agent.name()))
}

/// The list of entries under `event`, created if absent.
fn entries<'s>(
    agent: Agent,
    settings: &'s mut Map<String, Value>,
    event: &str,
) -> Result<&'s mut Vec<Value>, String> {
    if let Some(version) = agent.file_version() {
        settings.entry("version").or_insert(json!(version));
    }
    let hooks = settings.entry("hooks").or_insert_with(|| json!({}));
    let hooks = hooks
        .as_object_mut()
        .ok_or("its `hooks` is not an object")?;
    let list = hooks.entry(event).or_insert_with(|| json!([]));
    list.as_array_mut()
        .ok_or_else(|| format!("its `hooks.{event}` is not a list"))
}

/// Makes `list` hold exactly one entry of ckpt's, running `command`: an older one (another
/// ckpt path) is replaced in place; whether anything changed.
fn put_ours(agent: Agent, list: &mut Vec<Value>, command: &str) -> bool {
    let ours: Vec<usize> = (0..list.len())
        .filter(|&i| agent.commands_of(&list[i]).iter().any(|c| agent.is_ours(c)))
        .collect();
    let current = ours
        .first()
        .is_some_and(|&i| agent.commands_of(&list[i]) == [command.to_string()]);
    if current && ours.len() == 1 {
        return false;
    }
    let at = ours.first().copied();
    for &i in ours.iter().rev() {
        list.remove(i);
    }
    list.insert(at.unwrap_or(list.len()), agent.entry(command));
    true
}

pub fn install(ctx: &Ctx, agent: Agent, user: bool, git_exclude: bool) -> Result<i32, ClientError> {
    refuse_generic(agent, "install")?;
    // The project as the hook will record it: the top of the work tree, from any folder in it.
    let root = project_root(&ctx.base);
    let path = agent.settings_file(&root, &home()?, user);
    let command = hook_command(agent)?;
    let mut placeholders = Vec::new();
    let changed = if agent.is_plugin() {
        let user_dir = agent.user_config_dir(&home()?);
        let project = (!user).then_some(root.as_path());
        let (changed, placed) = plugin::install(agent, &path, &exe()?, project, user_dir)?;
        placeholders = placed;
        changed
    } else if agent == Agent::Cline {
        cline_hooks::install(&path, &exe()?)?
    } else {
        edit_settings(&path, |settings: &mut Map<String, Value>| {
            // Every event is checked before any is changed: a bad one changes nothing.
            for event in agent.events() {
                entries(agent, settings, event).map_err(|why| {
                    ClientError::Usage(format!("{}: {why}; nothing was changed", path.display()))
                })?;
            }
            let mut changed = false;
            for event in agent.events() {
                let list = entries(agent, settings, event).expect("checked above");
                changed |= put_ours(agent, list, &command);
            }
            Ok(changed)
        })?
    };
    if !user {
        // Registering now makes the first prompt's checkpoint cheap (the first full read of a
        // big project happens here, not while the agent waits).
        let watch = WatchParams {
            path: root.clone(),
            force: false,
            nest: false,
        };
        ctx.connect()?.call::<rpc::Watch>(&watch)?;
    }
    let verb = if changed {
        "installed"
    } else {
        "already installed"
    };
    // The file names this machine's ckpt: git status would list it, unless kept out.
    let git_excluded = match (git_exclude, user) {
        (true, false) => exclude_from_git(&root, &path)?,
        _ => false,
    };
    let placed: Vec<Value> = placeholders
        .iter()
        .map(
            |(dir, state)| json!({ "folder": dir, "package": format!("{state:?}").to_lowercase() }),
        )
        .collect();
    let mut result = json!({ "agent": agent.name(), "file": path, "command": command,
        "changed": changed, "project": (!user).then_some(&root), "git_excluded": git_excluded });
    if agent.is_plugin() {
        result["plugin_package"] = json!(placed);
    }
    if ctx.out.json(&result) {
        return Ok(0);
    }
    outln!(
        "{verb}: {} runs `{command}` ({})",
        agent.name(),
        path.display()
    );
    if !user {
        let base = std::fs::canonicalize(&ctx.base).unwrap_or_else(|_| ctx.base.clone());
        if base != root {
            outln!(
                "the project is the top of the work tree, {} (where the hook records prompts)",
                root.display()
            );
        }
        outln!(
            "ckpt keeps that file out of checkpoints: no restore, rewind or fetch removes or \
             replaces its hook"
        );
        if git_excluded {
            outln!("added it to .git/info/exclude: git status no longer lists it");
        } else if shown_by_git(&root, &path) {
            outln!(
                "git status lists it (it names this machine's ckpt): `ckpt hook install {} \
                 --git-exclude` keeps it out (.git/info/exclude)",
                agent.name()
            );
        }
    }
    if agent == Agent::Codex {
        outln!(
            "Codex runs a new hook only once you trust it: `ckpt hook trust codex` records that \
             (or trust it in Codex's `/hooks`)."
        );
    }
    if agent == Agent::Gemini && !user {
        outln!("Gemini CLI runs project hooks only in a trusted folder.");
    }
    if agent == Agent::Copilot && !user {
        outln!("{COPILOT_FOLDER_TRUST}.");
    }
    if agent == Agent::Qwen && !user {
        let trust = gemini_trust::qwen_folder_trust(&home()?, &root);
        outln!("{}.", gemini_trust::qwen_advice(trust).1);
    }
    for (dir, state) in &placeholders {
        match state {
            plugin::Placeholder::Written => outln!(
                "wrote a placeholder of {}'s plugin package in {} (so that it does not wait \
                 for npm at start; ckpt's plugin needs nothing from it)",
                agent.name(),
                dir.display()
            ),
            plugin::Placeholder::OwnPackages => outln!(
                "{} has packages of its own: {} npm-installs them and its plugin package at \
                 start (offline it waits about 80 s for npm)",
                dir.display(),
                agent.name()
            ),
            plugin::Placeholder::Present => {}
        }
    }
    Ok(0)
}

/// `generic` names no agent whose settings ckpt knows: its hook is wired by hand.
fn refuse_generic(agent: Agent, verb: &str) -> Result<(), ClientError> {
    match agent {
        Agent::Generic => Err(ClientError::Usage(format!(
            "ckpt hook {verb} generic: ckpt does not know that agent's settings; make its \
             prompt, turn-end and after-tool hooks run `ckpt hook generic` (JSON on stdin, \
             Claude Code's fields: see the README's \"Any other agent\")"
        ))),
        _ => Ok(()),
    }
}

/// Whether git would list `file` (in the work tree at `root`) as untracked: not ignored, not
/// tracked. False where git cannot tell (no repository, no git).
fn shown_by_git(root: &Path, file: &Path) -> bool {
    let git = |args: &[&std::ffi::OsStr]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .ok()
            .and_then(|s| s.code())
    };
    let file = file.as_os_str();
    // check-ignore: 0 ignored, 1 not ignored, 128 no repository.
    git(&["check-ignore".as_ref(), "-q".as_ref(), file]) == Some(1)
        && git(&["ls-files".as_ref(), "--error-unmatch".as_ref(), file]) != Some(0)
}

/// Adds `file` to the repository's `info/exclude` (where git says it is, worktrees included);
/// whether it was added (false: git ignores it already).
fn exclude_from_git(root: &Path, file: &Path) -> Result<bool, ClientError> {
    if !shown_by_git(root, file) {
        return Ok(false);
    }
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args([
            "rev-parse",
            "--path-format=absolute",
            "--git-path",
            "info/exclude",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| ClientError::Usage(format!("cannot run git: {e}")))?;
    let exclude = std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !out.status.success() || !exclude.is_absolute() {
        return Err(ClientError::Usage(format!(
            "{} is not in a git work tree: nothing to exclude it from",
            root.display()
        )));
    }
    let rel = file.strip_prefix(root).unwrap_or(file);
    // Anchored at the top: that file, not every file of that name.
    let line = format!("/{}\n", rel.display());
    let mut text = crate::fs::read_text(&exclude).unwrap_or_default();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&line);
    if let Some(dir) = exclude.parent() {
        std::fs::create_dir_all(dir)?;
    }
    write_text(&exclude, &text)?;
    Ok(true)
}

/// The agents whose hook is installed for the project at `root` (its own settings, or the
/// user's, which run everywhere): a prompt there is recorded.
pub fn installed_for(root: &Path) -> Vec<String> {
    let Ok(home) = home() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for agent in ALL {
        for user in [false, true] {
            let path = agent.settings_file(root, &home, user);
            let ours = match agent {
                Agent::Cline => matches!(cline_hooks::found(&path), plugin::Found::Ours(_)),
                _ if agent.is_plugin() => {
                    matches!(plugin::found(agent, &path), plugin::Found::Ours(_))
                }
                _ => read_settings(&path).is_ok_and(|s| find_ours(agent, &s).is_some()),
            };
            if ours {
                let scope = if user {
                    "your user settings"
                } else {
                    "the project"
                };
                out.push(format!("{} ({scope})", agent.name()));
            }
        }
    }
    out
}

pub fn uninstall(ctx: &Ctx, agent: Agent, user: bool) -> Result<i32, ClientError> {
    refuse_generic(agent, "uninstall")?;
    let path = agent.settings_file(&project_root(&ctx.base), &home()?, user);
    let mut removed = 0;
    if agent.is_plugin() {
        let dir = match user {
            true => agent.user_config_dir(&home()?),
            false => plugin::project_config_dir(agent, &project_root(&ctx.base)),
        };
        removed = plugin::uninstall(agent, &path, &dir)?;
    } else if agent == Agent::Cline {
        removed = cline_hooks::uninstall(&path)?;
    } else {
        // The entries taken out of the text itself, the rest of the user's file byte for byte.
        let in_place = |text: &str| {
            let mut text = text.to_string();
            for event in agent.events() {
                let settings: Value = serde_json::from_str(&text).ok()?;
                let Some(list) = settings
                    .get("hooks")
                    .and_then(|h| h.get(event))
                    .and_then(Value::as_array)
                else {
                    continue;
                };
                let ours: Vec<usize> = (0..list.len())
                    .filter(|&i| agent.commands_of(&list[i]).iter().any(|c| agent.is_ours(c)))
                    .collect();
                for &i in ours.iter().rev() {
                    text = json_text::remove_element(&text, &["hooks", event], i)?;
                }
                // A list left empty by ckpt's entry going is ckpt's too.
                if !ours.is_empty() && ours.len() == list.len() {
                    text = json_text::remove_member(&text, &["hooks"], event)?;
                }
            }
            Some(text)
        };
        edit_settings_in_place(
            &path,
            |settings| {
                for event in agent.events() {
                    if let Some(list) = settings
                        .get_mut("hooks")
                        .and_then(Value::as_object_mut)
                        .and_then(|h| h.get_mut(*event))
                        .and_then(Value::as_array_mut)
                    {
                        let before = list.len();
                        list.retain(|e| !agent.commands_of(e).iter().any(|c| agent.is_ours(c)));
                        removed += before - list.len();
                        if list.is_empty() && before > 0 {
                            if let Some(hooks) =
                                settings.get_mut("hooks").and_then(Value::as_object_mut)
                            {
                                hooks.remove(*event);
                            }
                        }
                    }
                }
                Ok(removed > 0)
            },
            in_place,
        )?;
    }
    let result = json!({ "agent": agent.name(), "file": path, "removed": removed });
    let text = match removed {
        0 => format!("no ckpt hook for {} in {}", agent.name(), path.display()),
        _ => format!(
            "removed the ckpt hook for {} from {}",
            agent.name(),
            path.display()
        ),
    };
    ctx.out.value_or(&result, &text);
    Ok(0)
}

/// What a folder's Copilot CLI hooks need, as Copilot CLI 1.0.102 behaves.
const COPILOT_FOLDER_TRUST: &str = "Copilot runs a folder's hooks only in a trusted folder \
     (`copilot --trust-folder` trusts it for one new `-p` session, and cannot be combined with \
     `--resume`); `ckpt hook install copilot --user` needs no trust";

pub fn status(ctx: &Ctx) -> Result<i32, ClientError> {
    let home = home()?;
    let codex_config = codex_trust::read_config(&codex_trust::codex_home(&home));
    let root = project_root(&ctx.base);
    let mut rows = Vec::new();
    for agent in ALL {
        for user in [false, true] {
            let path = agent.settings_file(&root, &home, user);
            if agent.is_plugin() {
                let dir = match user {
                    true => agent.user_config_dir(&home),
                    false => plugin::project_config_dir(agent, &root),
                };
                rows.push(plugin::status_row(agent, &path, &dir, user));
                continue;
            }
            if agent == Agent::Cline {
                rows.push(cline_hooks::status_row(&path, user));
                continue;
            }
            let mut row = json!({
                "agent": agent.name(),
                "scope": if user { "user" } else { "project" },
                "file": path,
            });
            let state = match read_settings(&path) {
                Err(e) => format!("unreadable: {e}"),
                Ok(settings) => match find_ours(agent, &settings) {
                    None => "not installed".into(),
                    Some((group, index, handler)) => {
                        let command = agent.command_of(handler).unwrap_or_default();
                        let turns = turn_events_installed(agent, &settings);
                        row["turn_events"] = json!(turns);
                        let mut state = match agent.events().len() {
                            1 => format!("installed ({command})"),
                            _ if turns.len() + 1 == agent.events().len() => {
                                format!("installed with turn ends and steps ({command})")
                            }
                            _ => format!(
                                "installed ({command}); prompts only: `ckpt hook install {}` \
                                 adds turn ends and steps",
                                agent.name()
                            ),
                        };
                        if agent == Agent::Codex {
                            let project = (!user).then_some(root.as_path());
                            let said = super::codex_hooks::status_row(
                                &path,
                                &settings,
                                (group, index, handler),
                                codex_config.as_ref(),
                                project,
                                &mut row,
                            );
                            state = format!("{state}; {said}");
                        }
                        if agent == Agent::Copilot {
                            row["copilot_trust"] =
                                json!(if user { "none needed" } else { "folder" });
                            if !user {
                                state = format!("{state}; {COPILOT_FOLDER_TRUST}");
                            }
                        }
                        if agent == Agent::Qwen && !user {
                            let trust = gemini_trust::qwen_folder_trust(&home, &root);
                            let (code, advice) = gemini_trust::qwen_advice(trust);
                            row["qwen_folder_trust"] = json!(code);
                            state = format!("{state}; {advice}");
                        }
                        if agent == Agent::Gemini && !user {
                            let dir = gemini_trust::gemini_dir(&home);
                            let trust = gemini_trust::folder_trust(&dir, &root);
                            row["gemini_folder_trust"] = json!(trust.code());
                            state = format!("{state}; {}", trust.advice());
                        }
                        state
                    }
                },
            };
            row["state"] = json!(state);
            rows.push(row);
        }
    }
    // Where `ckpt mcp` is registered for this project.
    for agent in [
        Agent::ClaudeCode,
        Agent::Codex,
        Agent::Gemini,
        Agent::Cursor,
        Agent::Qwen,
    ] {
        let file = mcp::install::config_file(agent, &root, &home)?;
        let state = match mcp::install::installed(agent, &root, &home) {
            Ok(Some(args)) => format!("MCP server installed (ckpt {})", args.join(" ")),
            Ok(None) => "MCP server not installed".into(),
            Err(e) => format!("unreadable: {e}"),
        };
        rows.push(json!({"agent": agent.name(), "scope": "mcp", "file": file, "state": state}));
    }
    if !ctx.out.json(&rows) {
        for r in &rows {
            outln!(
                "{:<12} {:<8} {}  {}",
                r["agent"].as_str().unwrap_or(""),
                r["scope"].as_str().unwrap_or(""),
                r["state"].as_str().unwrap_or(""),
                r["file"].as_str().unwrap_or("")
            );
        }
    }
    Ok(0)
}

/// The turn-end and after-tool events under which ckpt's hook is installed.
fn turn_events_installed(agent: Agent, settings: &Map<String, Value>) -> Vec<&'static str> {
    agent.events()[1..]
        .iter()
        .copied()
        .filter(|event| {
            settings
                .get("hooks")
                .and_then(|h| h.get(*event))
                .and_then(Value::as_array)
                .is_some_and(|list| {
                    list.iter()
                        .any(|e| agent.commands_of(e).iter().any(|c| agent.is_ours(c)))
                })
        })
        .collect()
}

/// ckpt's entry in `settings`: its group's index in the event's list, its index in the group's
/// `hooks` (0 for agents whose entries are flat), and the handler object.
fn find_ours(agent: Agent, settings: &Map<String, Value>) -> Option<(usize, usize, &Value)> {
    agent.find_ours_in(settings, agent.event())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_entries_are_recognised_whatever_the_path() {
        assert!(Agent::Gemini.is_ours("/usr/bin/ckpt hook gemini"));
        assert!(Agent::Gemini.is_ours("'/opt/my tools/ckpt' hook gemini"));
        assert!(!Agent::Gemini.is_ours("/usr/bin/ckpt hook codex"));
        assert!(!Agent::Gemini.is_ours("/usr/bin/notckpt hook gemini"));
        assert_eq!(shell_word("/a b/it's"), r"'/a b/it'\''s'");
    }
}
