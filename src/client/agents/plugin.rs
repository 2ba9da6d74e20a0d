//! OpenCode's and Kilo CLI's hook: a plugin file of ckpt's own (`.opencode/plugin/ckpt.js`,
//! `.kilo/plugin/ckpt.js`, or the user's config folder) that hands each prompt
//! (`chat.message`), each tool call's end (`tool.execute.after`) and each turn's end (the
//! `session.idle` event) to `ckpt hook opencode|kilo` on stdin, in Claude Code's dialect, and
//! prints nothing (OpenCode plugins have no stdout contract; they run inside the agent).
//!
//! Any plugin makes these agents npm-install their plugin package (`@opencode-ai/plugin`,
//! `@kilocode/plugin`) into every config folder they use before the first turn; offline that
//! waits about 80 s for npm to give up. Where a folder has no packages of its own, install
//! writes a *placeholder* of that package (its `package.json`, a lock naming it and
//! `node_modules/<package>/package.json`), which the agents take as installed; ckpt's plugin
//! imports nothing from it. A folder with packages of its own is left alone, and said so.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::agent::Agent;
use crate::client::commands::settings::write_text;
use crate::client::ClientError;

/// The plugin file's first line: a file at the plugin's path without it is not ckpt's.
const MARKER: &str = "// Written by `ckpt hook install ";
/// The placeholder's version: any version with a lock naming it is taken as installed.
const PLACEHOLDER_VERSION: &str = "0.0.0-ckpt-placeholder";

/// The project's config folder of the agent (`.opencode`, `.kilo`).
pub fn project_config_dir(agent: Agent, root: &Path) -> PathBuf {
    root.join(format!(".{}", agent.name()))
}

/// The npm package the agent installs for its plugins.
fn package(agent: Agent) -> &'static str {
    match agent {
        Agent::Kilo => "@kilocode/plugin",
        _ => "@opencode-ai/plugin",
    }
}

/// The plugin, running `exe hook AGENT`.
pub fn plugin_text(agent: Agent, exe: &str) -> String {
    let name = agent.name();
    let exe = serde_json::to_string(exe).expect("a string serialises");
    format!(
        r#"{MARKER}{name}`: ckpt records a checkpoint at each prompt, a step after
// each tool call and the turn's end. `ckpt hook uninstall {name}` removes this file.
import {{ spawnSync }} from "node:child_process";

const CKPT = {exe};

export const CkptCheckpoints = async ({{ directory }}) => {{
  // Claude Code's fields on stdin; ckpt's answer is not read (it prints nothing here).
  const hook = (fields) => {{
    try {{
      spawnSync(CKPT, ["hook", "{name}"], {{
        input: JSON.stringify({{ cwd: directory, ...fields }}),
        stdio: ["pipe", "ignore", "ignore"],
        timeout: 10000,
      }});
    }} catch {{}}
  }};
  return {{
    "chat.message": async (input, output) => {{
      const message = output.message || {{}};
      const model = message.model || input.model;
      hook({{
        hook_event_name: "UserPromptSubmit",
        session_id: input.sessionID,
        prompt_id: message.id,
        prompt: (output.parts || [])
          .filter((p) => p.type === "text" && !p.synthetic)
          .map((p) => p.text)
          .join("\n"),
        model: model ? `${{model.providerID}}/${{model.modelID}}` : undefined,
      }});
    }},
    "tool.execute.after": async (input) => {{
      hook({{
        hook_event_name: "PostToolUse",
        session_id: input.sessionID,
        tool_name: input.tool,
        tool_input: input.args,
        tool_use_id: input.callID,
      }});
    }},
    event: async ({{ event }}) => {{
      if (event.type === "session.idle") {{
        hook({{ hook_event_name: "Stop", session_id: (event.properties || {{}}).sessionID }});
      }}
    }},
  }};
}};
"#
    )
}

/// What is at a plugin's path.
#[derive(Debug, PartialEq)]
pub enum Found {
    Absent,
    /// ckpt's plugin, running this command.
    Ours(String),
    /// A file ckpt did not write (or cannot read: the reason).
    Foreign(String),
}

pub fn found(agent: Agent, path: &Path) -> Found {
    let text = match crate::fs::read_text(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Found::Absent,
        Err(e) => return Found::Foreign(format!("unreadable: {e}")),
    };
    if !text.starts_with(MARKER) {
        return Found::Foreign("a plugin ckpt did not write".into());
    }
    let exe = text
        .lines()
        .find_map(|l| l.strip_prefix("const CKPT = "))
        .and_then(|l| serde_json::from_str::<String>(l.trim_end_matches(';')).ok());
    match exe {
        Some(exe) => Found::Ours(format!(
            "{} hook {}",
            crate::client::commands::settings::shell_word(&exe),
            agent.name()
        )),
        None => Found::Foreign("ckpt's plugin, damaged (no `const CKPT`)".into()),
    }
}

