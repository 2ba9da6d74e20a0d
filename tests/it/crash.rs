//! kill -9 at random points of every kind of operation: every checkpoint whose id (and tag)
//! was acknowledged stays whole and restorable byte for byte, the store passes
//! `git fsck --strict`, no file is ever torn, and nothing is left behind in the project.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::harness::*;

const FILES: usize = 24;
const SIZE: usize = 128 * 1024;

/// File `i` at version `v` is SIZE bytes of this letter, so a torn or truncated file shows.
fn letter(i: usize, v: u32) -> u8 {
    b'a' + ((i as u32 * 7 + v) % 26) as u8
}

/// Runs `ckpt --json ARGS`, waiting while the daemon is down (it is restarted after a kill);
/// None when the request failed (killed in flight, say).
fn ckpt(home: &Path, args: &[&str]) -> Option<serde_json::Value> {
    for _ in 0..100 {
        let mut cmd = Command::new(ckpt_bin());
        env_for(home, &mut cmd);
        let out = cmd
            .current_dir(home.join("proj"))
            .arg("--no-spawn")
            .arg("--json")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        if out.status.success() || out.status.code() == Some(2) {
            return serde_json::from_slice(&out.stdout).ok();
        }
        if !String::from_utf8_lossy(&out.stdout).contains("no ckptd answers") {
            return None;
        }
        std::thread::sleep(Duration::from_millis(30));
    }
    None
}

#[test]
fn kill_9_during_every_kind_of_operation() {
    let mut env = TestEnv::with_config("[retention]\nkeep = 1000\n");
    let proj = env.proj();
    for i in 0..FILES {
        std::fs::write(proj.join(format!("f{i:02}.bin")), vec![letter(i, 0); SIZE]).unwrap();
    }
    env.watch();
    let first = env.checkpoint("v0");
    env.json(&["tag", &first, "t-first"]);
    let bundle = env.home.join("one.bundle");
    env.json(&["export", &first, "--bundle", bundle.to_str().unwrap()]);

    // id -> the letter of each file it holds, for checkpoints acknowledged and tagged.
    let kept: Arc<Mutex<BTreeMap<String, Vec<u8>>>> = Arc::default();
    kept.lock()
        .unwrap()
        .insert(first.clone(), (0..FILES).map(|i| letter(i, 0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let driver = {
        let (kept, stop) = (kept.clone(), stop.clone());
        let home = env.home.clone();
        let bundle = bundle.clone();
        std::thread::spawn(move || {
            let env = home.as_path();
            let proj = home.join("proj");
            let mut versions: Vec<u8> = (0..FILES).map(|i| letter(i, 0)).collect();
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                match n % 12 {
                    0..=5 => {
                        for i in (0..FILES).filter(|i| (i + n as usize).is_multiple_of(3)) {
                            versions[i] = letter(i, n);
                            // Written whole beside the file and renamed, as editors do.
                            let tmp = proj.join(format!(".w{i}"));
                            std::fs::write(&tmp, vec![versions[i]; SIZE]).unwrap();
                            std::fs::rename(&tmp, proj.join(format!("f{i:02}.bin"))).unwrap();
                        }
                        if let Some(c) = ckpt(env, &["checkpoint", "-m", &format!("v{n}")]) {
                            let id = c["id"].as_str().unwrap().to_string();
                            if ckpt(env, &["tag", &id, &format!("t{n}")]).is_some() {
                                kept.lock().unwrap().insert(id, versions.clone());
                            }
                        }
                    }
                    6 | 7 => {
                        let target = kept.lock().unwrap().keys().next_back().cloned();
                        if let Some(id) = target {
                            ckpt(env, &["restore", "--yes", &id]);
                        }
                        // Killed or not, the disk holds whole files of some versions.
                        versions = read_letters(&proj);
                    }
                    8 => {
                        // An undo of an acknowledged restore brings back an unknown mix of
                        // versions: re-read what is on disk.
                        ckpt(env, &["undo", "--yes"]);
                        versions = read_letters(&proj);
                    }
                    9 => {
                        ckpt(env, &["prune", "--keep", "2", "--gc"]);
                    }
                    10 => {
                        let name = format!("d{n}");
                        ckpt(env, &["dialog", "new", &name]);
                        ckpt(env, &["dialog", "rm", &name]);
                    }
                    _ => {
                        ckpt(
                            env,
                            &[
                                "import",
                                "--bundle",
                                bundle.to_str().unwrap(),
                                "--dialog",
                                "imp",
                            ],
                        );
                        ckpt(env, &["gc"]);
                    }
                }
            }
        })
    };
    let mut seed = 0x1234567u32;
    // Ten kills; more (bounded) on a machine so busy that too few checkpoints were acknowledged
    // between them to prove anything. Those come further apart: after a kill the daemon reads
    // every file again (its stat cache is saved only once the project is quiet, which it never
    // is here), which takes most of a second in a debug build on a busy machine.
    let mut kills = 0;
    while kills < 10 || (kept.lock().unwrap().len() <= 3 && kills < 30) {
        kills += 1;
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        let window = if kills <= 10 { 100 } else { 1500 };
        std::thread::sleep(Duration::from_millis(window + (seed % 700) as u64));
        env.kill_daemon();
        std::thread::sleep(Duration::from_millis(50));
        env.start_daemon();
    }
    stop.store(true, Ordering::Relaxed);
    driver.join().unwrap();

    // Every file is some whole version; nothing of ckpt's is left in the project.
    read_letters(&proj);
    env.checkpoint("after the storm");
    let litter: Vec<_> = std::fs::read_dir(&proj)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".ckpt-tmp-"))
        .collect();
    assert!(litter.is_empty(), "{litter:?}");
    env.fsck();

    let kept = kept.lock().unwrap().clone();
    eprintln!(
        "{} acknowledged and tagged checkpoints to check",
        kept.len()
    );
    assert!(
        kept.len() > 3,
        "too few checkpoints survived to prove anything: {}",
        kept.len()
    );
    let hashes: BTreeMap<u8, String> = (b'a'..=b'z')
        .map(|l| (l, git_hash(&env, &vec![l; SIZE])))
        .collect();
    for (id, letters) in &kept {
        for (i, l) in letters.iter().enumerate() {
            let spec = format!("{id}:f{i:02}.bin");
            assert_eq!(env.git(&["rev-parse", &spec]).trim(), hashes[l], "{spec}");
        }
    }
    // A few restore byte for byte.
    for (id, letters) in kept.iter().rev().take(3) {
        let out = env.ckpt(&["restore", "--yes", id]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(&read_letters(&proj), letters, "restore of {id}");
    }
    env.fsck();
}

/// The letter each file holds on disk (panics on a torn or truncated file).
fn read_letters(proj: &Path) -> Vec<u8> {
    (0..FILES)
        .map(|i| {
            let data = std::fs::read(proj.join(format!("f{i:02}.bin"))).unwrap();
            assert_eq!(data.len(), SIZE, "f{i:02} is truncated");
            assert!(data.iter().all(|b| *b == data[0]), "f{i:02} is a mix");
            data[0]
        })
        .collect()
}

fn git_hash(env: &TestEnv, data: &[u8]) -> String {
    let mut child = Command::new("git")
        .args(["hash-object", "--stdin"])
        .current_dir(env.home.clone())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), data).unwrap();
    stdout(&child.wait_with_output().unwrap())
        .trim()
        .to_string()
}
