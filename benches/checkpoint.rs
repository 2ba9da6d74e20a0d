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
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use ckpt::client::Connection;
use serde_json::json;

#[path = "checkpoint/deflate.rs"]
mod deflate;
#[path = "checkpoint/turns.rs"]
mod turns;
#[path = "checkpoint/versus.rs"]
mod versus;

struct Args {
    files: usize,
    ignored: usize,
    runs: usize,
    history: usize,
    /// Prompts timed through `ckpt hook claude-code`.
    hook_runs: usize,
    /// Restores, and `ckpt checkpoint` processes, timed (a few milliseconds each, which a
    /// median of 5 on a shared machine moves by a tenth).
    op_runs: usize,
    /// Checkpoints timed under load, and the size of each file the load writes.
    load_runs: usize,
    load_mb: usize,
    /// Idle CPU is measured over this many seconds (0: not measured).
    idle_seconds: u64,
    /// Store sizes against `git gc --aggressive` (true) or plain `git gc`.
    aggressive: bool,
    dir: Option<PathBuf>,
    /// The daemon and client of the build to compare with, interleaved (`--before-daemon`,
    /// `--before-client`).
    before_daemon: Option<PathBuf>,
    before_client: Option<PathBuf>,
    /// Only the small-object compression section.
    deflate_only: bool,
}

/// The `ckpt` binary whose processes are timed (`--client`).
static CLIENT: OnceLock<PathBuf> = OnceLock::new();

fn client_path() -> &'static Path {
    CLIENT.get_or_init(|| PathBuf::from(env!("CARGO_BIN_EXE_ckpt")))
}

/// The `ckptd` binary run (`--daemon`; this build's by default).
static DAEMON: OnceLock<PathBuf> = OnceLock::new();

fn daemon_path() -> &'static Path {
    DAEMON.get_or_init(|| PathBuf::from(env!("CARGO_BIN_EXE_ckptd")))
}

fn client() -> Command {
    Command::new(client_path())
}

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

struct Row {
    name: &'static str,
    ours: Duration,
    theirs: Duration,
}