/// What install did about the plugin package in one config folder.
#[derive(Debug, PartialEq)]
pub enum Placeholder {
    Written,
    /// The package (ckpt's placeholder or the real one) is there already.
    Present,
    /// The folder has packages of its own: the agent installs them (and its package) at start.
    OwnPackages,
}

/// Writes the plugin at `path` (running `exe`) and the package's placeholders in the config
/// folders the agent will use: the project's (for a project's plugin) and the user's. A file at
/// `path` that is not ckpt's is refused before anything is written. Whether the plugin changed,
/// and each folder's placeholder.
pub fn install(
    agent: Agent,
    path: &Path,
    exe: &str,
    root: Option<&Path>,
    user_dir: PathBuf,
) -> Result<(bool, Vec<(PathBuf, Placeholder)>), ClientError> {
    let text = plugin_text(agent, exe);
    if let Found::Foreign(why) = found(agent, path) {
        return Err(ClientError::Usage(format!(
            "{}: {why}; nothing was changed (move it away to install ckpt's)",
            path.display()
        )));
    }
    let mut dirs: Vec<PathBuf> = root
        .map(|r| project_config_dir(agent, r))
        .into_iter()
        .collect();
    dirs.push(user_dir);
    let mut placeholders = Vec::new();
    for dir in dirs {
        let state = placeholder(agent, &dir, root.is_some_and(|r| dir.starts_with(r)))?;
        placeholders.push((dir, state));
    }
    // The plugin last: until it is there, the agent loads nothing of ckpt's.
    let changed = crate::fs::read_text(path).ok().as_deref() != Some(text.as_str());
    if changed {
        let dir = path.parent().expect("a plugin file is in a folder");
        std::fs::create_dir_all(dir)
            .map_err(|e| ClientError::Usage(format!("cannot create {}: {e}", dir.display())))?;
        write_text(path, &text)?;
    }
    Ok((changed, placeholders))
}

/// The placeholder's files in `dir`: (name, text).
fn placeholder_files(agent: Agent) -> [(String, String); 3] {
    let pkg = package(agent);
    let text = |v: Value| format!("{}\n", serde_json::to_string_pretty(&v).expect("JSON"));
    let module = json!({
        "name": pkg,
        "version": PLACEHOLDER_VERSION,
        "description": format!("A placeholder written by `ckpt hook install {}`, so that the \
            agent does not wait for npm at start (ckpt's plugin imports nothing from it). \
            Delete this folder to have the agent install the real package.", agent.name()),
        "ckpt_placeholder": true,
    });
    let lock = json!({
        "lockfileVersion": 3,
        "requires": true,
        "packages": {
            "": { "dependencies": { pkg: PLACEHOLDER_VERSION } },
            format!("node_modules/{pkg}"): { "version": PLACEHOLDER_VERSION },
        },
    });
    let manifest = json!({ "dependencies": { pkg: PLACEHOLDER_VERSION } });
    [
        (format!("node_modules/{pkg}/package.json"), text(module)),
        ("package-lock.json".into(), text(lock)),
        // Last: a folder with a `package.json` is taken as set up (a failed write is redone).
        ("package.json".into(), text(manifest)),
    ]
}

/// What OpenCode writes as a config folder's `.gitignore` (its packages are not the project's).
const GITIGNORE: &str = "node_modules\npackage.json\npackage-lock.json\nbun.lock\n.gitignore\n";

fn placeholder(agent: Agent, dir: &Path, in_project: bool) -> Result<Placeholder, ClientError> {
    let files = placeholder_files(agent);
    if dir.join(&files[0].0).exists() {
        return Ok(Placeholder::Present);
    }
    if std::fs::symlink_metadata(dir.join("package.json")).is_ok() {
        return Ok(Placeholder::OwnPackages);
    }
    if in_project && std::fs::symlink_metadata(dir.join(".gitignore")).is_err() {
        std::fs::create_dir_all(dir)
            .map_err(|e| ClientError::Usage(format!("cannot create {}: {e}", dir.display())))?;
        write_text(&dir.join(".gitignore"), GITIGNORE)?;
    }
    for (name, text) in &files {
        let file = dir.join(name);
        let parent = file.parent().expect("in a folder");
        std::fs::create_dir_all(parent)
            .map_err(|e| ClientError::Usage(format!("cannot create {}: {e}", parent.display())))?;
        write_text(&file, text)?;
    }
    Ok(Placeholder::Written)
}

