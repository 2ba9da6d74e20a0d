//! Benchmark: ckpt against a shadow git repository on the same synthetic tree, in the same run.
//!
//! `cargo bench --bench checkpoint -- [--files N] [--ignored M] [--runs R] [--history H] [--dir D]
//!  [--hook-runs K] [--op-runs O] [--load-runs L] [--load-mb MB] [--idle-seconds S] [--million]
//!  [--no-aggressive] [--client PATH] [--daemon PATH] [--before-daemon PATH [--before-client PATH]]
//!  [--deflate-only]`
//!
//! Builds a project of N files of ~2 KiB in nested folders plus a gitignored `node_modules/` of
//! M files, starts the real `ckptd` on a temp socket, and times through the socket (the client
//! library, as `ckpt` uses it): the first checkpoint, a checkpoint with nothing changed, a
//! checkpoint after 10 files changed, the first prompt after the daemon starts (socket-activated
//! by the hook's own connection, as systemd starts it; and 3 s after a start, as at login; 10
//! files changed while it was stopped),
//! the first checkpoint after a daemon restart, a restore of
//! a checkpoint 10 files away, the daemon's peak RSS, and the store size after H checkpoints of
//! 10 changed files each, and `blame` of a 5,000-line file over 200 prompts (against `git blame` of
//! the same 200 versions). The baseline is what existing tools do: `git --git-dir=SHADOW
//! --work-tree=PROJECT add -A && git write-tree` (and `git read-tree -u --reset` to restore).
//! Prints medians over R runs (the hook case over --hook-runs prompts, default 50; the restore and
//! the `ckpt checkpoint` process over --op-runs, default 20) and ratios baseline/ckpt. Every timed case but the one under load starts after a `sync` (untimed), so
//! that no case waits for the writeback of the one before it.
//!
//! Under load: L checkpoints (default 40) of 10 changed files each while another process writes
//! MB-sized files (default 200 MB) one after another beside the project on the same filesystem,
//! as a build does; p50 and max. Idle: the daemon's CPU time over S seconds (default 60) with the
//! project watched and nothing changing, and over a burst of 1,000 changed files and the 10 s
//! after it. `--million` is 1,000,000 files + 500,000 ignored (5 runs, no history, 10 hooks, 10
//! checkpoints under load, no idle case).
//!
//! Store sizes are compared with git's `gc --aggressive` of the same history; `--no-aggressive`
//! (implied by `--million`, where it takes most of an hour of CPU) compares with plain `git gc`.
//!
//! The client processes timed (`ckpt hook`, `ckpt checkpoint`, `ckpt --version`) are this
//! build's `ckpt` unless `--client PATH` names another: the packages ship the client linked
//! statically (`packaging/build.sh`), which a `cargo bench` build is not.
//!
//! Every run also compresses small objects three ways ([`deflate`]: ckpt's encoder, miniz_oxide
//! and zlib-rs at their fastest levels); `--deflate-only` prints just that.
//!
//! `--before-daemon PATH` (with `--before-client PATH`) runs instead the cases a prompt waits
//! for, for that build and this run's, interleaved round by round in one run ([`versus`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

#[path = "checkpoint/deflate.rs"]
mod deflate;
#[path = "checkpoint/load.rs"]
mod load;
#[path = "checkpoint/support.rs"]
mod support;
#[path = "checkpoint/turns.rs"]
mod turns;
#[path = "checkpoint/versus.rs"]
mod versus;

use load::*;
use support::*;

