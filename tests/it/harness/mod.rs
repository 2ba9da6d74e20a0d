//! A real `ckptd` on a real socket in temp dirs, driven by the real `ckpt` binary, with the
//! store checked by the real `git`. The environment is cleared so the user's git config,
//! XDG dirs and any running daemon never leak in.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod fs;
mod git;
mod hooks;
mod rpc;

pub use fs::*;
pub use git::*;
pub use hooks::*;
pub use rpc::*;

pub const CKPTD: &str = env!("CARGO_BIN_EXE_ckptd");
/// The client the tests run: the one `cargo test` builds, or the executable named by
/// `CKPT_TEST_CLIENT` (CI passes the packages' static client from `packaging/build.sh`, so the
/// binary users install passes the same tests).
pub fn ckpt_bin() -> &'static str {
    static CLIENT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CLIENT.get_or_init(|| {
        std::env::var("CKPT_TEST_CLIENT").unwrap_or_else(|_| env!("CARGO_BIN_EXE_ckpt").into())
    })
}

pub struct TestEnv {
    pub tmp: tempfile::TempDir,
    pub home: PathBuf,
    pub socket: PathBuf,
    pub daemon: Option<Child>,
}

impl TestEnv {
    /// A fresh environment with a running daemon and an empty project dir `proj`.
    pub fn new() -> TestEnv {
        Self::with_config("")
    }

    /// Like `new`, with `config` as the daemon's config.toml.
    pub fn with_config(config: &str) -> TestEnv {
        let env = Self::without_daemon(config);
        let mut env = env;
        env.start_daemon();
        env
    }

    pub fn without_daemon(config: &str) -> TestEnv {
        let tmp = tempfile::Builder::new()
            .prefix("ckpt-it-")
            .tempdir()
            .expect("tempdir");
        let home = tmp.path().to_path_buf();
        for d in ["home", "data", "config/ckpt", "run", "proj"] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        std::fs::set_permissions(home.join("run"), std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::write(home.join("config/ckpt/config.toml"), config).unwrap();
        let socket = home.join("run/ckpt/ckptd.sock");
        TestEnv {
            tmp,
            home,
            socket,
            daemon: None,
        }
    }

    pub fn proj(&self) -> PathBuf {
        self.home.join("proj")
    }

    pub fn data_dir(&self) -> PathBuf {
        self.home.join("data/ckpt")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.home.join("ckptd.log")).unwrap_or_default()
    }

    /// Applies the test environment (cleared, with temp HOME and XDG dirs) to `cmd`.
    pub fn env(&self, cmd: &mut Command) {
        env_for(&self.home, cmd);
    }

    pub fn start_daemon(&mut self) {
        self.start_daemon_under(&[]);
    }

    /// Starts ckptd under `strace -f -qq -y -e trace=CALLS` and returns the file the calls
    /// are written to; None (the caller skips its test) when `strace` is not installed
    /// (`.ci/run` installs it).
    pub fn start_daemon_traced(&mut self, calls: &str) -> Option<PathBuf> {
        if Command::new("strace").arg("-V").output().is_err() {
            eprintln!("skipped: strace is not installed");
            return None;
        }
        let trace = self.home.join("strace.txt");
        let trace_arg = trace.to_str().unwrap().to_string();
        let calls = format!("trace={calls}");
        self.start_daemon_under(&["strace", "-f", "-qq", "-y", "-e", &calls, "-o", &trace_arg]);
        Some(trace)
    }

