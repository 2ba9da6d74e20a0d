//! The pieces every command renders with: `--json` prints the typed result as the daemon sent
//! it; otherwise compact, aligned text with short ids, relative times, and file names kept on
//! one line.

use serde::Serialize;

use super::ClientError;
use crate::model::SkippedFile;
use crate::protocol::results::Checkpoint;

#[derive(Clone)]
pub struct Out {
    pub json: bool,
    /// Every line, even thousands of them on a terminal.
    pub verbose: bool,
    /// No confirmations of what succeeded (data asked for is still printed; errors always).
    pub quiet: bool,
}

/// Lines of a long list printed on a terminal without --verbose.
const TERMINAL_LINES: usize = 50;

impl Out {
    /// With `--json`, prints `value` and returns true: the caller prints nothing else.
    pub fn json<T: Serialize>(&self, value: &T) -> bool {
        if self.json {
            let text = serde_json::to_string_pretty(value).expect("results always serialise");
            outln!("{text}");
        }
        self.json
    }

    /// `value` as JSON, or `text` for a person (a confirmation: nothing with `--quiet`).
    pub fn value_or<T: Serialize>(&self, value: &T, text: &str) {
        if !self.json(value) && !self.quiet {
            outln!("{text}");
        }
    }

    /// Like [`Out::json`] for a confirmation: true also with `--quiet` (print nothing more).
    pub fn json_or_quiet<T: Serialize>(&self, value: &T) -> bool {
        self.json(value) || self.quiet
    }

    /// How many lines of a long list to print: all of them with --verbose or when stdout is
    /// not a terminal.
    pub fn line_limit(&self) -> usize {
        if self.verbose || !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            usize::MAX
        } else {
            TERMINAL_LINES
        }
    }
}

/// A path on one line: control characters (a newline in a file name) shown escaped, so
/// line-oriented output stays one entry a line.
pub fn one_path(path: &str) -> std::borrow::Cow<'_, str> {
    if path.chars().any(char::is_control) {
        std::borrow::Cow::Owned(path.escape_default().to_string())
    } else {
        std::borrow::Cow::Borrowed(path)
    }
}

/// The first 12 characters of an id (as git's short ids).
pub fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

/// "5s ago", "3m ago", "2h ago", "4d ago".
pub fn relative_time(rfc3339: &str) -> String {
    let Ok(then) = rfc3339.parse::<jiff::Timestamp>() else {
        return rfc3339.to_string();
    };
    let secs = (jiff::Timestamp::now().as_second() - then.as_second()).max(0);
    match secs {
        0..=59 => format!("{secs}s ago"),
        60..=3599 => format!("{}m ago", secs / 60),
        3600..=86399 => format!("{}h ago", secs / 3600),
        _ => format!("{}d ago", secs / 86400),
    }
}

/// `n` and the noun that goes with it: "1 prompt", "2 prompts".
pub fn plural<N: Copy + std::fmt::Display + TryInto<u64>>(n: N, one: &str, many: &str) -> String {
    let single = n.try_into().is_ok_and(|n| n == 1);
    format!("{n} {}", if single { one } else { many })
}

/// `+added ~modified -deleted` of a checkpoint.
pub fn counts(c: &Checkpoint) -> String {
    format!("+{} ~{} -{}", c.added, c.modified, c.deleted)
}

/// What an entry of the timeline did: a prompt's turn (as `ckpt log` counts it, `so far` while
/// it is the newest) when it is known, else the entry's changes against the one before it.
pub fn what_it_did(c: &Checkpoint) -> String {
    match c.turn_changes() {
        Some(t) => format!(
            "+{} ~{} -{}{}",
            t.added,
            t.modified,
            t.deleted,
            if t.until.is_none() { " so far" } else { "" }
        ),
        None => counts(c),
    }
}

/// The first line of `text`, at most `max` characters, with `…` when anything was cut.
pub fn one_line(text: &str, max: usize) -> String {
    let first = text.lines().next().unwrap_or("");
    let mut out: String = first.chars().take(max).collect();
    if first.chars().count() > max || text.lines().count() > 1 {
        out.push('…');
    }
    printable(&out).into_owned()
}

/// `text` as it is safe to print on a terminal: control characters (escape sequences that set
/// a window's title or move the cursor, carriage returns, a newline that would forge a row)
/// and the characters that reorder text on screen are shown escaped. A label, a note or a
/// name that came from an agent or a teammate goes through here before a terminal sees it.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let reorders = |c: char| matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    let unsafe_char = |c: char| (c.is_control() && c != '\t') || reorders(c);
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if unsafe_char(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Each line of `text` made [`printable`], for text shown a line at a time (a prompt, notes).
pub fn printable_lines(text: &str) -> impl Iterator<Item = std::borrow::Cow<'_, str>> {
    text.lines().map(printable)
}

