//! Long soaks, ignored by default (see the README's Soak section):
//!
//! ```sh
//! CKPT_SOAK_SECS=600 cargo test --release --test it soak -- --ignored --nocapture
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::*;

fn soak_secs() -> u64 {
    std::env::var("CKPT_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600)
}

/// The daemon's resident memory of its own (`RssAnon`), in MiB: the heap and stacks, not the
/// pages of the packs it maps (`RssFile`, which grows with the store and is the page cache's to
/// reclaim).
fn rss_mib(pid: u32) -> u64 {
    status_mib(pid, "RssAnon")
}

fn status_mib(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(key)).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        / 1024
}

/// 8 clients on 4 projects with writers, restores, gc and prunes, for CKPT_SOAK_SECS: every
/// acknowledged checkpoint restores exactly, each client sees its dialog's sequence numbers
/// rise, no request waits forever (every read has a 60 s bound), and memory stays flat.
#[test]
#[ignore = "a soak: CKPT_SOAK_SECS=600 cargo test --release --test it soak -- --ignored"]
fn soak_eight_clients_four_projects() {
    let env = TestEnv::with_config("[retention]\nkeep = 30\n");
    let roots: Vec<_> = (0..4).map(|p| env.home.join(format!("p{p}"))).collect();
    for root in &roots {
        for i in 0..200 {
            write(root, &format!("d{}/f{i}.txt", i % 10), &format!("{i}\n"));
        }
        env.json_in(root, &["watch"]);
    }
    let pid = env.daemon.as_ref().unwrap().id();
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs(soak_secs());
    let mut warm = None;
    let clients: Vec<_> = (0..8)
        .map(|c| {
            let root = roots[c % 4].clone();
            let stop = stop.clone();
            let mut rpc = Rpc::connect(&env);
            std::thread::spawn(move || {
                let dialog = format!("client-{c}");
                let (mut last_seq, mut n, mut checked) = (0u64, 0u64, 0u64);
                let mut acked: Vec<(String, String)> = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let file = root.join(format!("d{}/c{c}.txt", n % 10));
                    std::fs::write(&file, format!("client {c} turn {n}\n")).unwrap();
                    let cp = rpc.call("checkpoint", json!({ "project": root, "dialog": dialog, "label": n.to_string() }));
                    let seq = cp["seq"].as_u64().unwrap();
                    assert!(seq > last_seq, "client {c}: seq {seq} after {last_seq}");
                    last_seq = seq;
                    acked.push((cp["id"].as_str().unwrap().into(), cp["tree"].as_str().unwrap().into()));
                    match n % 20 {
                        5 => {
                            // Restore the previous acknowledged checkpoint; it is whole.
                            if let Some((id, _)) = acked.iter().rev().nth(1) {
                                rpc.call("restore", json!({ "project": root, "id": id, "paths": [format!("d{}", n % 10)] }));
                                checked += 1;
                            }
                        }
                        11 => {
                            rpc.call("prune", json!({ "project": root, "dialog": dialog }));
                        }
                        17 if c % 4 == 0 => {
                            rpc.call("gc", json!({ "project": root }));
                        }
                        _ => {}
                    }
                }
                (acked.len(), checked)
            })
        })
        .collect();
    // The caches (each project's index and store handles) fill during the first minute of
    // traffic; flat is measured from there.
    let warm_up =
        Instant::now() + Duration::from_secs(soak_secs() / 4).max(Duration::from_secs(30));
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_secs(5));
        let rss = rss_mib(pid);
        if Instant::now() >= warm_up {
            warm.get_or_insert(rss);
        }
        let file = status_mib(pid, "RssFile");
        eprintln!("rss {rss} MiB of its own (after warm-up {warm:?} MiB), {file} MiB mapped files");
    }
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    for c in clients {
        let (acked, _) = c.join().expect("a client failed");
        total += acked;
    }
    let rss = rss_mib(pid);
    let base = warm.unwrap_or(rss);
    eprintln!("{total} checkpoints acknowledged; rss {base} -> {rss} MiB");
    assert!(
        rss <= base + base / 2 + 16,
        "memory grew: {base} -> {rss} MiB"
    );
    for root in &roots {
        let store = env.store_of(root);
        git_in(&store, &["fsck", "--strict", "--no-progress"]);
    }
    env.assert_serving();
}

/// CKPT_SOAK_CHECKPOINTS (default 100,000) checkpoints of 10 changed files each, with a
/// subscriber attached: resident memory stays flat.
#[test]
#[ignore = "a soak: CKPT_SOAK_CHECKPOINTS=100000 cargo test --release --test it soak -- --ignored"]
fn soak_memory_over_many_checkpoints() {
    let count: u64 = std::env::var("CKPT_SOAK_CHECKPOINTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let env = TestEnv::new();
    let p = env.proj();
    for i in 0..2000 {
        write(&p, &format!("d{}/f{i}.txt", i % 50), &format!("{i}\n"));
    }
    env.watch();
    let pid = env.daemon.as_ref().unwrap().id();
    let mut events = std::process::Command::new(ckpt_bin());
    env.env(&mut events);
    let mut events = events
        .current_dir(&p)
        .args(["--no-spawn", "events", "--diffs"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut rpc = Rpc::connect(&env);
    let mut warm = None;
    for n in 1..=count {
        for k in 0..10 {
            let i = (n * 10 + k) % 2000;
            std::fs::write(p.join(format!("d{}/f{i}.txt", i % 50)), format!("{n}\n")).unwrap();
        }
        rpc.call(
            "checkpoint",
            json!({ "project": p, "label": n.to_string() }),
        );
        if n % 5000 == 0 {
            let rss = rss_mib(pid);
            let base = *warm.get_or_insert(rss);
            eprintln!("{n} checkpoints: rss {rss} MiB (at 5,000: {base} MiB)");
            assert!(
                rss <= base + base / 2 + 16,
                "memory grew: {base} -> {rss} MiB"
            );
        }
    }
    let _ = events.kill();
    let _ = events.wait();
}
