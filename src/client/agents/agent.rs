//! What each agent sends its prompt hook, what it wants back on stdout, and where its settings
//! keep hooks. Facts from the agents' documentation and from running their binaries.

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Agent {
    /// Claude Code (`UserPromptSubmit`).
    ClaudeCode,
    /// Gemini CLI (`BeforeAgent`).
    Gemini,
    /// OpenAI Codex CLI (`UserPromptSubmit`).
    Codex,
    /// Cursor (`beforeSubmitPrompt`).
    Cursor,
    /// GitHub Copilot CLI (`userPromptSubmitted`).
    Copilot,
    /// Qwen Code (`UserPromptSubmit`, Claude Code's dialect).
    Qwen,
    /// OpenCode (a plugin: `chat.message`, `tool.execute.after`, `session.idle`).
    #[value(name = "opencode")]
    OpenCode,
    /// Kilo CLI (OpenCode's plugin, in `.kilo/`).
    Kilo,
    /// Cline CLI (executable hook files: `TaskStart`, `TaskComplete`, `PostToolUse`).
    Cline,
    /// Any other agent that speaks Claude Code's dialect (`UserPromptSubmit`, `Stop`,
    /// `PostToolUse`): it has no settings file ckpt knows, its hook runs `ckpt hook generic`.
    Generic,
}

/// The agents whose settings `ckpt hook install` writes (every one but [`Agent::Generic`]).
pub const ALL: [Agent; 9] = [
    Agent::ClaudeCode,
    Agent::Gemini,
    Agent::Codex,
    Agent::Cursor,
    Agent::Copilot,
    Agent::Qwen,
    Agent::OpenCode,
    Agent::Kilo,
    Agent::Cline,
];

/// Which moment of a turn a hook call reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    /// A user message: the turn starts.
    Prompt,
    /// A tool call ended.
    Step,
    /// The turn ended.
    End,
    /// An event ckpt does not read.
    Other,
}

/// What a hook call says about the prompt, whatever the agent.
#[derive(Debug, Default, PartialEq)]
pub struct Prompt {
    /// The folder the agent works in.
    pub cwd: Option<PathBuf>,
    pub session: Option<String>,
    pub message_id: Option<String>,
    pub prompt: String,
}

