//! Rendering replies: `--json` prints the daemon's result as is; otherwise compact, aligned
//! text with short ids and relative times.

use std::io::{BufRead, Write};

use serde_json::Value;

use super::ClientError;

pub struct Out {
    pub json: bool,
    /// Every line, even thousands of them on a terminal.
    pub verbose: bool,
}

/// Lines of a long list printed on a terminal without --verbose.
const TERMINAL_LINES: usize = 50;

/// A path on one line: control characters (a newline in a file name) shown escaped, so
/// line-oriented output stays one entry a line.
fn one_path(path: &str) -> std::borrow::Cow<'_, str> {
    if path.chars().any(char::is_control) {
        std::borrow::Cow::Owned(path.escape_default().to_string())
    } else {
        std::borrow::Cow::Borrowed(path)
    }
}

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn n(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn arr<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn short(id: &str) -> &str {
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

fn counts(c: &Value) -> String {
    format!(
        "+{} ~{} -{}",
        n(c, "added"),
        n(c, "modified"),
        n(c, "deleted")
    )
}

fn one_line(text: &str, max: usize) -> String {
    let first = text.lines().next().unwrap_or("");
    let mut out: String = first.chars().take(max).collect();
    if first.chars().count() > max || text.lines().count() > 1 {
        out.push('…');
    }
    out
}

/// Prints rows with every column but the last padded to its widest cell.
fn table(rows: &[Vec<String>]) {
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

fn print_skipped(v: &Value) {
    for skip in arr(v, "skipped") {
        outln!("  skipped  {}: {}", s(skip, "path"), s(skip, "reason"));
    }
}

impl Out {
    fn json(&self, v: &Value) -> bool {
        if self.json {
            outln!(
                "{}",
                serde_json::to_string_pretty(v).expect("values serialise")
            );
        }
        self.json
    }

    pub fn value_or(&self, v: &Value, text: &str) {
        if !self.json(v) {
            outln!("{text}");
        }
    }

    pub fn watched(&self, v: &Value) {
        if !self.json(v) {
            outln!("watching {}\n  store {}", s(v, "root"), s(v, "store"));
        }
    }

    pub fn unwatched(&self, v: &Value) {
        if !self.json(v) {
            outln!(
                "no longer watching {} (its store stays at {})",
                s(v, "root"),
                s(v, "store")
            );
        }
    }

    pub fn projects(&self, v: &Value) {
        if self.json(v) {
            return;
        }
        let list = v.as_array().map(Vec::as_slice).unwrap_or(&[]);
        if list.is_empty() {
            outln!("no projects are watched (use `ckpt watch DIR`)");
            return;
        }
        let mut rows = vec![vec!["ROOT".into(), "STATE".into(), "STORE".into()]];
        for p in list {
            let state = if p.get("available").and_then(Value::as_bool) == Some(true) {
                "ok"
            } else {
                "unavailable"
            };
            rows.push(vec![
                s(p, "root").into(),
                state.into(),
                s(p, "store").into(),
            ]);
        }
        table(&rows);
    }

    pub fn checkpoint(&self, c: &Value) {
        if self.json(c) {
            return;
        }
        outln!(
            "checkpoint {}  #{} {}  {} files ({})",
            short(s(c, "id")),
            n(c, "seq"),
            s(c, "dialog"),
            n(c, "files"),
            counts(c)
        );
        print_skipped(c);
    }

    pub fn list(&self, v: &Value) {
        if self.json(v) {
            return;
        }
        let list = v.as_array().map(Vec::as_slice).unwrap_or(&[]);
        if list.is_empty() {
            outln!("no checkpoints yet (record one with `ckpt checkpoint -m TEXT`)");
            return;
        }
        let mut rows = vec![[
            "ID", "SEQ", "DIALOG", "SESSION", "KIND", "WHEN", "CHANGES", "LABEL",
        ]
        .map(String::from)
        .to_vec()];
        for c in list {
            let mut changes = counts(c);
            if !arr(c, "skipped").is_empty() {
                changes.push_str(&format!(" !{}", arr(c, "skipped").len()));
            }
            rows.push(vec![
                short(s(c, "id")).into(),
                format!("#{}", n(c, "seq")),
                s(c, "dialog").into(),
                n(c, "session").to_string(),
                s(c, "kind").into(),
                relative_time(s(c, "created_at")),
                changes,
                {
                    let tags: Vec<&str> = arr(c, "tags").iter().filter_map(Value::as_str).collect();
                    let label = one_line(s(c, "label"), 60);
                    if tags.is_empty() {
                        label
                    } else {
                        format!("[{}] {label}", tags.join(","))
                    }
                },
            ]);
        }
        table(&rows);
    }

    pub fn show(&self, c: &Value) {
        if self.json(c) {
            return;
        }
        outln!("checkpoint {}", s(c, "id"));
        outln!(
            "dialog     {}  #{}  {}",
            s(c, "dialog"),
            n(c, "seq"),
            s(c, "kind")
        );
        outln!(
            "created    {} ({})",
            s(c, "created_at"),
            relative_time(s(c, "created_at"))
        );
        if let Some(m) = c.get("message_id").and_then(Value::as_str) {
            outln!("message    {m}");
        }
        if let Some(i) = c.get("imported").filter(|i| i.is_object()) {
            let origin = match i.get("dialog").and_then(Value::as_str) {
                Some(d) => format!("{} checkpoint of dialog {d}", s(i, "kind")),
                None => s(i, "kind").to_string(),
            };
            outln!(
                "imported   from {} ({origin}, {}, made {})",
                short(s(i, "from")),
                s(i, "ref_name"),
                s(i, "created_at")
            );
        }
        let parent = c
            .get("parent")
            .and_then(Value::as_str)
            .map(|p| format!(" against {}", short(p)))
            .unwrap_or_default();
        outln!("files      {} ({}{parent})", n(c, "files"), counts(c));
        if !s(c, "label").is_empty() {
            outln!("label");
            for line in s(c, "label").lines() {
                outln!("    {line}");
            }
        }
        if !arr(c, "changes").is_empty() {
            outln!("changes");
            for ch in arr(c, "changes") {
                outln!("  {}  {}", status_letter(s(ch, "status")), s(ch, "path"));
            }
        }
        if !arr(c, "skipped").is_empty() {
            outln!("skipped");
            for skip in arr(c, "skipped") {
                outln!("  {}: {}", s(skip, "path"), s(skip, "reason"));
            }
        }
        let tags: Vec<&str> = arr(c, "tags").iter().filter_map(Value::as_str).collect();
        if !tags.is_empty() {
            outln!("tags       {}", tags.join(", "));
        }
        if let Some(notes) = c.get("notes").and_then(Value::as_str) {
            outln!("notes");
            for line in notes.lines() {
                outln!("    {line}");
            }
        }
        if let Some(meta) = c.get("meta") {
            outln!("meta       {}", one_line(&meta.to_string(), 100));
        }
        for f in arr(c, "file_list") {
            outln!(
                "  {} {} {}",
                s(f, "mode"),
                short(s(f, "blob")),
                s(f, "path")
            );
        }
    }

    pub fn diff(&self, v: &Value, stat: bool, name_only: bool) {
        if self.json(v) {
            return;
        }
        let files = arr(v, "files");
        if name_only {
            for f in files {
                outln!("{}", s(f, "path"));
            }
        } else if stat {
            let width = files
                .iter()
                .map(|f| s(f, "path").chars().count())
                .max()
                .unwrap_or(0);
            let (mut plus, mut minus) = (0, 0);
            // Bars scale to the largest change, as git's do, within 40 columns.
            let largest = files
                .iter()
                .map(|f| n(f, "lines_added") + n(f, "lines_removed"))
                .max()
                .unwrap_or(0)
                .max(1);
            let scale = |x: u64| -> usize {
                if largest <= 40 {
                    x as usize
                } else {
                    ((x * 40).div_ceil(largest)) as usize
                }
            };
            for f in files {
                let (a, r) = (n(f, "lines_added"), n(f, "lines_removed"));
                plus += a;
                minus += r;
                let bar = if f.get("binary").and_then(Value::as_bool) == Some(true) {
                    "Bin".to_string()
                } else {
                    format!(
                        "{:>5} {}{}",
                        a + r,
                        "+".repeat(scale(a)),
                        "-".repeat(scale(r))
                    )
                };
                outln!(" {:<width$} | {bar}", one_path(s(f, "path")));
            }
            outln!(
                " {} files changed, {plus} insertions(+), {minus} deletions(-)",
                files.len()
            );
        } else {
            out!("{}", s(v, "patch"));
        }
        super::cli::flush();
    }

    pub fn restore(&self, r: &Value) {
        if self.json(r) {
            return;
        }
        let dry = r.get("dry_run").and_then(Value::as_bool) == Some(true);
        let (w, d, k) = (arr(r, "written"), arr(r, "deleted"), arr(r, "skipped"));
        let (verb, wrote, deleted, skipped) = match dry {
            true => ("would restore", "would write", "would delete", "would skip"),
            false => ("restored", "wrote", "deleted", "skipped"),
        };
        let (wn, dn, kn) = (w.len(), d.len(), k.len());
        outln!(
            "{verb} to {}: {wn} {}, {dn} {}, {kn} {}",
            short(s(r, "restored_to")),
            if dry { "to write" } else { "written" },
            if dry { "to delete" } else { "deleted" },
            if dry { "to skip" } else { "skipped" },
        );
        // Thousands of lines help nobody on a terminal: the first ones, and how to see all.
        let limit = if self.verbose || !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            usize::MAX
        } else {
            TERMINAL_LINES
        };
        let mut shown = 0;
        // The old column: "wrote    x", "deleted  x"; a dry run's verbs are longer.
        let width = if dry { 12 } else { 7 };
        for (list, what) in [(w, wrote), (d, deleted)] {
            for p in list {
                if shown < limit {
                    outln!("  {what:<width$}  {}", one_path(p.as_str().unwrap_or("")));
                }
                shown += 1;
            }
        }
        for skip in k {
            if shown < limit {
                outln!(
                    "  {skipped:<width$}  {}: {}",
                    one_path(s(skip, "path")),
                    s(skip, "reason")
                );
            }
            shown += 1;
        }
        if shown > limit {
            outln!(
                "  … and {} more (all of them with --verbose or --json)",
                shown - limit
            );
        }
        if let Some(undo) = r.get("undo_checkpoint").and_then(Value::as_str) {
            outln!("undo with: ckpt undo  (or: ckpt restore {})", short(undo));
        }
    }

    pub fn status(&self, v: &Value) {
        if self.json(v) {
            return;
        }
        outln!(
            "{} (pid {}, protocol {}), up {}s",
            s(v, "daemon"),
            n(v, "pid"),
            n(v, "protocol"),
            n(v, "uptime_seconds")
        );
        outln!("socket   {}", s(v, "socket"));
        outln!("data     {}", s(v, "data_dir"));
        let projects = arr(v, "projects");
        outln!("projects {}", projects.len());
        for p in projects {
            let state = match (
                p.get("available").and_then(Value::as_bool),
                p.get("busy").and_then(Value::as_bool),
            ) {
                (Some(false), _) => "unavailable",
                (_, Some(true)) => "busy",
                _ => "ok",
            };
            outln!(
                "  {}  {state}  {}  store {}",
                s(p, "root"),
                s(p, "mode"),
                human_bytes(n(p, "store_bytes"))
            );
        }
    }

    pub fn pruned(&self, v: &Value) {
        if self.json(v) {
            return;
        }
        let verb = if v["dry_run"] == true {
            "would prune"
        } else {
            "pruned"
        };
        outln!(
            "{verb} {} checkpoints, kept {}",
            arr(v, "pruned").len(),
            n(v, "kept")
        );
        for c in arr(v, "pruned_checkpoints") {
            outln!(
                "  {}  {} #{} {}  {}  {}",
                short(s(c, "id")),
                s(c, "dialog"),
                n(c, "seq"),
                s(c, "kind"),
                relative_time(s(c, "created_at")),
                one_line(s(c, "label"), 60)
            );
        }
        if let Some(gc) = v.get("gc") {
            self.gc(gc);
        }
        if let Some(b) = v.get("budget") {
            outln!(
                "over the disk budget ({}): pruned {} more of the oldest; store {} -> {}",
                human_bytes(n(b, "max_store_bytes")),
                arr(b, "pruned").len(),
                human_bytes(n(b, "bytes_before")),
                human_bytes(n(b, "bytes_after"))
            );
        }
    }

    pub fn imported(&self, v: &Value) {
        if self.json(v) {
            return;
        }
        let imported = arr(v, "imported");
        match imported.len() {
            0 => outln!("imported no checkpoints from {}", s(v, "path")),
            count => outln!(
                "imported {count} checkpoint{} into dialog {} from {} ({} objects)",
                if count == 1 { "" } else { "s" },
                s(v, "dialog"),
                s(v, "path"),
                n(v, "objects")
            ),
        }
        for c in imported {
            let from = c["imported"]["from"].as_str().unwrap_or("");
            outln!(
                "  {}  from {}  {}",
                short(s(c, "id")),
                short(from),
                one_line(s(c, "label"), 60)
            );
        }
        for left in arr(v, "not_imported") {
            outln!(
                "  not imported: {} ({}): {}",
                short(s(left, "from")),
                s(left, "ref_name"),
                s(left, "reason")
            );
        }
    }

    pub fn fsck(&self, v: &Value) {
        if self.json(v) {
            return;
        }
        let packs = arr(v, "damaged_packs");
        outln!(
            "{} objects read; {} unreadable; {} damaged pack{}",
            n(v, "objects"),
            n(v, "unreadable_count"),
            packs.len(),
            if packs.len() == 1 { "" } else { "s" }
        );
        for p in packs {
            outln!("  damaged  objects/pack/{}.pack", p.as_str().unwrap_or(""));
        }
        if n(v, "affected_count") > 0 {
            outln!(
                "{} checkpoints or refs cannot be restored whole:",
                n(v, "affected_count")
            );
            for a in arr(v, "affected") {
                outln!(
                    "  {}  {}  ({} objects missing)",
                    short(s(a, "id")),
                    s(a, "ref_name"),
                    n(a, "missing")
                );
            }
        }
        if let Some(r) = v.get("repair") {
            outln!(
                "repaired: {} objects salvaged; {} packs and {} refs set aside in {}",
                n(r, "salvaged"),
                arr(r, "packs_set_aside").len(),
                arr(r, "refs_set_aside").len(),
                s(r, "damaged_dir")
            );
        } else if n(v, "unreadable_count") > 0 || !packs.is_empty() {
            outln!("run `ckpt fsck --repair` to set the damage aside; see the README");
        }
    }

    pub fn gc(&self, v: &Value) {
        if self.json(v) {
            return;
        }
        outln!(
            "gc: {} objects kept in one pack; removed {} loose objects and {} packs; {} -> {}",
            n(v, "objects"),
            n(v, "loose_removed"),
            n(v, "packs_removed"),
            human_bytes(n(v, "bytes_before")),
            human_bytes(n(v, "bytes_after"))
        );
    }
}

/// `1.5 MiB` and the like.
pub fn human_bytes(bytes: u64) -> String {
    let mut value = bytes as f64;
    for unit in ["B", "KiB", "MiB", "GiB"] {
        if value < 1024.0 || unit == "GiB" {
            return if unit == "B" {
                format!("{bytes} B")
            } else {
                format!("{value:.1} {unit}")
            };
        }
        value /= 1024.0;
    }
    unreachable!("the loop returns at GiB")
}

impl Out {
    pub fn edit_aborted(&self, v: &Value) {
        if self.json(v) {
            return;
        }
        for p in arr(v, "restored") {
            outln!("put back  {}", p.as_str().unwrap_or(""));
        }
        print_skipped(v);
    }

    pub fn session_status(&self, v: &Value) {
        if self.json(v) {
            return;
        }
        let changes = if v["has_unapproved"] == true {
            "unapproved changes"
        } else {
            "no unapproved changes"
        };
        outln!(
            "dialog {}  session {}  {changes}",
            s(v, "dialog"),
            n(v, "active_session")
        );
        match v["last_approved_at"].as_str() {
            Some(at) => outln!(
                "approved {} ({})",
                short(s(v, "approved_commit")),
                relative_time(at)
            ),
            None => outln!(
                "never approved; the approved state is the first checkpoint {}",
                short(s(v, "approved_commit"))
            ),
        }
    }

    pub fn session_approved(&self, v: &Value) {
        if !self.json(v) {
            outln!(
                "approved {} ({} checkpoints in session {}); session {} started",
                short(s(v, "approved_commit")),
                n(v, "commits_approved"),
                n(v, "session"),
                n(v, "new_session")
            );
        }
    }

    pub fn dialog_new(&self, v: &Value) {
        if !self.json(v) {
            outln!(
                "dialog {}  initial checkpoint {}",
                s(v, "dialog"),
                short(s(&v["initial"], "id"))
            );
        }
    }

    pub fn dialogs(&self, v: &Value) {
        if self.json(v) {
            return;
        }
        let list = v.as_array().map(Vec::as_slice).unwrap_or(&[]);
        if list.is_empty() {
            outln!("no dialogs yet");
            return;
        }
        let mut rows = vec![["DIALOG", "CHECKPOINTS", "LAST", "TITLE"]
            .map(String::from)
            .to_vec()];
        for d in list {
            rows.push(vec![
                s(d, "dialog").into(),
                n(d, "checkpoints").to_string(),
                relative_time(s(d, "last_activity")),
                one_line(s(d, "title"), 60),
            ]);
        }
        table(&rows);
    }

    pub fn verify(&self, v: &Value) {
        if self.json(v) {
            return;
        }
        if v["equal"] == true {
            outln!(
                "index matches a full scan (tree {}, {})",
                short(s(v, "index_tree")),
                s(v, "mode")
            );
        } else {
            outln!(
                "index tree {} differs from full scan {}: the next checkpoint verifies every file",
                short(s(v, "index_tree")),
                short(s(v, "scan_tree"))
            );
        }
    }
}

/// Draws the timeline of every dialog, newest first, with its sessions:
///
/// ```text
/// default  session 2 active
/// | o 3f2a9c1b7d4e  #5 message   2m ago  +1 ~0 -0  Add a CLI
/// |-- session 1: approved
/// | A 9a1b2c3d4e5f  #4 approved  5m ago  +0 ~0 -0  Feature complete
/// ```
pub fn graph(list: &Value) {
    let checkpoints = list.as_array().map(Vec::as_slice).unwrap_or(&[]);
    if checkpoints.is_empty() {
        outln!("no checkpoints yet");
        return;
    }
    let mut dialogs: Vec<&str> = Vec::new();
    for c in checkpoints {
        if !dialogs.contains(&s(c, "dialog")) {
            dialogs.push(s(c, "dialog"));
        }
    }
    for (i, dialog) in dialogs.iter().enumerate() {
        let chain: Vec<&Value> = checkpoints
            .iter()
            .filter(|c| s(c, "dialog") == *dialog)
            .collect();
        let head = chain[0];
        let ended = matches!(s(head, "kind"), "approved" | "reset");
        let active = n(head, "session") + u64::from(ended);
        if i > 0 {
            outln!("|");
        }
        let origin = chain
            .last()
            .filter(|c| s(c, "label").starts_with("forked from "))
            .map(|c| format!("  ({})", s(c, "label")))
            .unwrap_or_default();
        outln!("{dialog}  session {active} active{origin}");
        let mut session = active;
        for c in chain {
            let this = n(c, "session");
            if this != session {
                let fate = match s(c, "kind") {
                    "approved" => "approved",
                    "reset" => "abandoned (reset)",
                    _ => "ended",
                };
                outln!("|-- session {this}: {fate}");
                session = this;
            }
            let mark = match s(c, "kind") {
                "initial" => "I",
                "approved" => "A",
                "reset" => "X",
                "restore" => "R",
                "pre-restore" => "U",
                _ => "o",
            };
            let tags: Vec<&str> = arr(c, "tags").iter().filter_map(Value::as_str).collect();
            let tags = if tags.is_empty() {
                String::new()
            } else {
                format!(" [{}]", tags.join(","))
            };
            outln!(
                "| {mark} {}  #{:<3} {:<11} {:>7}  {:<11}  {}{tags}",
                short(s(c, "id")),
                n(c, "seq"),
                s(c, "kind"),
                relative_time(s(c, "created_at")),
                counts(c),
                one_line(s(c, "label"), 50)
            );
        }
    }
    outln!("\n(o message, I initial, A approved, X reset, R restore, U undo point)");
}

fn status_letter(status: &str) -> &'static str {
    match status {
        "added" => "A",
        "deleted" => "D",
        "modified" => "M",
        "mode_changed" => "X",
        "type_changed" => "T",
        _ => "?",
    }
}

/// Shows a dry run's plan and asks on the terminal; true to go ahead.
pub fn confirm_restore(plan: &Value) -> bool {
    let (w, d, k) = (
        arr(plan, "written"),
        arr(plan, "deleted"),
        arr(plan, "skipped"),
    );
    eprintln!("restoring to {} will:", short(s(plan, "restored_to")));
    for p in w.iter().take(50) {
        eprintln!("  write   {}", p.as_str().unwrap_or(""));
    }
    for p in d.iter().take(50) {
        eprintln!("  delete  {}", p.as_str().unwrap_or(""));
    }
    for skip in k.iter().take(50) {
        eprintln!("  skip    {}: {}", s(skip, "path"), s(skip, "reason"));
    }
    if w.len() > 50 || d.len() > 50 {
        eprintln!("  … ({} writes and {} deletions in all)", w.len(), d.len());
    }
    eprint!("The current state is saved first, so this can be undone. Restore? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim(), "y" | "Y" | "yes" | "Yes")
}

/// Prints an error (and a hint) on stderr, or as `{"error": …}` on stdout with `--json`.
pub fn error(err: &ClientError, json: bool) {
    if json {
        outln!("{}", serde_json::json!({ "error": err.to_json() }));
        return;
    }
    eprintln!("error: {err}");
    if let Some(hint) = super::cli::hint(err) {
        eprintln!("hint: {hint}");
    }
}
