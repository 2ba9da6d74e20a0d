//! The real `git` on a store: plain commands, raw objects written past git's own checks, and
//! what a process maps of the store's packs.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};

use super::{stderr, stdout, TestEnv};

pub fn git_in(git_dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", git_dir)
        .arg("--git-dir")
        .arg(git_dir)
        .args(args)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}{}",
        stderr(&out),
        stdout(&out)
    );
    stdout(&out)
}

/// Writes a raw object with `git hash-object --literally`, bypassing git's own checks.
pub fn raw_object(env: &TestEnv, kind: &str, data: &[u8]) -> String {
    let mut child = Command::new("git")
        .arg("--git-dir")
        .arg(env.store())
        .args(["hash-object", "-w", "--literally", "--stdin", "-t", kind])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), data).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    stdout(&out).trim().to_string()
}

pub fn tree_entry(mode: &str, name: &str, hex: &str) -> Vec<u8> {
    let mut e = format!("{mode} {name}\0").into_bytes();
    e.extend((0..20).map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap()));
    e
}

/// The packs of the store at `store` (their names, `pack-<sum>`) whose data the process `pid`
/// maps (what reading objects maps; a lookup maps only the pack's index).
pub fn mapped_packs(pid: u32, store: &Path) -> BTreeSet<String> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let packs = store.join("objects/pack");
    let packs = packs.to_string_lossy();
    maps.lines()
        .filter_map(|l| l.split_once(&*packs))
        .filter_map(|(_, name)| name.trim_start_matches('/').strip_suffix(".pack"))
        .map(String::from)
        .collect()
}
