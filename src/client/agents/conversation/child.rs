//! Running another program for a fork (an agent's own `export` and `import`, `sqlite3`), with
//! a bound: its output is read as it comes (so a full pipe never stalls it), and past the
//! deadline its whole process group is killed.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// What a program did: its exit status, its output and the end of its error output.
pub struct Ran {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Ran {
    /// The last line of its error output.
    pub fn last_words(&self) -> &str {
        self.stderr.trim().lines().last().unwrap_or("")
    }
}

/// Runs `program ARGS` with `input` on its stdin, in a process group of its own; at most
/// `max_stdout` bytes of its output are kept. An error says why it did not run to its end.
pub fn run(
    program: &Path,
    args: &[&std::ffi::OsStr],
    dir: Option<&Path>,
    input: &[u8],
    limit: Duration,
    max_stdout: u64,
) -> Result<Ran, String> {
    let mut command = Command::new(program);
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    let mut child = command
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot run it: {e}"))?;
    let pipe = |p: Box<dyn Read + Send>, max: u64| {
        std::thread::spawn(move || {
            let mut all = Vec::new();
            let _ = p.take(max).read_to_end(&mut all);
            all
        })
    };
    let out = pipe(Box::new(child.stdout.take().expect("piped")), max_stdout);
    let err = pipe(Box::new(child.stderr.take().expect("piped")), 64 << 10);
    let mut stdin = child.stdin.take().expect("piped");
    let feed = input.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&feed);
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if started.elapsed() < limit => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                if let Some(group) = rustix::process::Pid::from_raw(child.id() as i32) {
                    let _ =
                        rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
                }
                let _ = child.wait();
                break Err(format!("it did not finish within {} s", limit.as_secs()));
            }
            Err(e) => break Err(e.to_string()),
        }
    };
    let _ = feeder.join();
    let stdout = out.join().unwrap_or_default();
    let stderr = String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned();
    status.map(|status| Ran {
        status,
        stdout,
        stderr,
    })
}