    /// Starts ckptd as the last argument of `wrapper` (e.g. `strace -o FILE`), or alone.
    pub fn start_daemon_under(&mut self, wrapper: &[&str]) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.home.join("ckptd.log"))
            .unwrap();
        let mut cmd = match wrapper.split_first() {
            Some((program, args)) => {
                let mut cmd = Command::new(program);
                cmd.args(args).arg(CKPTD);
                cmd
            }
            None => Command::new(CKPTD),
        };
        self.env(&mut cmd);
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(log);
        let child = cmd.spawn().expect("start ckptd");
        self.daemon = Some(child);
        self.wait_for_socket();
    }

    pub fn wait_for_socket(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while UnixStream::connect(&self.socket).is_err() {
            assert!(
                Instant::now() < deadline,
                "ckptd did not come up; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGTERM and waits for the daemon to exit.
    pub fn stop_daemon(&mut self) -> std::process::ExitStatus {
        let mut child = self.daemon.take().expect("daemon running");
        signal(child.id(), "TERM");
        wait_timeout(&mut child, Duration::from_secs(20)).expect("ckptd did not stop on SIGTERM")
    }

    pub fn kill_daemon(&mut self) {
        if let Some(mut child) = self.daemon.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Runs `ckpt ARGS` in `cwd` with `--no-spawn` and the test socket.
    pub fn ckpt_in(&self, cwd: &Path, args: &[&str]) -> Output {
        let mut cmd = Command::new(ckpt_bin());
        self.env(&mut cmd);
        cmd.current_dir(cwd)
            .arg("--no-spawn")
            .args(args)
            .stdin(Stdio::null());
        cmd.output().expect("run ckpt")
    }

    pub fn ckpt(&self, args: &[&str]) -> Output {
        self.ckpt_in(&self.proj(), args)
    }

    /// Runs `ckpt ARGS --json`, asserts success, and parses stdout.
    pub fn json(&self, args: &[&str]) -> Value {
        self.json_in(&self.proj(), args)
    }

    /// Like [`TestEnv::json`], run in `cwd` (another project, say).
    pub fn json_in(&self, cwd: &Path, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.ckpt_in(cwd, &all);
        assert!(
            out.status.success(),
            "ckpt {args:?} failed: {}\n{}\nlog:\n{}",
            stderr(&out),
            stdout(&out),
            self.log()
        );
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("ckpt {args:?}: bad JSON ({e}): {}", stdout(&out)))
    }

    pub fn watch(&self) -> Value {
        self.json(&["watch"])
    }

    /// Records a checkpoint and returns its full id.
    pub fn checkpoint(&self, label: &str) -> String {
        self.json(&["checkpoint", "-m", label])["id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    pub fn store(&self) -> PathBuf {
        let projects = self.json(&["projects"]);
        PathBuf::from(projects[0]["store"].as_str().unwrap())
    }

    /// The store of the project at `root`.
    pub fn store_of(&self, root: &Path) -> PathBuf {
        let projects = self.json(&["projects"]);
        let p = projects
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["root"].as_str() == Some(root.to_str().unwrap()))
            .unwrap_or_else(|| panic!("no project {}: {projects}", root.display()));
        PathBuf::from(p["store"].as_str().unwrap())
    }

    /// `git --git-dir STORE ARGS`, asserting success.
    pub fn git(&self, args: &[&str]) -> String {
        git_in(&self.store(), args)
    }

    /// `git fsck --strict` of the store. A burst of checkpoints makes the daemon merge its
    /// small packs right after a reply; git listing the pack folder meanwhile can meet a pack
    /// the merge has just removed ("index not opened"): that is tried again, a few times,
    /// while a damaged store fails every time.
    pub fn fsck(&self) {
        let args = ["fsck", "--strict", "--no-progress"];
        for _ in 0..5 {
            let out = Command::new("git")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("HOME", self.store())
                .arg("--git-dir")
                .arg(self.store())
                .args(args)
                .output()
                .expect("run git");
            let raced = !out.status.success() && stderr(&out).contains("index not opened");
            if !raced {
                break;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        self.git(&args);
    }

    /// The paths `git ls-tree -r` lists for a checkpoint.
    pub fn ls_tree(&self, id: &str) -> Vec<String> {
        self.git(&["ls-tree", "-r", "--name-only", "-z", id])
            .split('\0')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    }

    /// One JSON-RPC exchange per line over a raw socket connection; returns the replies.
    pub fn raw(&self, lines: &[&[u8]]) -> Vec<Value> {
        let stream = UnixStream::connect(&self.socket).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut writer = stream.try_clone().unwrap();
        let mut reader = BufReader::new(stream);
        let mut replies = Vec::new();
        for line in lines {
            writer.write_all(line).unwrap();
            writer.write_all(b"\n").unwrap();
            let mut reply = String::new();
            reader.read_line(&mut reply).unwrap();
            replies.push(serde_json::from_str(&reply).unwrap_or(Value::Null));
        }
        replies
    }

    /// Kills a daemon a client started in the background for this environment (recorded in
    /// its data directory), so that no test leaves a `ckptd` behind.
    pub fn kill_spawned_daemon(&self) {
        let Ok(record) = std::fs::read_to_string(self.data_dir().join("ckptd.pid")) else {
            return;
        };
        let Some(pid) = record.lines().next().and_then(|l| l.parse::<u32>().ok()) else {
            return;
        };
        let ours = std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
            let home = format!("HOME={}", self.home.join("home").display());
            env.split(|b| *b == 0).any(|v| v == home.as_bytes())
        });
        if ours {
            let _ = Command::new("kill")
                .arg("-KILL")
                .arg(pid.to_string())
                .status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while std::path::Path::new(&format!("/proc/{pid}")).exists()
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    /// Asserts the daemon still answers `hello`.
    pub fn assert_serving(&self) {
        let reply = &self.raw(&[br#"{"jsonrpc":"2.0","id":99,"method":"hello"}"#])[0];
        assert_eq!(
            reply["result"]["protocol"], 1,
            "daemon stopped serving: {reply}"
        );
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        self.kill_daemon();
        self.kill_spawned_daemon();
        // Undo any `chattr +i` a test left, so the temp dir can be removed.
        let _ = Command::new("chattr")
            .args(["-R", "-i"])
            .arg(self.tmp.path())
            .stderr(Stdio::null())
            .status();
    }
}

/// The environment of the test whose temporary root is `home`, applied to `cmd` (for threads
/// that outlive a borrow of the [`TestEnv`]).
pub fn env_for(home: &Path, cmd: &mut Command) {
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.join("home"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_RUNTIME_DIR", home.join("run"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("RUST_LOG", "ckpt=debug,info");
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

pub fn wait_timeout(child: &mut Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// True when running as root, where permission bits do not stop writes.
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| stdout(&o).trim() == "0")
        .unwrap_or(false)
}

/// Makes `dir` unwritable even for root (`chattr +i` as root, mode 0555 otherwise).
pub fn make_unwritable(dir: &Path) {
    if is_root() {
        let st = Command::new("chattr").arg("+i").arg(dir).status().unwrap();
        assert!(
            st.success(),
            "chattr +i failed; the filesystem must support it for this test"
        );
    } else {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).unwrap();
    }
}

pub fn make_writable(dir: &Path) {
    if is_root() {
        let _ = Command::new("chattr").arg("-i").arg(dir).status();
    } else {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}