/// Prints rows with every column but the last padded to its widest cell.
pub fn table(rows: &[Vec<String>]) {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        outln!("{}", line.trim_end());
    }
}

pub fn print_skipped(skipped: &[SkippedFile]) {
    for skip in skipped {
        outln!("  skipped  {}: {}", one_path(&skip.path), skip.reason);
    }
}

pub use crate::model::human_bytes;

/// Prints an error (and a hint) on stderr, or as `{"error": …}` on stdout with `--json`.
pub fn error(err: &ClientError, json: bool) {
    if json {
        outln!("{}", serde_json::json!({ "error": err.to_json() }));
        return;
    }
    eprintln!("error: {err}");
    if let Some(hint) = err.hint() {
        eprintln!("hint: {hint}");
    }
}

/// Whether stdout is a terminal a person reads (checked before any pager takes it over).
fn stdout_is_terminal() -> bool {
    static TERMINAL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TERMINAL.get_or_init(|| std::io::IsTerminal::is_terminal(&std::io::stdout()))
}

/// Colours for a person at a terminal, never with `NO_COLOR` (or `--json`).
pub fn colour(out: &Out) -> bool {
    !out.json && stdout_is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// A unified diff with git's colours: file headers bold, hunks cyan, removals red, additions
/// green.
pub fn coloured_patch(patch: &str) -> String {
    let mut out = String::with_capacity(patch.len() + patch.len() / 8);
    for line in patch.split_inclusive('\n') {
        let code = if line.starts_with("diff --git")
            || line.starts_with("index ")
            || line.starts_with("--- ")
            || line.starts_with("+++ ")
            || line.starts_with("new file mode")
            || line.starts_with("deleted file mode")
        {
            "1"
        } else if line.starts_with("@@") {
            "36"
        } else if line.starts_with('+') {
            "32"
        } else if line.starts_with('-') {
            "31"
        } else {
            ""
        };
        if code.is_empty() {
            out.push_str(line);
        } else {
            let (text, newline) = match line.strip_suffix('\n') {
                Some(t) => (t, "\n"),
                None => (line, ""),
            };
            out.push_str(&format!("\x1b[{code}m{text}\x1b[0m{newline}"));
        }
    }
    out
}

static PAGER: parking_lot::Mutex<Option<std::process::Child>> = parking_lot::Mutex::new(None);

/// Sends what follows on stdout through a pager, like git: only when stdout is a terminal
/// (never when piped or with `--json`); `$PAGER`, else `less` (with `LESS=FRX` unless set: quit
/// if it fits on one screen, keep colours, leave the screen as it was). `PAGER=cat` or an empty
/// `PAGER` turns it off. [`finish_pager`] waits for it.
pub fn page(out: &Out) {
    if out.json || !stdout_is_terminal() {
        return;
    }
    let pager = std::env::var("PAGER").unwrap_or_else(|_| "less".into());
    if pager.trim().is_empty() || pager.trim() == "cat" {
        return;
    }
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", &pager]).stdin(std::process::Stdio::piped());
    if std::env::var_os("LESS").is_none() {
        cmd.env("LESS", "FRX");
    }
    let Ok(mut child) = cmd.spawn() else { return };
    let stdin = child.stdin.take().expect("piped above");
    if rustix::stdio::dup2_stdout(&stdin).is_err() {
        let _ = child.kill();
        return;
    }
    drop(stdin);
    *PAGER.lock() = Some(child);
}

/// Ends the output going to the pager and waits until the person quits it.
pub fn finish_pager() {
    let Some(mut child) = PAGER.lock().take() else {
        return;
    };
    use std::io::Write;
    let _ = std::io::stdout().flush();
    // The pager sees the end of its input once our stdout no longer points at it.
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        let _ = rustix::stdio::dup2_stdout(&null);
    }
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_for_a_terminal_has_no_control_sequences() {
        let hostile = "ok\u{1b}]0;owned\u{7}\u{1b}[2J\rrow\u{202e}txt.exe\u{85}";
        let shown = printable(hostile);
        assert!(!shown.chars().any(|c| c.is_control()), "{shown}");
        assert_eq!(
            shown,
            "ok\\u{1b}]0;owned\\u{7}\\u{1b}[2J\\rrow\\u{202e}txt.exe\\u{85}"
        );
        assert_eq!(printable("plain, é ✓\ttab"), "plain, é ✓\ttab");
        assert_eq!(one_line("first\u{1b}[31m\nsecond", 80), "first\\u{1b}[31m…");
        let lines: Vec<_> = printable_lines("a\u{1b}\nb").collect();
        assert_eq!(lines, ["a\\u{1b}", "b"]);
    }
}
