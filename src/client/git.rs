//! Running `git` for a push or a fetch: the user's own git, with their credentials (ssh agent,
//! credential helpers), never waiting on a prompt, and bounded: a remote that sends nothing
//! for [`STALL`] (dead, hanging, or a server that never answers) fails the command, naming the
//! remote, with every process git started stopped.

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

/// What git printed on its standard output.
pub struct GitOutput {
    pub stdout: String,
}

/// Runs `git ARGS` for `what` (e.g. "push to origin (URL)"); a failure's message names it and
/// ends with git's own last words.
pub fn run(args: &[OsString], what: &str) -> Result<GitOutput, ClientError> {
    let stall = std::env::var("CKPT_GIT_STALL_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(STALL, Duration::from_secs);
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
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ClientError::Other(format!(
            "cannot {what}: ckpt uses git for pushes and fetches, and no `git` is on PATH \
             (install git)"
        )),
        _ => ClientError::Other(format!("cannot {what}: cannot start git: {e}")),
    })?;
    let started = Instant::now();
    let last = Arc::new(AtomicU64::new(0));
    let reader = |mut pipe: Box<dyn Read + Send>| {
        let last = last.clone();
        std::thread::spawn(move || {
            let mut all = Vec::new();
            let mut buf = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                last.store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
                all.extend_from_slice(&buf[..n]);
            }
            String::from_utf8_lossy(&all).into_owned()
        })
    };
    let out = reader(Box::new(child.stdout.take().expect("piped")));
    let err = reader(Box::new(child.stderr.take().expect("piped")));
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        let quiet = started.elapsed().as_millis() as u64 - last.load(Ordering::Relaxed);
        if quiet > stall.as_millis() as u64 {
            let pid = rustix::process::Pid::from_raw(child.id() as i32);
            if let Some(pid) = pid {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    match status {
        None => Err(ClientError::Other(format!(
            "cannot {what}: the remote sent nothing for {} s; gave up (is the server up and \
             reachable?){}",
            stall.as_secs(),
            last_words(&stderr)
        ))),
        Some(s) if s.success() => Ok(GitOutput { stdout }),
        Some(s) => Err(ClientError::Other(format!(
            "cannot {what}: git {}{}",
            match s.code() {
                Some(code) => format!("exited with {code}"),
                None => "was killed".into(),
            },
            last_words(&stderr)
        ))),
    }
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
