//! `--before-daemon PATH [--before-client PATH]`: the cases a user waits for at every prompt,
//! timed for two builds in one run, interleaved round by round, so that both meet the same
//! moments of a shared machine. The other cases (first checkpoints, restarts, gc, load, memory)
//! are one per run and read fine from two runs; these few milliseconds are not: on a machine
//! whose speed drifts within minutes, a difference of a tenth of a millisecond between builds
//! shows only when their rounds alternate.
//!
//! Each build gets its own data folder, socket and copy of the tree (so neither daemon sees the
//! other's writes); the "after" build is this run's `--daemon` and `--client` (this build's by
//! default), the "before" build the two paths given (the client defaults to the after one).
//! Which build goes first alternates each round. Printed per case: both medians, the median of
//! the paired differences (after − before) and how many rounds the after build won, and shadow
//! git's median on the after tree with both ratios.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::json;

use super::support::{
    client_path, daemon_path, generate, git, hook_with, median, ms, prompt_payload, run,
    shadow_snapshot, time_settled, touch_ten, Args, Client, Daemon,
};

/// One build: its daemon, a connection to it, its client, and its copy of the tree.
struct Side {
    daemon: Daemon,
    conn: Client,
    client: PathBuf,
    root: PathBuf,
    files: usize,
}

impl Side {
    fn start(dir: &Path, daemon: &Path, client: &Path, args: &Args) -> Side {
        let root = dir.join("project");
        generate(&root, args.files, args.ignored);
        let daemon = Daemon::start_with(dir, daemon);
        let mut conn = daemon.connect();
        conn.call_value("watch", json!({ "path": root })).unwrap();
        conn.call_value("checkpoint", json!({ "project": root, "label": "first" }))
            .unwrap();
        Side {
            daemon,
            conn,
            client: client.to_path_buf(),
            root,
            files: args.files,
        }
    }

    fn checkpoint(&mut self) -> String {
        let r = self
            .conn
            .call_value("checkpoint", json!({ "project": self.root }));
        r.unwrap()["id"].as_str().unwrap().to_string()
    }

    /// `ckpt ARGS` as a process, against this side's daemon, in this side's tree.
    fn process(&self, args: &[&str]) {
        run(Command::new(&self.client)
            .args(["--no-spawn", "--quiet", "--socket"])
            .arg(&self.daemon.socket)
            .args(args)
            .arg("-C")
            .arg(&self.root))
    }
}

/// What a case does to one side in one round: its untimed preparation, then the timed part.
type Case = fn(&mut Side, usize) -> Duration;