impl Agent {
    pub fn name(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude-code",
            Agent::Gemini => "gemini",
            Agent::Codex => "codex",
            Agent::Cursor => "cursor",
            Agent::Copilot => "copilot",
            Agent::Qwen => "qwen",
            Agent::OpenCode => "opencode",
            Agent::Kilo => "kilo",
            Agent::Cline => "cline",
            Agent::Generic => "generic",
        }
    }

    /// The agent named `name` (as [`Agent::name`] spells it).
    pub fn from_name(name: &str) -> Option<Agent> {
        ALL.into_iter()
            .chain([Agent::Generic])
            .find(|a| a.name() == name)
    }

    /// Whether ckpt's hook is a plugin file of the agent's (see `agents::plugin`) rather than
    /// an entry in its settings: the plugin speaks Claude Code's dialect to `ckpt hook`.
    pub fn is_plugin(self) -> bool {
        matches!(self, Agent::OpenCode | Agent::Kilo)
    }

    /// The user's config folder of a plugin agent: `$XDG_CONFIG_HOME/<agent>`, else
    /// `~/.config/<agent>`.
    pub fn user_config_dir(self, home: &Path) -> PathBuf {
        let config = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| home.join(".config"));
        config.join(self.name())
    }

    /// The hook event ckpt installs under.
    pub fn event(self) -> &'static str {
        match self {
            Agent::ClaudeCode | Agent::Codex | Agent::Qwen | Agent::Generic => "UserPromptSubmit",
            Agent::OpenCode | Agent::Kilo => "UserPromptSubmit",
            Agent::Cline => "TaskStart",
            Agent::Gemini => "BeforeAgent",
            Agent::Cursor => "beforeSubmitPrompt",
            Agent::Copilot => "userPromptSubmitted",
        }
    }

    /// Every hook event ckpt installs under: the prompt's ([`Agent::event`]), then the turn's
    /// end and the after-tool one.
    pub fn events(self) -> &'static [&'static str] {
        match self {
            Agent::ClaudeCode | Agent::Qwen | Agent::Generic | Agent::OpenCode | Agent::Kilo => {
                &["UserPromptSubmit", "Stop", "PostToolUse"]
            }
            Agent::Gemini => &["BeforeAgent", "AfterAgent", "AfterTool"],
            Agent::Cursor => &["beforeSubmitPrompt", "stop", "afterFileEdit"],
            Agent::Codex => &["UserPromptSubmit", "Stop", "PostToolUse"],
            Agent::Copilot => &["userPromptSubmitted", "agentStop", "postToolUse"],
            Agent::Cline => &["TaskStart", "TaskComplete", "PostToolUse"],
        }
    }

    /// What a hook call is, from the event the payload names (a payload naming none is a
    /// prompt's: how the agents without names send it). Qwen Code sends `UserPromptSubmit`
    /// before every model call of a turn; only the first carries `submitted_prompt`, the
    /// others (after each tool's result) are not prompts.
    pub fn moment(self, payload: &Value) -> Moment {
        if matches!(self, Agent::Qwen | Agent::Generic)
            && payload.get("hook_event_name").and_then(Value::as_str) == Some("UserPromptSubmit")
            && payload.get("submitted_prompt").is_none()
            && (self == Agent::Qwen || payload.get("prompt").and_then(Value::as_str) == Some(""))
        {
            return Moment::Other;
        }
        // Copilot's own (camelCase) events name none: their fields tell them apart.
        let unnamed = match (self, payload.get("toolName"), payload.get("stopReason")) {
            (Agent::Copilot, Some(_), _) => "postToolUse",
            (Agent::Copilot, None, Some(_)) => "agentStop",
            _ => self.event(),
        };
        let event = match self {
            // Cline names its events by their inner names (`agent_start`, ...).
            Agent::Cline => super::cline::event_of(payload).unwrap_or(""),
            _ => payload
                .get("hook_event_name")
                .and_then(Value::as_str)
                .unwrap_or(unnamed),
        };
        match event {
            "Stop" | "AfterAgent" | "stop" | "agentStop" => Moment::End,
            "PostToolUse" | "AfterTool" | "afterFileEdit" | "postToolUse" => Moment::Step,
            "UserPromptSubmit" | "BeforeAgent" | "beforeSubmitPrompt" | "userPromptSubmitted" => {
                Moment::Prompt
            }
            _ => Moment::Other,
        }
    }

    /// Exactly what the hook prints on stdout, whatever happened: Claude Code, Codex and Qwen
    /// Code add plain stdout to the model's context, Gemini wants JSON or nothing, Cursor must
    /// be told to continue, Copilot ignores it.
    pub fn stdout(self, moment: Moment) -> &'static str {
        match (self, moment) {
            (Agent::Cursor, Moment::Prompt) => "{\"continue\":true}\n",
            _ => "",
        }
    }

    /// The payload's field that names the prompt itself (recorded as the checkpoint's message
    /// id), for the agents that send one.
    pub fn message_id_key(self) -> Option<&'static str> {
        match self {
            Agent::ClaudeCode | Agent::Qwen | Agent::Generic => Some("prompt_id"),
            Agent::OpenCode | Agent::Kilo => Some("prompt_id"),
            // The prompt's run (`conv_…`), new at each prompt.
            Agent::Cline => Some("taskId"),
            Agent::Codex => Some("turn_id"),
            Agent::Cursor => Some("generation_id"),
            Agent::Gemini | Agent::Copilot => None,
        }
    }

    /// Reads the agent's hook payload. Unknown fields are ignored; only the prompt is needed.
    pub fn parse(self, payload: &Value) -> Prompt {
        let text = |key: &str| payload.get(key).and_then(Value::as_str).map(String::from);
        let cwd = match self {
            // Cursor names the workspace folders; the first is the project (see the README).
            Agent::Cline => super::cline::workspace(payload).or_else(|| text("cwd")),
            Agent::Cursor => payload
                .get("workspace_roots")
                .and_then(Value::as_array)
                .and_then(|roots| roots.first())
                .and_then(Value::as_str)
                .map(String::from)
                .or_else(|| text("cwd")),
            _ => text("cwd"),
        };
        let session = match self {
            Agent::ClaudeCode | Agent::Gemini | Agent::Codex | Agent::Qwen => text("session_id"),
            Agent::OpenCode | Agent::Kilo => text("session_id"),
            Agent::Cline => super::cline::session(payload),
            Agent::Generic => text("session_id").or_else(|| text("sessionId")),
            Agent::Cursor => text("conversation_id"),
            Agent::Copilot => text("sessionId").or_else(|| text("session_id")),
        };
        let message_id = self.message_id_key().and_then(&text);
        Prompt {
            cwd: cwd.map(PathBuf::from),
            session,
            message_id,
            // Qwen Code's `prompt` is the text as typed; `submitted_prompt` what was sent.
            prompt: text("submitted_prompt")
                .or_else(|| text("prompt"))
                .unwrap_or_default(),
        }
    }

    /// The settings file that holds the hook: the project's, or the user's with `user`.
    pub fn settings_file(self, project: &Path, home: &Path, user: bool) -> PathBuf {
        let codex_home = super::codex_trust::codex_home(home);
        match (self, user) {
            (Agent::ClaudeCode, false) => project.join(".claude/settings.local.json"),
            (Agent::ClaudeCode, true) => home.join(".claude/settings.json"),
            (Agent::Gemini, false) => project.join(".gemini/settings.json"),
            (Agent::Gemini, true) => home.join(".gemini/settings.json"),
            (Agent::Codex, false) => project.join(".codex/hooks.json"),
            (Agent::Codex, true) => codex_home.join("hooks.json"),
            (Agent::Cursor, false) => project.join(".cursor/hooks.json"),
            (Agent::Cursor, true) => home.join(".cursor/hooks.json"),
            (Agent::Copilot, false) => project.join(".github/hooks/ckpt.json"),
            (Agent::Copilot, true) => home.join(".copilot/hooks/ckpt.json"),
            (Agent::Qwen, false) => project.join(".qwen/settings.json"),
            (Agent::Qwen, true) => home.join(".qwen/settings.json"),
            (Agent::Cline, false) => project.join(".clinerules/hooks/TaskStart"),
            (Agent::Cline, true) => home.join(".cline/hooks/TaskStart"),
            (Agent::OpenCode | Agent::Kilo, false) => {
                project.join(format!(".{}/plugin/ckpt.js", self.name()))
            }
            (Agent::OpenCode | Agent::Kilo, true) => {
                self.user_config_dir(home).join("plugin/ckpt.js")
            }
            // Never written: `hook install generic` is refused before (see `install`).
            (Agent::Generic, _) => project.join(".ckpt-generic-hook.json"),
        }
    }

    /// The entry that runs `command`, in the agent's shape, with a short timeout.
    pub fn entry(self, command: &str) -> Value {
        match self {
            Agent::ClaudeCode | Agent::Codex | Agent::Qwen | Agent::Generic => json!({
                "hooks": [{ "type": "command", "command": command, "timeout": HOOK_TIMEOUT_S }]
            }),
            // Never an entry in settings: the plugin file runs it (see `agents::plugin`).
            Agent::OpenCode | Agent::Kilo | Agent::Cline => json!({ "command": command }),
            Agent::Gemini => json!({
                "hooks": [{ "type": "command", "command": command, "timeout": HOOK_TIMEOUT_S * 1000 }]
            }),
            Agent::Cursor => json!({ "command": command }),
            Agent::Copilot => json!({
                "type": "command", "bash": command, "timeoutSec": HOOK_TIMEOUT_S
            }),
        }
    }

    /// Cursor's and Copilot's files carry a format version.
    pub fn file_version(self) -> Option<u64> {
        matches!(self, Agent::Cursor | Agent::Copilot).then_some(1)
    }

    /// Whether `command` runs ckpt's hook for this agent (whatever ckpt binary it names).
    pub fn is_ours(self, command: &str) -> bool {
        let suffix = format!(" hook {}", self.name());
        command.ends_with(&suffix) && {
            let program = command[..command.len() - suffix.len()].trim_matches('\'');
            Path::new(program).file_name().is_some_and(|n| n == "ckpt")
        }
    }

    /// Where ckpt's handler is listed under `event` in the agent's `settings`: its entry's
    /// place, its own place in the entry, and itself.
    pub fn find_ours_in<'s>(
        self,
        settings: &'s Map<String, Value>,
        event: &str,
    ) -> Option<(usize, usize, &'s Value)> {
        let list = settings.get("hooks")?.get(event)?.as_array()?;
        list.iter().enumerate().find_map(|(g, entry)| {
            let handlers = self.handlers_of(entry).into_iter().enumerate();
            handlers
                .filter(|(_, h)| self.command_of(h).is_some_and(|c| self.is_ours(&c)))
                .map(|(i, h)| (g, i, h))
                .next()
        })
    }

    /// The handlers of an entry: Claude Code, Codex and Gemini group them under `hooks`;
    /// Cursor's and Copilot's entries are handlers themselves.
    pub fn handlers_of(self, entry: &Value) -> Vec<&Value> {
        match self {
            Agent::ClaudeCode | Agent::Codex | Agent::Gemini | Agent::Qwen | Agent::Generic => {
                entry
                    .get("hooks")
                    .and_then(Value::as_array)
                    .map(|hooks| hooks.iter().collect())
                    .unwrap_or_default()
            }
            Agent::Cursor | Agent::Copilot | Agent::OpenCode | Agent::Kilo | Agent::Cline => {
                vec![entry]
            }
        }
    }

    /// The command one handler runs.
    pub fn command_of(self, handler: &Value) -> Option<String> {
        let key = if self == Agent::Copilot {
            "bash"
        } else {
            "command"
        };
        handler.get(key).and_then(Value::as_str).map(String::from)
    }

    /// The commands an entry runs (ckpt's own entry is the one running `ckpt hook AGENT`).
    pub fn commands_of(self, entry: &Value) -> Vec<String> {
        self.handlers_of(entry)
            .into_iter()
            .filter_map(|h| self.command_of(h))
            .collect()
    }
}

