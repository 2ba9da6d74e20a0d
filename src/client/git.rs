//! Running `git` for a push or a fetch: the user's own git, with their credentials (ssh agent,
//! credential helpers), never waiting on a prompt, and bounded twice: a remote that sends
//! nothing for [`STALL`] (dead, hanging, or a server that never answers), or that keeps
//! talking without moving the data (progress trickled forever), fails the command, naming the
//! remote. The second bound is a deadline that grows with the bytes moved: [`DEADLINE`], plus
//! a second for every [`MIN_RATE`] bytes git reports having received or written.
//!
//! git runs in this process's process group, so whoever stops `ckpt` by its group (a terminal's
//! Ctrl-C, `auto_push`'s bound) stops git and the ssh it started too; when `ckpt` gives up on
//! git itself, it stops git's whole tree of processes.

use std::ffi::OsString;
use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::ClientError;

/// How long git may go without printing anything (it reports progress at least every second
/// while it transfers) before the remote counts as not answering; with the start-up and the
/// clean-up, a dead remote fails within 15 s.
const STALL: Duration = Duration::from_secs(12);
/// How long a push or fetch may take before it must have moved data.
const DEADLINE: Duration = Duration::from_secs(60);
/// The slowest transfer waited for, in bytes a second (a 256 kbit/s link).
const MIN_RATE: u64 = 32 * 1024;

/// What git printed on its standard output.
pub struct GitOutput {
    pub stdout: String,
}