/// The placeholder's state in `dir`, as `hook status` shows it.
pub fn placeholder_state(agent: Agent, dir: &Path) -> &'static str {
    let files = placeholder_files(agent);
    let module = crate::fs::read_text(&dir.join(&files[0].0));
    match module {
        Ok(text) if text.contains("\"ckpt_placeholder\": true") => "placeholder",
        Ok(_) => "installed",
        Err(_) if dir.join("package.json").exists() => "installed at the agent's start",
        Err(_) => "missing: the agent npm-installs it at start (offline, about 80 s)",
    }
}

/// `hook status`'s row for the plugin at `path`, its package's state in `dir` beside it.
pub fn status_row(agent: Agent, path: &Path, dir: &Path, user: bool) -> Value {
    let state = match found(agent, path) {
        Found::Absent => "not installed".to_string(),
        Found::Foreign(why) => format!("not installed ({why} is at ckpt's place)"),
        Found::Ours(command) => format!(
            "installed with turn ends and steps ({command}); no trust step; plugin package: {}",
            placeholder_state(agent, dir)
        ),
    };
    json!({
        "agent": agent.name(),
        "scope": if user { "user" } else { "project" },
        "file": path,
        "state": state,
        "plugin_package": placeholder_state(agent, dir),
    })
}

/// Removes ckpt's plugin at `path` and, from the config folder the plugin's scope used (the
/// project's, or the user's with `user`), the placeholder's files that are still ckpt's own.
/// How many plugin files were removed (0 or 1); a file that is not ckpt's is left, and said.
pub fn uninstall(agent: Agent, path: &Path, dir: &Path) -> Result<usize, ClientError> {
    let removed = match found(agent, path) {
        Found::Absent => 0,
        Found::Foreign(why) => {
            return Err(ClientError::Usage(format!(
                "{}: {why}; left as it is",
                path.display()
            )))
        }
        Found::Ours(_) => {
            std::fs::remove_file(path).map_err(|e| {
                ClientError::Usage(format!("cannot remove {}: {e}", path.display()))
            })?;
            1
        }
    };
    let files = placeholder_files(agent);
    if placeholder_state(agent, dir) == "placeholder" {
        // The manifest first: a folder left half-done is then one the next install redoes.
        for (name, text) in files.iter().rev() {
            let file = dir.join(name);
            if crate::fs::read_text(&file).ok().as_deref() == Some(text.as_str()) {
                let _ = std::fs::remove_file(&file);
            }
        }
        let module = dir.join(&files[0].0);
        for folder in module.ancestors().skip(1).take(3) {
            // Only empty folders go (`remove_dir` refuses others).
            let _ = std::fs::remove_dir(folder);
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugin_names_its_ckpt_and_is_told_from_others() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ckpt.js");
        assert_eq!(found(Agent::OpenCode, &path), Found::Absent);
        std::fs::write(&path, plugin_text(Agent::OpenCode, "/opt/my tools/ckpt")).unwrap();
        assert_eq!(
            found(Agent::OpenCode, &path),
            Found::Ours("'/opt/my tools/ckpt' hook opencode".into())
        );
        std::fs::write(&path, "export const X = async () => ({});\n").unwrap();
        assert!(matches!(found(Agent::OpenCode, &path), Found::Foreign(_)));
        // A quote in the path stays inside the string.
        let text = plugin_text(Agent::Kilo, "/a\"b/ckpt");
        assert!(text.contains(r#"const CKPT = "/a\"b/ckpt";"#), "{text}");
        assert!(text.contains(r#"["hook", "kilo"]"#));
    }

    #[test]
    fn placeholders_go_only_where_the_folder_has_no_packages() {
        let home = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let own = home.path().join(".config/opencode");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::write(own.join("package.json"), "{\"dependencies\":{\"x\":\"1\"}}").unwrap();
        let path = root.path().join(".opencode/plugin/ckpt.js");
        let (changed, placed) = install(
            Agent::OpenCode,
            &path,
            "/bin/ckpt",
            Some(root.path()),
            own.clone(),
        )
        .unwrap();
        assert!(changed);
        assert_eq!(placed[0].1, Placeholder::Written);
        assert_eq!(placed[1], (own.clone(), Placeholder::OwnPackages));
        let project = root.path().join(".opencode");
        assert_eq!(placeholder_state(Agent::OpenCode, &project), "placeholder");
        assert!(project.join(".gitignore").is_file());
        let again = install(
            Agent::OpenCode,
            &path,
            "/bin/ckpt",
            Some(root.path()),
            own.clone(),
        )
        .unwrap();
        assert!(!again.0);
        assert_eq!(again.1[0].1, Placeholder::Present);
        assert_eq!(uninstall(Agent::OpenCode, &path, &project).unwrap(), 1);
        assert!(!path.exists() && !project.join("node_modules").exists());
        assert!(!project.join("package.json").exists());
        // The user's own packages were never touched.
        assert!(own.join("package.json").is_file() && !own.join("node_modules").exists());
    }
}
