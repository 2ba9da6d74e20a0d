//! What every case of the benchmark uses: the result rows and their statistics, timing, the
//! generated tree and its edits, shadow git (the baseline), the daemon and a connection to it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use ckpt::client::Connection;
use serde_json::json;

pub(crate) struct Args {
    pub(crate) files: usize,
    pub(crate) ignored: usize,
    pub(crate) runs: usize,
    pub(crate) history: usize,
    /// Prompts timed through `ckpt hook claude-code`.
    pub(crate) hook_runs: usize,
    /// Restores, and `ckpt checkpoint` processes, timed (a few milliseconds each, which a
    /// median of 5 on a shared machine moves by a tenth).
    pub(crate) op_runs: usize,
    /// Checkpoints timed under load, and the size of each file the load writes.
    pub(crate) load_runs: usize,
    pub(crate) load_mb: usize,
    /// Idle CPU is measured over this many seconds (0: not measured).
    pub(crate) idle_seconds: u64,
    /// Store sizes against `git gc --aggressive` (true) or plain `git gc`.
    pub(crate) aggressive: bool,
    pub(crate) dir: Option<PathBuf>,
    /// The daemon and client of the build to compare with, interleaved (`--before-daemon`,
    /// `--before-client`).
    pub(crate) before_daemon: Option<PathBuf>,
    pub(crate) before_client: Option<PathBuf>,
    /// Only the small-object compression section.
    pub(crate) deflate_only: bool,
}

/// The `ckpt` binary whose processes are timed (`--client`).
pub(crate) static CLIENT: OnceLock<PathBuf> = OnceLock::new();

pub(crate) fn client_path() -> &'static Path {
    CLIENT.get_or_init(|| PathBuf::from(env!("CARGO_BIN_EXE_ckpt")))
}

/// The `ckptd` binary run (`--daemon`; this build's by default).
pub(crate) static DAEMON: OnceLock<PathBuf> = OnceLock::new();

pub(crate) fn daemon_path() -> &'static Path {
    DAEMON.get_or_init(|| PathBuf::from(env!("CARGO_BIN_EXE_ckptd")))
}

pub(crate) fn client() -> Command {
    Command::new(client_path())
}

pub(crate) struct Row {
    pub(crate) name: &'static str,
    pub(crate) ours: Duration,
    pub(crate) theirs: Duration,
}

impl Row {
    pub(crate) fn new(name: &'static str, ours: Vec<Duration>, theirs: Vec<Duration>) -> Row {
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

pub(crate) fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The 90th and 99th percentiles and the maximum.
pub(crate) fn tail(v: &[Duration]) -> (Duration, Duration, Duration) {
    let mut v = v.to_vec();
    v.sort();
    (v[v.len() * 9 / 10], v[v.len() * 99 / 100], v[v.len() - 1])
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Times `f` after the kernel wrote back every dirty page (`sync`, untimed): each case pays for
/// its own writes, not for the writeback the case before it (often the baseline's rewrite of its
/// 10 MB index) left in flight. The case under load keeps its writer's backlog: it uses [`time`].
pub(crate) fn time_settled<T>(f: impl FnOnce() -> T) -> Duration {
    rustix::fs::sync();
    time(f)
}

pub(crate) fn time<T>(f: impl FnOnce() -> T) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

/// ~2 KiB of text that differs per file (so blobs do not deduplicate).
/// Claude Code's `UserPromptSubmit` input for prompt `id` in `root`.
pub(crate) fn prompt_payload(root: &Path, id: &str) -> String {
    json!({ "session_id": "bench-session", "cwd": root, "prompt_id": id,
        "hook_event_name": "UserPromptSubmit", "prompt": format!("prompt {id}") })
    .to_string()
}

/// Runs `ckpt hook claude-code` with `payload` on stdin, as Claude Code does; it must record.
pub(crate) fn hook(socket: &Path, payload: &str) {
    hook_with(client_path(), socket, payload)
}

/// [`hook`] with the client `program`.
pub(crate) fn hook_with(program: &Path, socket: &Path, payload: &str) {
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
pub(crate) static GAVE_UP: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

pub(crate) fn content(i: usize, round: usize) -> String {
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

pub(crate) fn generate(root: &Path, files: usize, ignored: usize) {
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
pub(crate) fn file_path(i: usize) -> String {
    format!("src/d{}/d{}/f{i}.rs", i / 1000, (i / 100) % 10)
}

/// Rewrites 10 files spread over the tree.
pub(crate) fn touch_ten(root: &Path, files: usize, round: usize) {
    touch(root, files, round, 10);
}

/// Rewrites `n` files spread over the tree (the same ones for the same `round`).
pub(crate) fn touch(root: &Path, files: usize, round: usize, n: usize) {
    for i in touched(files, round, n) {
        std::fs::write(root.join(file_path(i)), content(i, round)).unwrap();
    }
}

/// The files [`touch`] rewrites.
pub(crate) fn touched(files: usize, round: usize, n: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |k| (k * (files / n) + round * 7) % files)
}

pub(crate) fn git(shadow: &Path, root: &Path) -> Command {
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
pub(crate) fn shadow_snapshot(shadow: &Path, root: &Path) -> String {
    run(git(shadow, root).args(["add", "-A"]));
    output(git(shadow, root).arg("write-tree"))
}

pub(crate) fn run(cmd: &mut Command) {
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub(crate) fn output(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

pub(crate) fn du(path: &Path) -> u64 {
    let out = output(Command::new("du").args(["-sk"]).arg(path));
    out.split_whitespace()
        .next()
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

pub(crate) struct Daemon {
    pub(crate) child: Child,
    pub(crate) socket: PathBuf,
}

/// A connection that is opened again after it sat idle for a minute: the daemon closes
/// connections idle for two, and shadow git's turn can take longer than that at a million
/// files. (The reconnect, ~0.2 ms, then counts in the call after such a turn.)
pub(crate) struct Client {
    pub(crate) conn: Connection,
    pub(crate) socket: PathBuf,
    pub(crate) used: Instant,
}

impl Client {
    pub(crate) fn call_value(
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
    pub(crate) fn command(dir: &Path, program: &Path) -> Command {
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
    pub(crate) fn start_activated(dir: &Path) -> Daemon {
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

    pub(crate) fn start(dir: &Path) -> Daemon {
        Daemon::start_with(dir, daemon_path())
    }

    /// The daemon `program` with its environment under `dir`, once it answers.
    pub(crate) fn start_with(dir: &Path, program: &Path) -> Daemon {
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

    pub(crate) fn connect(&self) -> Client {
        Client {
            conn: Connection::connect(&self.socket).expect("connect"),
            socket: self.socket.clone(),
            used: Instant::now(),
        }
    }

    /// Prints the peak resident memory so far, as a comment line: where the session's peak
    /// comes from.
    pub(crate) fn note_peak(&self, case: &str) {
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
    pub(crate) fn peak_rss_kib(&self) -> u64 {
        self.status_kib("VmHWM:")
    }

    /// Resident memory now, in KiB.
    pub(crate) fn rss_kib(&self) -> u64 {
        self.status_kib("VmRSS:")
    }

    /// A `/proc/PID/status` figure in KiB (0 when unreadable).
    pub(crate) fn status_kib(&self, key: &str) -> u64 {
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
    pub(crate) fn cpu_seconds(&self) -> f64 {
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

    pub(crate) fn stop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}
