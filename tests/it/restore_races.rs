//! A restore while the agent keeps writing: every write that completed before the restore
//! replaced its file is on disk, in the undo checkpoint, or reported skipped. Two writers that
//! never stop during the restore, one renaming each new version over its file (as editors and
//! most agents' edit tools do), one truncating and rewriting the file in place (as a shell's
//! `>` does), each through several rounds of restores.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::harness::*;

const FILES: usize = 300;
const ROUNDS: usize = 6;

#[derive(Clone, Copy, PartialEq)]
enum Writer {
    /// Writes a temporary file in an excluded folder, then renames it over the project file.
    Rename,
    /// Opens the project file with `O_TRUNC` and writes the new version into it.
    InPlace,
}

fn rel(i: usize) -> String {
    format!("src/m{}/f{i}.txt", i % 10)
}

/// Version `n` of file `i` (distinct for every write of the test).
fn version(i: usize, n: u64) -> String {
    format!("file {i} version {n}\n{}", "x".repeat(200 + i % 50))
}

/// The last write of each file that completed while nothing could have replaced the file
/// under it. A file whose in-place write found its inode replaced meanwhile is dropped: that
/// write finished after the restore replaced the file (and its O_TRUNC had already wiped the
/// version before it), so the guarantee says nothing of it.
type Completed = Arc<Mutex<BTreeMap<usize, Option<String>>>>;

fn start_writer(
    proj: &Path,
    kind: Writer,
    round: usize,
    stop: Arc<AtomicBool>,
    completed: Completed,
) -> std::thread::JoinHandle<u64> {
    let proj = proj.to_path_buf();
    std::thread::spawn(move || {
        let mut n = 0u64;
        let mut i = round * 7;
        while !stop.load(Ordering::Relaxed) {
            i = (i + 1) % FILES;
            n += 1;
            let content = version(i, (round as u64) << 32 | n);
            let path = proj.join(rel(i));
            let done = match kind {
                Writer::Rename => {
                    let tmp = proj.join(format!("build/w-{i}"));
                    std::fs::write(&tmp, &content).unwrap();
                    std::fs::rename(&tmp, &path).map(|()| Some(content))
                }
                Writer::InPlace => std::fs::OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .create(true)
                    .open(&path)
                    .and_then(|mut f| {
                        f.write_all(content.as_bytes())?;
                        let mine = f.metadata()?.ino();
                        let there = std::fs::symlink_metadata(&path).map(|m| m.ino());
                        Ok((there.ok() == Some(mine)).then_some(content))
                    }),
            };
            // A write that failed (the restore moved its folder's file away for a moment)
            // completed nothing.
            if let Ok(done) = done {
                completed.lock().unwrap().insert(i, done);
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        n
    })
}

/// The content of `paths` in `checkpoint`, read with `git cat-file --batch`.
fn contents_in(store: &Path, checkpoint: &str, paths: &[String]) -> BTreeMap<String, String> {
    let mut child = Command::new("git")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .arg("--git-dir")
        .arg(store)
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = String::new();
    for p in paths {
        input.push_str(&format!("{checkpoint}:{p}\n"));
    }
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let mut found = BTreeMap::new();
    let mut rest = &out.stdout[..];
    for p in paths {
        let end = rest.iter().position(|b| *b == b'\n').unwrap();
        let header = String::from_utf8_lossy(&rest[..end]).into_owned();
        rest = &rest[end + 1..];
        if header.ends_with("missing") {
            continue;
        }
        let size: usize = header.rsplit(' ').next().unwrap().parse().unwrap();
        found.insert(
            p.clone(),
            String::from_utf8_lossy(&rest[..size]).into_owned(),
        );
        rest = &rest[size + 1..];
    }
    found
}

fn race(kind: Writer) {
    let env = TestEnv::new();
    let proj = env.proj();
    std::fs::create_dir_all(proj.join("build")).unwrap();
    for i in 0..FILES {
        write(&proj, &rel(i), &version(i, 0));
    }
    env.watch();
    let target = env.checkpoint("prompt 1");
    for i in 0..FILES {
        write(&proj, &rel(i), &version(i, 1));
    }
    env.checkpoint("prompt 2");
    let paths: Vec<String> = (0..FILES).map(rel).collect();
    let (mut lost, mut raced, mut writes) = (Vec::new(), 0, 0);
    for round in 0..ROUNDS {
        let stop = Arc::new(AtomicBool::new(false));
        let completed: Completed = Arc::default();
        let writer = start_writer(&proj, kind, round, stop.clone(), completed.clone());
        std::thread::sleep(std::time::Duration::from_millis(40));
        let out = env.ckpt(&["--json", "restore", "--yes", &target]);
        stop.store(true, Ordering::Relaxed);
        writes += writer.join().unwrap();
        assert!(
            matches!(out.status.code(), Some(0 | 2)),
            "restore failed: {}\n{}",
            stderr(&out),
            env.log()
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let skipped: BTreeSet<String> = report["skipped"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["path"].as_str().unwrap().to_string())
            .collect();
        raced += skipped.len();
        let undo = report["undo_checkpoint"].as_str().unwrap();
        let in_undo = contents_in(&env.store(), undo, &paths);
        for (i, last) in completed.lock().unwrap().iter() {
            let Some(last) = last else { continue };
            let path = rel(*i);
            let on_disk = std::fs::read_to_string(proj.join(&path)).ok();
            let kept = on_disk.as_ref() == Some(last)
                || in_undo.get(&path) == Some(last)
                || skipped.contains(&path);
            if !kept {
                lost.push(format!(
                    "round {round}: {path}: {}",
                    last.lines().next().unwrap()
                ));
            }
        }
    }
    assert!(
        lost.is_empty(),
        "{} of the writes that completed were lost (not on disk, not in the undo checkpoint, \
         not reported skipped):\n{}",
        lost.len(),
        lost.join("\n")
    );
    assert!(
        writes > 200,
        "the writer wrote too little to race: {writes}"
    );
    assert!(
        raced > 0,
        "no restore ever met the writer: the test proves nothing"
    );
    env.fsck();
    assert_no_temporaries(&proj);
}

/// No temporary name of ckpt's is left in the project.
fn assert_no_temporaries(root: &Path) {
    let mut dirs: Vec<PathBuf> = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            assert!(!name.starts_with(".ckpt-tmp-"), "left behind: {name}");
            if entry.file_type().unwrap().is_dir() {
                dirs.push(entry.path());
            }
        }
    }
}

#[test]
fn a_restore_racing_a_renaming_writer_loses_no_completed_write() {
    race(Writer::Rename);
}

#[test]
fn a_restore_racing_an_in_place_writer_loses_no_completed_write() {
    race(Writer::InPlace);
}
