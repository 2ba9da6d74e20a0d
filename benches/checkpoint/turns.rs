//! Exact turns: what an agent waits for at each tool call (`ckpt hook claude-code` with a
//! `PostToolUse`, as a process: medians, and p99 beside the table), with nothing changed and
//! with 10 files changed, against shadow git snapshotting at each tool call (what capturing every
//! tool call costs there); and `ckpt revert` of a 10-file and a 1,000-file turn as a process,
//! against `git diff | git apply -R` of the same turn on the same tree. Under the table: the
//! disk's floor for the 1,000-file revert, the same files replaced the way a restore must
//! (a new file, its data flushed, renamed over the old one, the folders flushed) and nothing
//! else, so that the revert's time can be read against what its writes alone cost here.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::json;

use super::support::{
    client, file_path, hook, median, ms, run, shadow_snapshot, tail, time_settled, touch,
    touch_ten, touched, Args, Client, Row,
};

const SESSION: &str = "bench-turns";

fn payload(root: &Path, event: &str, extra: serde_json::Value) -> String {
    let mut p = json!({ "session_id": SESSION, "cwd": root, "hook_event_name": event });
    if let (Some(p), serde_json::Value::Object(extra)) = (p.as_object_mut(), extra) {
        p.extend(extra);
    }
    p.to_string()
}

fn prompt(socket: &Path, root: &Path, n: usize) {
    let extra = json!({ "prompt": format!("turn {n}"), "prompt_id": format!("turn-{n}") });
    hook(socket, &payload(root, "UserPromptSubmit", extra));
}

fn tool(root: &Path, name: &str) -> String {
    let input = match name {
        "Read" => json!({ "file_path": root.join("src/d0/d0/f0.rs") }),
        _ => json!({ "command": "make" }),
    };
    payload(
        root,
        "PostToolUse",
        json!({ "tool_name": name, "tool_input": input }),
    )
}

/// The rows, and the lines that go under the table (the tails).
pub fn cases(
    args: &Args,
    conn: &mut Client,
    socket: &Path,
    root: &Path,
    shadow: &Path,
    round: &mut usize,
) -> (Vec<Row>, Vec<String>) {
    let (mut rows, mut notes) = (Vec::new(), Vec::new());
    // The other cases' prompts (`checkpoint` calls) open turns that never end (they run for
    // an hour): the revert is `--force`d, as those changes would be ambiguous with them.
    // The hook rows' session never ended its turn: it would still be running (an hour), and
    // every change in this one would be ambiguous between the two.
    let other = json!({ "session_id": "bench-session", "cwd": root, "hook_event_name": "Stop" });
    hook(socket, &other.to_string());
    prompt(socket, root, 0);
    for changed in [false, true] {
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        let step = tool(root, if changed { "Bash" } else { "Read" });
        for _ in 0..args.hook_runs {
            if changed {
                *round += 1;
                touch_ten(root, args.files, *round);
            }
            ours.push(time_settled(|| hook(socket, &step)));
            theirs.push(time_settled(|| shadow_snapshot(shadow, root)));
        }
        let (p90, p99, max) = tail(&ours);
        let name = match changed {
            false => "after-tool hook, nothing changed",
            true => "after-tool hook, 10 changed",
        };
        notes.push(format!(
            "{name:<34} p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            ms(p90),
            ms(p99),
            ms(max)
        ));
        rows.push(Row::new(name, ours, theirs));
    }
    hook(socket, &payload(root, "Stop", json!({})));

    let patch = root.parent().unwrap().join("turn.patch");
    let mut turn = 0;
    for size in [10, 1000] {
        let (mut ours, mut theirs, mut floor) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 1..=args.op_runs {
            turn += 1;
            prompt(socket, root, turn);
            let log = conn
                .call_value(
                    "log",
                    json!({ "project": root, "dialog": SESSION, "limit": 1 }),
                )
                .unwrap();
            let id = log[0]["id"].as_str().unwrap().to_string();
            let before = shadow_snapshot(shadow, root);
            *round += 1;
            touch(root, args.files, *round, size);
            hook(socket, &tool(root, "Bash"));
            hook(socket, &payload(root, "Stop", json!({})));
            let after = shadow_snapshot(shadow, root);
            ours.push(time_settled(|| {
                run(client()
                    .args(["--no-spawn", "--quiet", "--socket"])
                    .arg(socket)
                    .args(["revert", "--yes", "--force", "-C"])
                    .arg(root)
                    .arg(&id))
            }));
            // The same turn on the same tree for git: its changes back, then taken back again.
            touch(root, args.files, *round, size);
            theirs.push(time_settled(|| {
                let diff = super::support::output(
                    super::support::git(shadow, root).args(["diff", "--binary", &before, &after]),
                );
                std::fs::write(&patch, diff + "\n").unwrap();
                run(Command::new("git")
                    .current_dir(root)
                    .args(["apply", "-R"])
                    .arg(&patch));
            }));
            if size == 1000 {
                let paths: Vec<PathBuf> = touched(args.files, *round, size)
                    .map(|i| root.join(file_path(i)))
                    .collect();
                floor.push(time_settled(|| replace_atomically(&paths)));
            }
        }
        if !floor.is_empty() {
            let ours = median(ours.clone());
            let floor = median(floor);
            notes.push(format!(
                "1,000-file revert against its writes alone (new file, fdatasync, rename, \
                 folders flushed; 8 threads): {:.0} ms, the revert {:.1}× that",
                ms(floor),
                ours.as_secs_f64() / floor.as_secs_f64().max(1e-9)
            ));
        }
        let name = match size {
            10 => "ckpt revert process, 10-file turn",
            _ => "ckpt revert process, 1,000-file turn",
        };
        rows.push(Row::new(name, ours, theirs));
    }
    (rows, notes)
}

/// Replaces each of `paths` with a copy of itself the way a restore must: a new file beside it,
/// its data flushed, renamed over it; then each folder flushed. Eight threads, as the daemon's
/// flushers. Read before the clock starts, so only the writes are timed.
fn replace_atomically(paths: &[PathBuf]) -> Duration {
    let contents: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let start = std::time::Instant::now();
    let files: Vec<(&PathBuf, &Vec<u8>)> = paths.iter().zip(&contents).collect();
    on_eight_threads(&files, |(path, bytes)| {
        let tmp = path.with_extension("ckpt-floor");
        let mut file = std::fs::File::create_new(&tmp).unwrap();
        file.write_all(bytes).unwrap();
        file.sync_data().unwrap();
        std::fs::rename(&tmp, path).unwrap();
    });
    let folders: BTreeSet<&Path> = paths.iter().filter_map(|p| p.parent()).collect();
    let folders: Vec<&Path> = folders.into_iter().collect();
    on_eight_threads(&folders, |folder| {
        std::fs::File::open(folder).unwrap().sync_all().unwrap();
    });
    start.elapsed()
}

/// Runs `f` on each of `items`, split over eight threads.
fn on_eight_threads<T: Sync>(items: &[T], f: impl Fn(&T) + Sync) {
    let chunk = items.len().div_ceil(8).max(1);
    std::thread::scope(|scope| {
        for items in items.chunks(chunk) {
            let f = &f;
            scope.spawn(move || items.iter().for_each(f));
        }
    });
}