fn parse_args() -> Args {
    let mut args = Args {
        files: 100_000,
        ignored: 50_000,
        runs: 5,
        history: 100,
        hook_runs: 200,
        op_runs: 20,
        load_runs: 40,
        load_mb: 200,
        idle_seconds: 60,
        aggressive: true,
        dir: None,
        before_daemon: None,
        before_client: None,
        deflate_only: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut num = |name: &str| -> usize {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} takes a number"))
        };
        match a.as_str() {
            "--deflate-only" => args.deflate_only = true,
            "--files" => args.files = num("--files"),
            "--ignored" => args.ignored = num("--ignored"),
            "--runs" => args.runs = num("--runs"),
            "--history" => args.history = num("--history"),
            "--hook-runs" => args.hook_runs = num("--hook-runs"),
            "--op-runs" => args.op_runs = num("--op-runs"),
            "--load-runs" => args.load_runs = num("--load-runs"),
            "--load-mb" => args.load_mb = num("--load-mb"),
            "--idle-seconds" => args.idle_seconds = num("--idle-seconds") as u64,
            "--million" => {
                // No history: each checkpoint of it costs shadow git a full `add -A` of a
                // million files (20 of them kept the run from finishing in an hour).
                args.files = 1_000_000;
                args.ignored = 500_000;
                // Five: the first of each case is cold (after shadow git's full snapshot, or
                // the first read of the first checkpoint's pack), and of three the median is
                // then the worse of the other two. Each run costs shadow git ~3 s.
                args.runs = 5;
                args.history = 0;
                args.hook_runs = 10;
                args.op_runs = 5;
                args.load_runs = 10;
                args.idle_seconds = 0;
                args.aggressive = false;
            }
            "--no-aggressive" => args.aggressive = false,
            "--dir" => args.dir = Some(PathBuf::from(it.next().expect("--dir takes a path"))),
            "--client" => {
                let path = PathBuf::from(it.next().expect("--client takes a path"));
                let path = std::fs::canonicalize(&path)
                    .unwrap_or_else(|e| panic!("--client {}: {e}", path.display()));
                CLIENT.set(path).expect("--client given once");
            }
            "--daemon" => {
                let path = PathBuf::from(it.next().expect("--daemon takes a path"));
                let path = std::fs::canonicalize(&path)
                    .unwrap_or_else(|e| panic!("--daemon {}: {e}", path.display()));
                DAEMON.set(path).expect("--daemon given once");
            }
            "--before-daemon" | "--before-client" => {
                let path = PathBuf::from(it.next().unwrap_or_else(|| panic!("{a} takes a path")));
                let path = std::fs::canonicalize(&path)
                    .unwrap_or_else(|e| panic!("{a} {}: {e}", path.display()));
                match a.as_str() {
                    "--before-daemon" => args.before_daemon = Some(path),
                    _ => args.before_client = Some(path),
                }
            }
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    args
}

fn main() {
    let args = parse_args();
    let base = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    let tmp = tempfile::Builder::new()
        .prefix("ckpt-bench-")
        .tempdir_in(&base)
        .expect("temp dir");
    let root = tmp.path().join("project");
    let shadow = tmp.path().join("shadow.git");
    println!(
        "# ckpt benchmark: {} files + {} ignored, {} runs ({} of restores and processes), in {}",
        args.files,
        args.ignored,
        args.runs,
        args.op_runs,
        tmp.path().display()
    );
    deflate::compare(args.runs.max(5));
    if args.deflate_only {
        return;
    }
    println!("client timed: {}", client_path().display());
    if let Some(daemon) = args.before_daemon.clone() {
        let client = args
            .before_client
            .clone()
            .unwrap_or_else(|| client_path().to_path_buf());
        versus::compare(&args, tmp.path(), (daemon, client));
        return;
    }
    assert!(
        args.before_client.is_none(),
        "--before-client goes with --before-daemon"
    );
    let t = Instant::now();
    generate(&root, args.files, args.ignored);
    println!("generated the tree in {:.1} s", t.elapsed().as_secs_f64());

    let mut daemon = Daemon::start(tmp.path());
    let mut conn = daemon.connect();
    let project = json!(root);
    let mut rows: Vec<Row> = Vec::new();

    // First checkpoint.
    let ours = time_settled(|| {
        conn.call_value("watch", json!({ "path": root })).unwrap();
        conn.call_value(
            "checkpoint",
            json!({ "project": project, "label": "first" }),
        )
        .unwrap();
    });
    run(Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&shadow));
    let theirs = time_settled(|| shadow_snapshot(&shadow, &root));
    rows.push(Row::new("first checkpoint", vec![ours], vec![theirs]));
    let rss_first = daemon.peak_rss_kib();

    // Nothing changed.
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..args.runs {
        ours.push(time_settled(|| {
            conn.call_value("checkpoint", json!({ "project": project }))
                .unwrap();
        }));
        theirs.push(time_settled(|| shadow_snapshot(&shadow, &root)));
    }
    rows.push(Row::new("checkpoint, nothing changed", ours, theirs));

    // Ten files changed.
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    let mut round = 0;
    for _ in 0..args.runs {
        round += 1;
        touch_ten(&root, args.files, round);
        ours.push(time_settled(|| {
            conn.call_value("checkpoint", json!({ "project": project }))
                .unwrap();
        }));
        theirs.push(time_settled(|| shadow_snapshot(&shadow, &root)));
    }
    rows.push(Row::new("checkpoint, 10 files changed", ours, theirs));
    daemon.note_peak("10 changed");

    // What the user's prompt waits for: `ckpt hook claude-code` from process start to exit,
    // 10 files changed per prompt; and `ckpt --version`, the floor of any process start.
    let (mut ours, mut theirs, mut floor) = (Vec::new(), Vec::new(), Vec::new());
    for n in 0..args.hook_runs {
        round += 1;
        touch_ten(&root, args.files, round);
        let payload = prompt_payload(&root, &format!("prompt-{n}"));
        ours.push(time_settled(|| hook(&daemon.socket, &payload)));
        theirs.push(time_settled(|| shadow_snapshot(&shadow, &root)));
        floor.push(time_settled(|| run(client().arg("--version"))));
    }
    // Every 10th prompt of a dialog also applies its retention: the tail shows what it costs.
    let hook_tail = tail(&ours);
    rows.push(Row::new("hook claude-code, 10 files changed", ours, theirs));
    daemon.note_peak("hooks");
    let version_floor = median(floor);

    // Restore a checkpoint 10 files away (and the shadow tree 10 files away): over the open
    // connection, then as the user runs it, `ckpt restore` as a process (start to exit).
    let (ours, theirs) = restore_rounds(&args, &mut conn, &root, &shadow, &mut round, |c, id| {
        let r = c
            .call_value("restore", json!({ "project": json!(root), "id": id }))
            .unwrap();
        assert!(r["skipped"].as_array().unwrap().is_empty());
    });
    rows.push(Row::new("restore, 10 files away", ours, theirs));
    let (ours, theirs) = restore_rounds(&args, &mut conn, &root, &shadow, &mut round, |_, id| {
        run(client()
            .args(["--no-spawn", "--quiet", "--socket"])
            .arg(&daemon.socket)
            .args(["restore", "--yes", "-C"])
            .arg(&root)
            .arg(id))
    });
    rows.push(Row::new(
        "ckpt restore process, 10 files away",
        ours,
        theirs,
    ));
    daemon.note_peak("restores");

    // `ckpt checkpoint` as a process (start to exit), 10 files changed, then nothing changed.
    for changed in [true, false] {
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..args.op_runs {
            round += 1;
            if changed {
                touch_ten(&root, args.files, round);
            }
            ours.push(time_settled(|| {
                run(client()
                    .args(["--no-spawn", "--quiet", "--socket"])
                    .arg(&daemon.socket)
                    .args(["checkpoint", "-C"])
                    .arg(&root))
            }));
            theirs.push(time_settled(|| shadow_snapshot(&shadow, &root)));
        }
        let name = match changed {
            true => "ckpt checkpoint process, 10 changed",
            false => "ckpt checkpoint process, unchanged",
        };
        rows.push(Row::new(name, ours, theirs));
    }

    // Blame: a 5,000-line file changed by each of 200 prompts, against `git blame` of a repository
    // holding the same 200 versions of it alone.
    rows.push(blame_case(&mut conn, &daemon, &root, tmp.path(), args.runs));

    // Exact turns: the after-tool hook at each tool call, and a revert of one turn.
    let (turn_rows, turn_notes) =
        turns::cases(&args, &mut conn, &daemon.socket, &root, &shadow, &mut round);
    rows.extend(turn_rows);
    daemon.note_peak("turns");
    daemon.note_peak("blame");

    // Under load: a build-like writer beside the project.
    let (loaded, loaded_theirs) = under_load(&args, &daemon.socket, &root, &shadow, &mut round);
    daemon.note_peak("under load");

    let rss_before_restart = daemon.peak_rss_kib();
    drop(conn);
    daemon.stop();

    // The first prompt after ckptd starts (login, reboot): ckptd is started by the prompt's own
    // connection, as systemd's socket activation starts it, and the hook process is timed from
    // its start to its exit; 10 files changed while no daemon ran.
    let mut rss_cold = 0;
    if let Some(cold) = cold_starts(&args, tmp.path(), &root, &shadow, &mut round) {
        rss_cold = cold.2;
        rows.push(Row::new("first prompt, socket-activated", cold.0, cold.1));
    }
    let (login, theirs) = login_starts(&args, tmp.path(), &root, &shadow, &mut round);
    rows.push(Row::new("first prompt, 3 s after a start", login, theirs));

    // First checkpoint after a daemon restart (from the moment the daemon listens, through the
    // library), 10 files changed while no daemon ran; the last daemon stays for what follows.
    let (mut after_restart, mut theirs) = (Vec::new(), Vec::new());
    let mut last: Option<(Daemon, Client, u64)> = None;
    for _ in 0..args.runs.max(1) {
        if let Some((mut earlier, client, _)) = last.take() {
            drop(client);
            earlier.stop();
        }
        round += 1;
        touch_ten(&root, args.files, round);
        let daemon = Daemon::start(tmp.path());
        let mut client = daemon.connect();
        let rss_before_open = daemon.rss_kib();
        after_restart.push(time_settled(|| {
            client
                .call_value("checkpoint", json!({ "project": project }))
                .unwrap();
        }));
        theirs.push(time_settled(|| {
            shadow_snapshot(&shadow, &root);
        }));
        last = Some((daemon, client, rss_before_open));
    }
    let (mut daemon, mut conn, rss_before_open) = last.expect("at least one run");
    rows.push(Row::new(
        "first checkpoint after restart",
        after_restart,
        theirs,
    ));
    // What the opened project holds (the index above all), as resident memory.
    let rss_opened = daemon.rss_kib().saturating_sub(rss_before_open);
    let idle = idle_cpu(&args, &daemon, &root);

    // Store size after H checkpoints of 10 changed files each, against gc'd git with the same history.
    let history_shadow = tmp.path().join("history.git");
    run(Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&history_shadow));
    let mut parent: Option<String> = None;
    let commit = |tree: &str, parent: &Option<String>| {
        let mut c = git(&history_shadow, &root);
        c.args(["commit-tree", tree, "-m", "c"]);
        if let Some(p) = parent {
            c.args(["-p", p]);
        }
        output(&mut c)
    };
    let tree = shadow_snapshot(&history_shadow, &root);
    parent = Some(commit(&tree, &parent));
    for _ in 0..args.history {
        round += 1;
        touch_ten(&root, args.files, round);
        conn.call_value("checkpoint", json!({ "project": project }))
            .unwrap();
        let tree = shadow_snapshot(&history_shadow, &root);
        parent = Some(commit(&tree, &parent));
    }
    run(git(&history_shadow, &root).args([
        "update-ref",
        "refs/heads/main",
        parent.as_deref().unwrap(),
    ]));
    let store = std::fs::read_dir(tmp.path().join("data/ckpt/projects"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let ours_size = du(&store);
    // Packing everything: `ckpt gc` against `git gc --prune=now` on the same history.
    let ours_gc = time_settled(|| {
        conn.call_value("gc", json!({ "project": project }))
            .unwrap();
    });
    let theirs_gc =
        time_settled(|| run(git(&history_shadow, &root).args(["gc", "--prune=now", "--quiet"])));
    rows.push(Row::new(
        "gc (pack all history)",
        vec![ours_gc],
        vec![theirs_gc],
    ));
    let ours_gc_size = du(&store);
    if args.aggressive {
        run(git(&history_shadow, &root).args(["gc", "--prune=now", "--aggressive", "--quiet"]));
    }
    let baseline = match args.aggressive {
        true => "git gc --aggressive",
        false => "git gc",
    };
    let rss_after_restart = daemon.peak_rss_kib();
    let theirs_size = du(&history_shadow);

    println!();
    println!(
        "{:<34} {:>12} {:>14} {:>9}",
        "case", "ckpt median", "shadow git", "ratio"
    );
    for row in &rows {
        println!(
            "{:<34} {:>9.1} ms {:>11.1} ms {:>8.1}x",
            row.name,
            ms(row.ours),
            ms(row.theirs),
            row.theirs.as_secs_f64() / row.ours.as_secs_f64().max(1e-9)
        );
    }
    for note in &turn_notes {
        println!("{note}");
    }
    println!(
        "{:<34} {:>9.1} ms  (p99 {:.1} ms, max {:.1} ms; every 10th prompt also applies retention)",
        "hook claude-code p90",
        ms(hook_tail.0),
        ms(hook_tail.1),
        ms(hook_tail.2)
    );
    println!(
        "{:<34} {:>9.1} ms  (the floor of any process start)",
        "ckpt --version",
        ms(version_floor)
    );
    let p50 = median(loaded.clone());
    let (_, p99, max) = tail(&loaded);
    println!(
        "{:<34} {:>9.1} ms {:>11.1} ms {:>8.1}x  (p99 {:.1}, max {:.1} ms over {}; {} MB files written beside)",
        "hook under load, 10 changed (p50)",
        ms(p50),
        ms(median(loaded_theirs.clone())),
        median(loaded_theirs).as_secs_f64() / p50.as_secs_f64().max(1e-9),
        ms(p99),
        ms(max),
        loaded.len(),
        args.load_mb
    );
    let gave_up = GAVE_UP.load(std::sync::atomic::Ordering::Relaxed);
    if gave_up > 0 {
        println!(
            "{:<34} {gave_up} (after 2 s; their checkpoints completed behind them)",
            "hooks that gave up waiting"
        );
    }
    if let Some((quiet, burst, after)) = idle {
        println!(
            "{:<34} {:>9.3} s CPU over {} s idle; {:.3} s for a 1,000-file burst + 10 s; {:.3} s over 10 s after",
            "daemon CPU",
            quiet,
            args.idle_seconds,
            burst,
            after
        );
    }
    let mib = |kib: u64| kib as f64 / 1024.0;
    if rss_cold > 0 {
        println!(
            "{:<34} {:>9.1} MiB  (the most of the first-prompt-after-start runs)",
            "daemon peak RSS, first prompt",
            mib(rss_cold)
        );
    }
    println!(
        "{:<34} {:>9.1} MiB  (first checkpoint; {:.1} MiB by the restart; {:.1} MiB after it, its gc included)",
        "daemon peak RSS",
        mib(rss_first),
        mib(rss_before_restart),
        mib(rss_after_restart)
    );
    println!(
        "{:<34} {:>9.1} MiB  ({:.0} bytes per file: the index and what the open project keeps)",
        "RSS of the project after restart",
        rss_opened as f64 / 1024.0,
        rss_opened as f64 * 1024.0 / args.files.max(1) as f64
    );
    println!(
        "{:<34} {:>9.1} MiB {:>10.1} MiB {:>8.2}x (ckpt/git; git after `{baseline}`)",
        format!("store after {} checkpoints", args.history + 1),
        ours_size as f64 / 1048576.0,
        theirs_size as f64 / 1048576.0,
        ours_size as f64 / theirs_size.max(1) as f64
    );
    println!(
        "{:<34} {:>9.1} MiB {:>10.1} MiB {:>8.2}x (ckpt/git)",
        "store after ckpt gc",
        ours_gc_size as f64 / 1048576.0,
        theirs_size as f64 / 1048576.0,
        ours_gc_size as f64 / theirs_size.max(1) as f64
    );
    drop(conn);
    daemon.stop();
}
/// `args.op_runs` restores of a checkpoint 10 files away, each timed by `restore(conn, id)`,
/// against shadow git's `read-tree -u --reset` of its tree 10 files away.
fn restore_rounds(
    args: &Args,
    conn: &mut Client,
    root: &Path,
    shadow: &Path,
    round: &mut usize,
    mut restore: impl FnMut(&mut Client, &str),
) -> (Vec<Duration>, Vec<Duration>) {
    let project = json!(root);
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..args.op_runs {
        let target = conn
            .call_value("checkpoint", json!({ "project": project }))
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string();
        let shadow_target = shadow_snapshot(shadow, root);
        *round += 1;
        touch_ten(root, args.files, *round);
        conn.call_value("checkpoint", json!({ "project": project }))
            .unwrap();
        shadow_snapshot(shadow, root);
        ours.push(time_settled(|| restore(conn, &target)));
        *round += 1;
        touch_ten(root, args.files, *round);
        shadow_snapshot(shadow, root);
        theirs.push(time_settled(|| {
            run(git(shadow, root).args(["read-tree", "-u", "--reset", &shadow_target]));
        }));
    }
    (ours, theirs)
}

/// `blame` of a 5,000-line file over 200 prompts that each rewrote 15 of its lines.
fn blame_case(conn: &mut Client, daemon: &Daemon, root: &Path, tmp: &Path, runs: usize) -> Row {
    let file = root.join("blame.txt");
    let worktree = tmp.join("blame-git");
    run(Command::new("git").args(["init", "-q"]).arg(&worktree));
    let mut lines: Vec<String> = (0..5000)
        .map(|i| format!("line {i} of the file, as it was first written"))
        .collect();
    for turn in 0..200 {
        for k in 0..15 {
            let i = (turn * 337 + k * 331) % lines.len();
            lines[i] = format!("line {i}, rewritten during the turn of prompt {turn}");
        }
        let text = lines.join("\n") + "\n";
        std::fs::write(&file, &text).unwrap();
        std::fs::write(worktree.join("blame.txt"), &text).unwrap();
        conn.call_value(
            "checkpoint",
            json!({ "project": root, "kind": "message", "label": format!("prompt {turn}"),
                "dialog": "blame" }),
        )
        .unwrap();
        run(Command::new("git")
            .arg("-C")
            .arg(&worktree)
            .args([
                "-c",
                "user.name=b",
                "-c",
                "user.email=b@b",
                "commit",
                "-qam",
            ])
            .arg(format!("prompt {turn}"))
            .args(["--allow-empty"]));
        if turn == 0 {
            run(Command::new("git")
                .arg("-C")
                .arg(&worktree)
                .args(["add", "blame.txt"]));
            run(Command::new("git").arg("-C").arg(&worktree).args([
                "-c",
                "user.name=b",
                "-c",
                "user.email=b@b",
                "commit",
                "-qm",
                "add",
            ]));
        }
    }
    daemon.note_peak("200 prompts of the blamed file");
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        ours.push(time_settled(|| {
            let b = conn
                .call_value(
                    "blame",
                    json!({ "project": root, "path": file, "dialog": "blame" }),
                )
                .unwrap();
            assert_eq!(b["lines"].as_array().unwrap().len(), 5000);
        }));
        theirs.push(time_settled(|| {
            output(Command::new("git").arg("-C").arg(&worktree).args([
                "blame",
                "--porcelain",
                "blame.txt",
            ]))
        }));
    }
    Row::new("blame, 5,000 lines over 200 prompts", ours, theirs)
}