/// Runs `git ARGS` for `what` (e.g. "push to origin (URL)"); a failure's message names it and
/// ends with git's own last words.
pub fn run(args: &[OsString], what: &str) -> Result<GitOutput, ClientError> {
    let seconds = |name: &str, default: Duration| {
        std::env::var(name)
            .ok()
            .and_then(|s| s.parse().ok())
            .map_or(default, Duration::from_secs)
    };
    let stall = seconds("CKPT_GIT_STALL_SECONDS", STALL);
    let deadline = seconds("CKPT_GIT_DEADLINE_SECONDS", DEADLINE);
    let mut command = Command::new("git");
    command
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        // Plain text: no pager, no colours, no translations a message test could not read.
        .env("GIT_PAGER", "cat")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ClientError::Other(format!(
            "cannot {what}: ckpt uses git for pushes and fetches, and no `git` is on PATH \
             (install git)"
        )),
        _ => ClientError::Other(format!("cannot {what}: cannot start git: {e}")),
    })?;
    let started = Instant::now();
    let last = Arc::new(AtomicU64::new(0));
    let moved = Arc::new(AtomicU64::new(0));
    let reader = |mut pipe: Box<dyn Read + Send>, progress: bool| {
        let (last, moved) = (last.clone(), moved.clone());
        std::thread::spawn(move || {
            let mut all = Vec::new();
            let mut buf = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                last.store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
                all.extend_from_slice(&buf[..n]);
                if progress {
                    let tail = &all[all.len().saturating_sub(n + 200)..];
                    if let Some(bytes) = bytes_moved(&String::from_utf8_lossy(tail)) {
                        moved.fetch_max(bytes, Ordering::Relaxed);
                    }
                }
            }
            String::from_utf8_lossy(&all).into_owned()
        })
    };
    let out = reader(Box::new(child.stdout.take().expect("piped")), false);
    let err = reader(Box::new(child.stderr.take().expect("piped")), true);
    let gave_up = loop {
        if let Some(status) = child.try_wait()? {
            break Ok(status);
        }
        let elapsed = started.elapsed();
        let quiet = elapsed.as_millis() as u64 - last.load(Ordering::Relaxed);
        let allowed = deadline + Duration::from_secs(moved.load(Ordering::Relaxed) / MIN_RATE);
        let why = match (quiet > stall.as_millis() as u64, elapsed > allowed) {
            (true, _) => Some(format!(
                "the remote sent nothing for {} s; gave up (is the server up and reachable?)",
                stall.as_secs()
            )),
            (false, true) => Some(format!(
                "after {} s it had moved {} (at least {} KiB a second after the first {} s \
                 are waited for); gave up",
                elapsed.as_secs(),
                crate::client::output::human_bytes(moved.load(Ordering::Relaxed)),
                MIN_RATE / 1024,
                deadline.as_secs()
            )),
            _ => None,
        };
        if let Some(why) = why {
            stop_tree(child.id());
            let _ = child.wait();
            break Err(why);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    match gave_up {
        Err(why) => Err(ClientError::Other(format!(
            "cannot {what}: {why}{}",
            last_words(&stderr)
        ))),
        Ok(s) if s.success() => Ok(GitOutput { stdout }),
        Ok(s) => Err(ClientError::Other(format!(
            "cannot {what}: git {}{}",
            match s.code() {
                Some(code) => format!("exited with {code}"),
                None => "was killed".into(),
            },
            last_words(&stderr)
        ))),
    }
}

/// The bytes git's own progress (not the remote's, which says `remote:`) last reported
/// received or written: `Receiving objects:  45% (450/1000), 1.20 MiB | 600.00 KiB/s`.
fn bytes_moved(text: &str) -> Option<u64> {
    text.split(['\r', '\n'])
        .filter(|line| {
            line.starts_with("Receiving objects:") || line.starts_with("Writing objects:")
        })
        .filter_map(|line| {
            let (_, after) = line.split_once("), ")?;
            let mut words = after.split_whitespace();
            let number: f64 = words.next()?.parse().ok()?;
            let unit = match words.next()?.trim_end_matches(',') {
                "bytes" => 1.0,
                "KiB" => 1024.0,
                "MiB" => 1024.0 * 1024.0,
                "GiB" => 1024.0 * 1024.0 * 1024.0,
                _ => return None,
            };
            Some((number * unit) as u64)
        })
        .next_back()
}

/// Stops process `pid` and every process it started, however deep: each is frozen first
/// (`SIGSTOP`, so none starts another or is handed to init meanwhile), then all are killed.
fn stop_tree(pid: u32) {
    use rustix::process::{kill_process, Pid, Signal};
    let signal = |pid: i32, sig: Signal| {
        if let Some(pid) = Pid::from_raw(pid) {
            let _ = kill_process(pid, sig);
        }
    };
    let mut tree = vec![pid as i32];
    signal(tree[0], Signal::STOP);
    loop {
        let children: Vec<i32> = parents()
            .into_iter()
            .filter(|(child, parent)| tree.contains(parent) && !tree.contains(child))
            .map(|(child, _)| child)
            .collect();
        if children.is_empty() {
            break;
        }
        for child in children {
            signal(child, Signal::STOP);
            tree.push(child);
        }
    }
    for pid in tree {
        signal(pid, Signal::KILL);
    }
}

/// Every process and its parent, from `/proc/PID/stat`.
fn parents() -> Vec<(i32, i32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // `pid (name) state ppid …`: the name may hold spaces and parentheses.
            let after = &stat[stat.rfind(')')? + 1..];
            let ppid = after.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect()
}

/// git's last lines that are not progress, as `: line; line`.
fn last_words(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .split(['\n', '\r'])
        .map(str::trim)
        .filter(|l| {
            !l.is_empty()
                && !l.contains("% (")
                && !l.starts_with("Counting")
                && !l.starts_with("Enumerating")
                && !l.starts_with("Compressing")
                && !l.starts_with("Writing")
                && !l.starts_with("Total")
        })
        .collect();
    let tail = &lines[lines.len().saturating_sub(4)..];
    match tail.is_empty() {
        true => String::new(),
        false => format!(": {}", tail.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bytes_moved_are_read_from_gits_own_progress() {
        let progress = "remote: Counting objects: 5\rReceiving objects:  45% (450/1000), 1.50 MiB | 600.00 KiB/s\rReceiving objects:  46% (460/1000), 2.00 MiB | 600.00 KiB/s";
        assert_eq!(bytes_moved(progress), Some(2 * 1024 * 1024));
        assert_eq!(
            bytes_moved("Writing objects: 100% (3/3), 263 bytes | 263.00 KiB/s, done."),
            Some(263)
        );
        // What the remote says is not counted: it could say anything.
        assert_eq!(
            bytes_moved("remote: Receiving objects: 1% (1/9), 900.00 GiB | 1 KiB/s"),
            None
        );
        assert_eq!(bytes_moved("Counting objects: 3"), None);
    }

    #[test]
    fn a_tree_of_processes_is_stopped_whole() {
        let mut child = Command::new("sh")
            .args(["-c", "sleep 60 & sleep 60 & wait"])
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let id = child.id() as i32;
        let below: Vec<i32> = parents()
            .into_iter()
            .filter(|(_, parent)| *parent == id)
            .map(|(child, _)| child)
            .collect();
        assert_eq!(below.len(), 2, "{below:?}");
        stop_tree(child.id());
        let _ = child.wait();
        std::thread::sleep(Duration::from_millis(200));
        for pid in below {
            let alive = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| !s.contains(") Z "));
            assert!(!alive, "{pid} outlived its parent");
        }
    }
}