/// The timeout written into the agents' settings: the hook itself gives up well before it
/// ([`super::HOOK_BUDGET`]); this only bounds a hung process.
pub const HOOK_TIMEOUT_S: u64 = 10;

/// The project a folder belongs to: the top of the git work tree holding it, else the folder
/// (where a prompt's hook records it, and so where `hook install` and `mcp install` write).
pub fn project_root(cwd: &Path) -> PathBuf {
    let cwd = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
    cwd.ancestors()
        .find(|dir| dir.join(".git").exists())
        .unwrap_or(&cwd)
        .to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Copilot's own events name none: the prompt, the turn's end and a tool call are told
    /// apart by their fields (as its binary sends them); its Claude-style ones by their name.
    #[test]
    fn copilots_events_are_told_apart_by_their_fields() {
        let c = Agent::Copilot;
        let prompt = json!({"sessionId": "s", "timestamp": 1, "cwd": "/p", "prompt": "A"});
        let stop = json!({"sessionId": "s", "cwd": "/p", "stopReason": "end_turn",
            "transcriptPath": "/h/.copilot/session-state/s/events.jsonl"});
        let tool = json!({"sessionId": "s", "cwd": "/p", "toolName": "create",
            "toolArgs": {"path": "/p/a"}});
        assert_eq!(c.moment(&prompt), Moment::Prompt);
        assert_eq!(c.moment(&stop), Moment::End);
        assert_eq!(c.moment(&tool), Moment::Step);
        let named = json!({"hook_event_name": "Stop", "session_id": "s"});
        assert_eq!(c.moment(&named), Moment::End);
        // Other agents' prompts are never read as Copilot's fields.
        assert_eq!(Agent::ClaudeCode.moment(&tool), Moment::Prompt);
    }

    /// Qwen Code's prompt hook fires again before each model call after a tool's result,
    /// with an empty `prompt` and no `submitted_prompt` (as its binary sends them): only the
    /// first is the prompt.
    #[test]
    fn qwens_continuations_are_not_prompts() {
        let q = Agent::Qwen;
        let first = json!({"session_id": "s", "cwd": "/p", "hook_event_name": "UserPromptSubmit",
            "prompt_id": "s########0", "prompt": "Prompt A", "submitted_prompt": "Prompt A"});
        let again = json!({"session_id": "s", "cwd": "/p", "hook_event_name": "UserPromptSubmit",
            "prompt_id": "s########0", "prompt": ""});
        assert_eq!(q.moment(&first), Moment::Prompt);
        assert_eq!(q.moment(&again), Moment::Other);
        assert_eq!(q.parse(&first).prompt, "Prompt A");
        assert_eq!(q.parse(&first).message_id.as_deref(), Some("s########0"));
        // Claude Code sends no `submitted_prompt`: its prompts stay prompts.
        assert_eq!(Agent::ClaudeCode.moment(&again), Moment::Prompt);
    }
}
