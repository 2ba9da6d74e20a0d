//! Files that change while the daemon reads them: rewritten in place, appended to, swapped for
//! a FIFO. A checkpoint stores one version that existed (or says why it could not), and no
//! thread ever blocks on a FIFO.

use std::io::{Seek, SeekFrom, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::*;

const CHUNK: usize = 64 * 1024;
const CHUNKS: usize = 16;

/// Runs `body` on a thread until `stop` is set; returns its handle.
fn spawn_loop(
    stop: &Arc<AtomicBool>,
    mut body: impl FnMut() + Send + 'static,
) -> std::thread::JoinHandle<()> {
    let stop = stop.clone();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            body();
        }
    })
}

#[test]
fn a_file_rewritten_in_place_is_never_stored_torn() {
    let env = TestEnv::new();
    let proj = env.proj();
    let path = proj.join("big.bin");
    std::fs::write(
        &path,
        std::iter::repeat_n(1u32.to_le_bytes(), CHUNK * CHUNKS / 4)
            .flatten()
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    env.watch();
    env.checkpoint("first");

    let stop = Arc::new(AtomicBool::new(false));
    let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    let mut pass = 1u32;
    // Each pass fills the file with its number, front to back: every state that exists on
    // disk is some words of pass p followed by words of pass p - 1.
    let writer = spawn_loop(&stop, move || {
        pass += 1;
        let chunk: Vec<u8> = std::iter::repeat_n(pass.to_le_bytes(), CHUNK / 4)
            .flatten()
            .collect();
        file.seek(SeekFrom::Start(0)).unwrap();
        for _ in 0..CHUNKS {
            file.write_all(&chunk).unwrap();
        }
    });
    let mut rpc = Rpc::connect(&env);
    let project = json!(proj);
    let mut trees = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(8);
    while Instant::now() < deadline && trees.len() < 400 {
        let c = rpc.call("checkpoint", json!({ "project": project, "label": "t" }));
        let skipped = c["skipped"].as_array().unwrap().clone();
        trees.push((c["id"].as_str().unwrap().to_string(), skipped));
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();

    let (mut torn, mut whole, mut changing) = (0, 0, 0);
    for (id, skipped) in &trees {
        if skipped.iter().any(|s| s["path"] == "big.bin") {
            assert!(
                skipped[0]["reason"]
                    .as_str()
                    .unwrap()
                    .contains("changing while read"),
                "{skipped:?}"
            );
            changing += 1;
            continue;
        }
        let blob = git_bytes(&env, &format!("{id}:big.bin"));
        assert_eq!(blob.len(), CHUNK * CHUNKS);
        let words: Vec<u32> = blob
            .chunks(4)
            .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
            .collect();
        let existed =
            words.windows(2).all(|w| w[0] >= w[1]) && words[0] - words[words.len() - 1] <= 1;
        if existed {
            whole += 1;
        } else {
            torn += 1;
        }
    }
    assert_eq!(
        torn,
        0,
        "{torn} of {} checkpoints stored a mix of two versions ({whole} whole, {changing} skipped)",
        trees.len()
    );
    // Once the writer stops, the file is captured again.
    let c = env.json(&["checkpoint", "-m", "settled"]);
    assert!(c["skipped"].as_array().unwrap().is_empty(), "{c}");
    env.fsck();
}

#[test]
fn appends_come_out_as_clean_prefixes() {
    let env = TestEnv::with_config("[retention]\nkeep = 1000\n");
    let proj = env.proj();
    let path = proj.join("app.log");
    std::fs::write(&path, "").unwrap();
    env.watch();
    env.checkpoint("first");
    let stop = Arc::new(AtomicBool::new(false));
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    let mut n = 0u64;
    let writer = spawn_loop(&stop, move || {
        n += 1;
        file.write_all(format!("line {n:08}\n").as_bytes()).unwrap();
        std::thread::sleep(Duration::from_micros(100));
    });
    let mut rpc = Rpc::connect(&env);
    let mut ids = Vec::new();
    for _ in 0..60 {
        let c = rpc.call("checkpoint", json!({ "project": proj, "label": "t" }));
        ids.push(c["id"].as_str().unwrap().to_string());
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let last = std::fs::read(&path).unwrap();
    let mut captured = 0;
    for id in &ids {
        let listed = env.git(&["ls-tree", "--name-only", id]);
        if !listed.lines().any(|l| l == "app.log") {
            continue;
        }
        let blob = git_bytes(&env, &format!("{id}:app.log"));
        assert!(
            last.starts_with(&blob),
            "checkpoint {id} is not a prefix of the log"
        );
        captured += 1;
    }
    assert!(
        captured > ids.len() / 2,
        "only {captured} of {} checkpoints held the log",
        ids.len()
    );
}

/// A path that flips between a regular file and a FIFO while checkpoints and a subscriber
/// read it; a FIFO named as a bundle to import. Nothing blocks, and SIGTERM still stops the
/// daemon.
#[test]
fn fifos_never_hang_the_daemon() {
    let mut env = TestEnv::new();
    let proj = env.proj();
    write(&proj, "x", "plain\n");
    env.watch();
    env.checkpoint("first");
    let mut events = std::process::Command::new(ckpt_bin());
    env.env(&mut events);
    let mut events = events
        .current_dir(&proj)
        .args(["--no-spawn", "events"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let dir = proj.clone();
    let swapper = spawn_loop(&stop, move || {
        let fifo = dir.join("fifo.tmp");
        let plain = dir.join("plain.tmp");
        let _ = std::fs::remove_file(&fifo);
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        std::fs::rename(&fifo, dir.join("x")).unwrap();
        std::fs::write(&plain, "plain\n").unwrap();
        std::fs::rename(&plain, dir.join("x")).unwrap();
    });
    let mut rpc = Rpc::connect(&env);
    let started = Instant::now();
    for _ in 0..150 {
        rpc.call("checkpoint", json!({ "project": proj, "label": "t" }));
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(started.elapsed() < Duration::from_secs(60));

    let bundle = env.home.join("bundle.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&bundle)
        .status()
        .unwrap();
    assert!(made.success());
    let out = env.ckpt(&["import", "--bundle", bundle.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not a regular file"),
        "{}",
        stderr(&out)
    );

    env.assert_serving();
    let _ = events.kill();
    let _ = events.wait();
    assert!(env.stop_daemon().success());
}

fn git_bytes(env: &TestEnv, spec: &str) -> Vec<u8> {
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(env.store())
        .args(["cat-file", "blob", spec])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    out.stdout
}