impl Row {
    fn new(name: &'static str, ours: Vec<Duration>, theirs: Vec<Duration>) -> Row {
        if ours.len() > 1 {
            // Every run, in order: a median hides whether the first of a case was the cold one.
            let runs: Vec<String> = ours.iter().map(|d| format!("{:.1}", ms(*d))).collect();
            println!("# {name}: ckpt {} ms, in run order", runs.join(", "));
        }
        Row {
            name,
            ours: median(ours),
            theirs: median(theirs),
        }
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The 90th and 99th percentiles and the maximum.
fn tail(v: &[Duration]) -> (Duration, Duration, Duration) {
    let mut v = v.to_vec();
    v.sort();
    (v[v.len() * 9 / 10], v[v.len() * 99 / 100], v[v.len() - 1])
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Times `f` after the kernel wrote back every dirty page (`sync`, untimed): each case pays for
/// its own writes, not for the writeback the case before it (often the baseline's rewrite of its
/// 10 MB index) left in flight. The case under load keeps its writer's backlog: it uses [`time`].
fn time_settled<T>(f: impl FnOnce() -> T) -> Duration {
    rustix::fs::sync();
    time(f)
}

fn time<T>(f: impl FnOnce() -> T) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

/// ~2 KiB of text that differs per file (so blobs do not deduplicate).
/// Claude Code's `UserPromptSubmit` input for prompt `id` in `root`.
fn prompt_payload(root: &Path, id: &str) -> String {
    json!({ "session_id": "bench-session", "cwd": root, "prompt_id": id,
        "hook_event_name": "UserPromptSubmit", "prompt": format!("prompt {id}") })
    .to_string()
}

/// Runs `ckpt hook claude-code` with `payload` on stdin, as Claude Code does; it must record.
fn hook(socket: &Path, payload: &str) {
    hook_with(client_path(), socket, payload)
}

/// [`hook`] with the client `program`.
fn hook_with(program: &Path, socket: &Path, payload: &str) {
    use std::io::Write;
    let mut child = Command::new(program)
        .args(["--no-spawn", "--socket"])
        .arg(socket)
        .args(["hook", "claude-code"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ckpt hook");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(payload.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    if out.status.success() && said.contains("gave up waiting for ckptd") {
        // What the user saw: the prompt went on after the hook's bound, the checkpoint was
        // recorded behind it. Timed as it was, and counted.
        GAVE_UP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        println!("# a hook gave up waiting (its checkpoint completed in the background)");
        return;
    }
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "the hook failed: {said}"
    );
}

/// Hooks that gave up waiting for their checkpoint (their 2 s bound).
static GAVE_UP: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn content(i: usize, round: usize) -> String {
    let mut s = format!("// file {i} round {round}\n");
    while s.len() < 2000 {
        s.push_str(&format!(
            "let value_{i}_{} = {};\n",
            s.len(),
            i * 31 + round
        ));
    }
    s
}

fn generate(root: &Path, files: usize, ignored: usize) {
    std::fs::create_dir_all(root).unwrap();
    std::fs::write(root.join(".gitignore"), "node_modules/\n").unwrap();
    for i in 0..files {
        let path = root.join(file_path(i));
        if i % 100 == 0 {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        }
        std::fs::write(path, content(i, 0)).unwrap();
    }
    for i in 0..ignored {
        let path = root.join(format!("node_modules/pkg{}/lib/f{i}.js", i / 50));
        if i % 50 == 0 {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        }
        std::fs::write(path, content(i, 0)).unwrap();
    }
}

/// 100 files a folder, 10 folders a parent: `src/d<a>/d<b>/f<i>.rs`.
fn file_path(i: usize) -> String {
    format!("src/d{}/d{}/f{i}.rs", i / 1000, (i / 100) % 10)
}

/// Rewrites 10 files spread over the tree.
fn touch_ten(root: &Path, files: usize, round: usize) {
    touch(root, files, round, 10);
}

/// Rewrites `n` files spread over the tree (the same ones for the same `round`).
fn touch(root: &Path, files: usize, round: usize, n: usize) {
    for i in touched(files, round, n) {
        std::fs::write(root.join(file_path(i)), content(i, round)).unwrap();
    }
}

/// The files [`touch`] rewrites.
fn touched(files: usize, round: usize, n: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |k| (k * (files / n) + round * 7) % files)
}

fn git(shadow: &Path, root: &Path) -> Command {
    let mut c = Command::new("git");
    c.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@b")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@b")
        .arg(format!("--git-dir={}", shadow.display()))
        .arg(format!("--work-tree={}", root.display()));
    c
}

/// The baseline checkpoint: `add -A` + `write-tree`; returns the tree id.
fn shadow_snapshot(shadow: &Path, root: &Path) -> String {
    run(git(shadow, root).args(["add", "-A"]));
    output(git(shadow, root).arg("write-tree"))
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn output(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn du(path: &Path) -> u64 {
    let out = output(Command::new("du").args(["-sk"]).arg(path));
    out.split_whitespace()
        .next()
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

/// Times `args.load_runs` prompts (`ckpt hook` processes) of 10 changed files while a writer creates files of
/// `args.load_mb` MB one after another beside the project (same filesystem), like a build; and
/// five shadow-git snapshots under the same load. Returns (ours, theirs).
fn under_load(
    args: &Args,
    socket: &Path,
    root: &Path,
    shadow: &Path,
    round: &mut usize,
) -> (Vec<Duration>, Vec<Duration>) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let load_dir = root.parent().unwrap().join("build-output");
    std::fs::create_dir_all(&load_dir).unwrap();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let dir = load_dir.clone();
        let mb = args.load_mb;
        std::thread::spawn(move || {
            use std::io::Write;
            let chunk = vec![0x5au8; 1 << 20];
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let path = dir.join(format!("artifact-{n}.bin"));
                let mut f = std::fs::File::create(&path).unwrap();
                for _ in 0..mb {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    f.write_all(&chunk).unwrap();
                }
                // Two files at most on disk; their dirty pages stay the kernel's to write back.
                if n >= 2 {
                    let _ = std::fs::remove_file(dir.join(format!("artifact-{}.bin", n - 2)));
                }
                n += 1;
            }
        })
    };
    // Let the load build up dirty pages first.
    std::thread::sleep(Duration::from_secs(2));
    let mut ours = Vec::new();
    for n in 0..args.load_runs {
        *round += 1;
        touch_ten(root, args.files, *round);
        ours.push(time(|| {
            hook(socket, &prompt_payload(root, &format!("load-{n}")))
        }));
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut theirs = Vec::new();
    for _ in 0..5 {
        *round += 1;
        touch_ten(root, args.files, *round);
        theirs.push(time(|| shadow_snapshot(shadow, root)));
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let _ = std::fs::remove_dir_all(&load_dir);
    (ours, theirs)
}

/// `args.runs` first prompts after a start (see the case in `main`), each with 10 files changed
/// while no daemon ran, against a shadow-git snapshot; and the most peak RSS of those daemons.
/// None (said) when `systemd-socket-activate` is missing.
fn cold_starts(
    args: &Args,
    dir: &Path,
    root: &Path,
    shadow: &Path,
    round: &mut usize,
) -> Option<(Vec<Duration>, Vec<Duration>, u64)> {
    if Command::new("systemd-socket-activate")
        .arg("--help")
        .stdout(Stdio::null())
        .status()
        .is_err()
    {
        println!("# first prompt after start: not measured (no systemd-socket-activate)");
        return None;
    }
    let (mut ours, mut theirs, mut rss) = (Vec::new(), Vec::new(), 0);
    for n in 0..args.runs {
        *round += 1;
        touch_ten(root, args.files, *round);
        let mut daemon = Daemon::start_activated(dir);
        let payload = prompt_payload(root, &format!("cold-{n}"));
        ours.push(time_settled(|| hook(&daemon.socket, &payload)));
        rss = rss.max(daemon.peak_rss_kib());
        daemon.stop();
        theirs.push(time_settled(|| shadow_snapshot(shadow, root)));
    }
    Some((ours, theirs, rss))
}

/// `args.runs` first prompts after ckptd was started at login (by `ckptd.service`): the daemon
/// starts, the user opens the agent and types (3 s here), then the prompt, timed as a process;
/// 10 files changed while no daemon ran.
fn login_starts(
    args: &Args,
    dir: &Path,
    root: &Path,
    shadow: &Path,
    round: &mut usize,
) -> (Vec<Duration>, Vec<Duration>) {
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for n in 0..args.runs {
        *round += 1;
        touch_ten(root, args.files, *round);
        let mut daemon = Daemon::start(dir);
        std::thread::sleep(Duration::from_secs(3));
        let payload = prompt_payload(root, &format!("login-{n}"));
        ours.push(time_settled(|| hook(&daemon.socket, &payload)));
        daemon.stop();
        theirs.push(time_settled(|| shadow_snapshot(shadow, root)));
    }
    (ours, theirs)
}

/// The daemon's CPU seconds: idle over `args.idle_seconds`, over a burst of 1,000 changed
/// files and the 10 s after it, and over the 10 s after that. None when not measured.
fn idle_cpu(args: &Args, daemon: &Daemon, root: &Path) -> Option<(f64, f64, f64)> {
    if args.idle_seconds == 0 {
        return None;
    }
    let cpu = || daemon.cpu_seconds();
    std::thread::sleep(Duration::from_secs(2));
    let start = cpu();
    std::thread::sleep(Duration::from_secs(args.idle_seconds));
    let quiet = cpu() - start;
    let start = cpu();
    for i in 0..1000.min(args.files) {
        std::fs::write(root.join(file_path(i)), content(i, 999_999)).unwrap();
    }
    std::thread::sleep(Duration::from_secs(10));
    let burst = cpu() - start;
    let start = cpu();
    std::thread::sleep(Duration::from_secs(10));
    Some((quiet, burst, cpu() - start))
}

struct Daemon {
    child: Child,
    socket: PathBuf,
}

/// A connection that is opened again after it sat idle for a minute: the daemon closes
/// connections idle for two, and shadow git's turn can take longer than that at a million
/// files. (The reconnect, ~0.2 ms, then counts in the call after such a turn.)
struct Client {
    conn: Connection,
    socket: PathBuf,
    used: Instant,
}

impl Client {
    fn call_value(
        &mut self,
        method: &str,
        params: serde_json::Value,
    ) -> Result<serde_json::Value, ckpt::client::ClientError> {
        if self.used.elapsed() > Duration::from_secs(60) {
            self.conn = Connection::connect(&self.socket).expect("connect");
        }
        let result = self.conn.call_value(method, params);
        self.used = Instant::now();
        result
    }
}

impl Daemon {
    /// `program` (ckptd, or what starts it) with the daemon's environment under `dir`.
    fn command(dir: &Path, program: &Path) -> Command {
        // Keep every checkpoint, as the shadow repository does, so the store sizes compare.
        let config = dir.join("config/ckpt");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::write(config.join("config.toml"), "[retention]\nkeep = 1000000\n").unwrap();
        let mut cmd = Command::new(program);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", dir)
            .env("XDG_DATA_HOME", dir.join("data"))
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .env("RUST_LOG", "warn")
            // What the systemd units and `ckpt`'s own start of ckptd set (or the bench's own
            // MALLOC_ARENA_MAX: 16 is glibc's default on 2 cores, to measure a build before it).
            .env(
                "MALLOC_ARENA_MAX",
                std::env::var_os("MALLOC_ARENA_MAX").unwrap_or_else(|| "2".into()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        cmd
    }

    /// ckptd as systemd's socket activation starts it: the socket listens now, the daemon
    /// starts at the first connection (`systemd-socket-activate` execs it, keeping its pid).
    fn start_activated(dir: &Path) -> Daemon {
        let socket = dir.join("run/ckptd.sock");
        let _ = std::fs::remove_file(&socket);
        std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
        let mut command = Daemon::command(dir, Path::new("systemd-socket-activate"));
        command.arg("-l").arg(&socket);
        // systemd-socket-activate passes on only PATH, HOME, USER and TERM of its own
        // environment: the rest of the daemon's (its data and configuration folders above
        // all) is named, else the activated daemon would serve a store of its own.
        for name in [
            "XDG_DATA_HOME",
            "XDG_CONFIG_HOME",
            "RUST_LOG",
            "MALLOC_ARENA_MAX",
        ] {
            command.arg("-E").arg(name);
        }
        let child = command
            .arg(daemon_path())
            .arg("--socket")
            .arg(&socket)
            .stderr(Stdio::null())
            .spawn()
            .expect("start systemd-socket-activate");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !socket.exists() {
            assert!(
                Instant::now() < deadline,
                "the activated socket did not appear"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        Daemon { child, socket }
    }

    fn start(dir: &Path) -> Daemon {
        Daemon::start_with(dir, daemon_path())
    }

    /// The daemon `program` with its environment under `dir`, once it answers.
    fn start_with(dir: &Path, program: &Path) -> Daemon {
        let socket = dir.join("run/ckptd.sock");
        let child = Daemon::command(dir, program)
            .arg("--socket")
            .arg(&socket)
            .spawn()
            .expect("start ckptd");
        let d = Daemon { child, socket };
        let deadline = Instant::now() + Duration::from_secs(30);
        // Looked for every millisecond: the restart's case is timed from the moment the daemon
        // listens, and its warm-up starts then (a coarser poll gave it a head start).
        while Connection::connect(&d.socket).is_err() {
            assert!(Instant::now() < deadline, "ckptd did not start");
            std::thread::sleep(Duration::from_millis(1));
        }
        d
    }

    fn connect(&self) -> Client {
        Client {
            conn: Connection::connect(&self.socket).expect("connect"),
            socket: self.socket.clone(),
            used: Instant::now(),
        }
    }

    /// Prints the peak resident memory so far, as a comment line: where the session's peak
    /// comes from.
    fn note_peak(&self, case: &str) {
        let mib = |key| self.status_kib(key) as f64 / 1024.0;
        println!(
            "# daemon RSS after {case}: peak {:.1} MiB, now {:.1} MiB ({:.1} anonymous, {:.1} file-backed)",
            mib("VmHWM:"),
            mib("VmRSS:"),
            mib("RssAnon:"),
            mib("RssFile:")
        );
    }

    /// Peak resident memory, in KiB.
    fn peak_rss_kib(&self) -> u64 {
        self.status_kib("VmHWM:")
    }

    /// Resident memory now, in KiB.
    fn rss_kib(&self) -> u64 {
        self.status_kib("VmRSS:")
    }

    /// A `/proc/PID/status` figure in KiB (0 when unreadable).
    fn status_kib(&self, key: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// User + system CPU time so far, in seconds.
    fn cpu_seconds(&self) -> f64 {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        // Fields after the command name (which is in parentheses): utime is the 14th field.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let fields: Vec<u64> = rest
            .split_whitespace()
            .map(|f| f.parse().unwrap_or(0))
            .collect();
        let ticks = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
        ticks as f64 / 100.0
    }

    fn stop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}