pub(super) fn compare(args: &Args, tmp: &Path, before: (PathBuf, PathBuf)) {
    let (before_daemon, before_client) = before;
    println!("# two builds, interleaved round by round (see benches/checkpoint/versus.rs)");
    println!(
        "# before: {} with {}",
        before_daemon.display(),
        before_client.display()
    );
    println!(
        "# after:  {} with {}",
        daemon_path().display(),
        client_path().display()
    );
    let mut sides = [
        Side::start(&tmp.join("before"), &before_daemon, &before_client, args),
        Side::start(&tmp.join("after"), daemon_path(), client_path(), args),
    ];
    // Shadow git works on a third copy of the tree: its changes reach neither daemon.
    let shadow_root = tmp.join("shadow-tree");
    generate(&shadow_root, args.files, args.ignored);
    let shadow = tmp.join("shadow.git");
    run(Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&shadow));
    shadow_snapshot(&shadow, &shadow_root);

    let cases: [(&str, usize, Case); 7] = [
        ("checkpoint, nothing changed", args.op_runs, |s, _| {
            time_settled(|| s.checkpoint())
        }),
        ("checkpoint, 10 files changed", args.op_runs, |s, round| {
            touch_ten(&s.root, s.files, round);
            time_settled(|| s.checkpoint())
        }),
        (
            "hook claude-code, 10 changed",
            args.hook_runs,
            |s, round| {
                touch_ten(&s.root, s.files, round);
                let payload = prompt_payload(&s.root, &format!("versus-{round}"));
                time_settled(|| hook_with(&s.client, &s.daemon.socket, &payload))
            },
        ),
        (
            "checkpoint process, 10 changed",
            args.op_runs,
            |s, round| {
                touch_ten(&s.root, s.files, round);
                time_settled(|| s.process(&["checkpoint"]))
            },
        ),
        ("checkpoint process, unchanged", args.op_runs, |s, _| {
            time_settled(|| s.process(&["checkpoint"]))
        }),
        ("restore, 10 files away", args.op_runs, |s, round| {
            let target = s.checkpoint();
            touch_ten(&s.root, s.files, round);
            s.checkpoint();
            time_settled(|| {
                s.conn
                    .call_value("restore", json!({ "project": s.root, "id": target }))
                    .unwrap()
            })
        }),
        ("restore process, 10 away", args.op_runs, |s, round| {
            let target = s.checkpoint();
            touch_ten(&s.root, s.files, round);
            s.checkpoint();
            time_settled(|| s.process(&["restore", "--yes", &target]))
        }),
    ];
    let mut round = 0;
    let mut table = Vec::new();
    for (name, runs, case) in cases {
        let (mut times, mut theirs) = ([Vec::new(), Vec::new()], Vec::new());
        for n in 0..runs.max(1) {
            round += 1;
            let order = if n % 2 == 0 { [0, 1] } else { [1, 0] };
            for i in order {
                times[i].push(case(&mut sides[i], round));
            }
            // Shadow git, a few times a case (each costs ~0.2 s).
            if n < 5 {
                theirs.push(shadow_case(name, &shadow, &shadow_root, args.files, round));
            }
        }
        table.push((name, times, median(theirs)));
    }
    let floor = [0, 1].map(|i| {
        let runs = (0..20)
            .map(|_| time_settled(|| run(Command::new(&sides[i].client).arg("--version"))))
            .collect();
        median(runs)
    });

    println!();
    println!(
        "{:<30} {:>9} {:>9} {:>7} {:>17} {:>11} {:>14}",
        "case", "before", "after", "a/b", "paired a-b (won)", "shadow git", "ratio b / a"
    );
    for (name, [before, after], theirs) in table {
        let n = before.len();
        let mut diffs: Vec<f64> = before
            .iter()
            .zip(&after)
            .map(|(b, a)| ms(*a) - ms(*b))
            .collect();
        diffs.sort_by(|x, y| x.total_cmp(y));
        let won = diffs.iter().filter(|d| **d < 0.0).count();
        let (b, a) = (median(before), median(after));
        println!(
            "{name:<30} {:>6.2} ms {:>6.2} ms {:>7.2} {:>+9.2} ms ({won:>3}/{n}) {:>8.1} ms {:>6.0}x / {:.0}x",
            ms(b),
            ms(a),
            a.as_secs_f64() / b.as_secs_f64().max(1e-9),
            diffs[n / 2],
            ms(theirs),
            theirs.as_secs_f64() / b.as_secs_f64().max(1e-9),
            theirs.as_secs_f64() / a.as_secs_f64().max(1e-9),
        );
    }
    println!(
        "{:<30} {:>6.2} ms {:>6.2} ms  (the floor of any process start; median of 20 each)",
        "ckpt --version",
        ms(floor[0]),
        ms(floor[1])
    );
    for side in &mut sides {
        side.daemon.stop();
    }
}

/// Shadow git's counterpart of case `name` on `root`: a snapshot (after 10 changed files but
/// for the unchanged cases), or a `read-tree -u --reset` back to a snapshot 10 files away.
fn shadow_case(name: &str, shadow: &Path, root: &Path, files: usize, round: usize) -> Duration {
    if name.contains("restore") {
        let target = shadow_snapshot(shadow, root);
        touch_ten(root, files, round);
        shadow_snapshot(shadow, root);
        time_settled(|| run(git(shadow, root).args(["read-tree", "-u", "--reset", &target])))
    } else {
        if !name.contains("nothing") && !name.contains("unchanged") {
            touch_ten(root, files, round);
        }
        time_settled(|| shadow_snapshot(shadow, root))
    }
}
