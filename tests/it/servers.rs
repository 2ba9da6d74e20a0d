//! Real git servers on loopback for the sharing tests: `git daemon` with receive-pack enabled
//! (git://), Debian's openssh-server on a free port with throwaway keys (ssh), and a server
//! that accepts connections and never answers.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_for_port(port: u16, child: &mut Child, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited: {status}");
        }
        assert!(Instant::now() < deadline, "{what} did not listen on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A bare repository at `dir/name`, with no user or system configuration.
pub fn bare_repo(dir: &Path, name: &str) -> PathBuf {
    let repo = dir.join(name);
    let out = Command::new("git")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .args(["init", "-q", "--bare"])
        .arg(&repo)
        .output()
        .unwrap();
    assert!(out.status.success());
    repo
}

/// `git daemon` serving the bare repositories under `base`, pushes allowed.
pub struct GitDaemon {
    child: Child,
    pub port: u16,
}

impl GitDaemon {
    pub fn start(base: &Path) -> GitDaemon {
        let port = free_port();
        // git-daemon itself (`git daemon` runs it as a child, which a kill would leave behind).
        let exec_path = Command::new("git")
            .arg("--exec-path")
            .output()
            .unwrap()
            .stdout;
        let exec_path = String::from_utf8(exec_path).unwrap();
        let mut child = Command::new(Path::new(exec_path.trim()).join("git-daemon"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", base)
            .arg("--reuseaddr")
            .arg("--export-all")
            .arg("--enable=receive-pack")
            .arg("--listen=127.0.0.1")
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", base.display()))
            .arg(base)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("git daemon");
        wait_for_port(port, &mut child, "git daemon");
        GitDaemon { child, port }
    }

    pub fn url(&self, name: &str) -> String {
        format!("git://127.0.0.1:{}/{name}", self.port)
    }

    /// SIGKILL, as a crashed server.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Debian's sshd on a free loopback port, letting the current user in with a throwaway key.
pub struct Sshd {
    child: Child,
    pub port: u16,
    /// The `GIT_SSH_COMMAND` that logs in with the key.
    pub ssh_command: String,
}

impl Sshd {
    /// None when sshd is not installed (`.ci/run` installs openssh-server).
    pub fn start(dir: &Path) -> Option<Sshd> {
        let sshd = Path::new("/usr/sbin/sshd");
        if !sshd.exists() {
            eprintln!("skipped: /usr/sbin/sshd is not installed");
            return None;
        }
        let dir = dir.join("sshd");
        std::fs::create_dir_all(&dir).unwrap();
        for key in ["host_key", "client_key"] {
            let out = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(dir.join(key))
                .output()
                .unwrap();
            assert!(out.status.success());
        }
        std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys")).unwrap();
        let port = free_port();
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nAuthorizedKeysFile \
             {d}/authorized_keys\nPidFile {d}/sshd.pid\nStrictModes no\nUsePAM no\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin yes\n\
             AllowTcpForwarding no\nX11Forwarding no\n",
            d = dir.display()
        );
        std::fs::write(dir.join("sshd_config"), config).unwrap();
        // sshd wants its privilege separation folder.
        let _ = std::fs::create_dir_all("/run/sshd");
        let mut child = Command::new(sshd)
            .args(["-D", "-e", "-f"])
            .arg(dir.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("sshd.log")).unwrap())
            .spawn()
            .expect("sshd");
        wait_for_port(port, &mut child, "sshd");
        let ssh_command = format!(
            "ssh -i {} -o IdentitiesOnly=yes -o StrictHostKeyChecking=no -o \
             UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes",
            dir.join("client_key").display()
        );
        Some(Sshd {
            child,
            port,
            ssh_command,
        })
    }

    pub fn url(&self, repo: &Path) -> String {
        let user =
            String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
        format!(
            "ssh://{}@127.0.0.1:{}{}",
            user.trim(),
            self.port,
            repo.display()
        )
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Accepts connections and never answers (a hung server); stops with the test.
pub struct Silent {
    pub port: u16,
    _listener: TcpListener,
}

impl Silent {
    pub fn start() -> Silent {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepting = listener.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in accepting.incoming().flatten() {
                held.push(stream);
            }
        });
        Silent {
            port,
            _listener: listener,
        }
    }
}

/// A git:// server that answers a fetch with an advertisement and then only progress, a line
/// every half second, forever (never the pack): a remote that trickles.
pub struct Trickle {
    pub port: u16,
    child: Child,
}

impl Trickle {
    pub fn start() -> Trickle {
        let program = r#"
import socket, sys, threading, time
def pkt(data):
    return b"%04x" % (len(data) + 4) + data
def serve(c):
    try:
        c.recv(65536)
        ref = b"1" * 40 + b" refs/ckpt/someone/dialogs/d\0side-band-64k multi_ack\n"
        c.sendall(pkt(ref) + b"0000")
        c.recv(65536)
        c.sendall(pkt(b"NAK\n"))
        n = 0
        while True:
            n += 1
            c.sendall(pkt(b"\x02Counting objects: %d\r" % n))
            time.sleep(0.5)
    except OSError:
        pass
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;
        let mut child = Command::new("python3")
            .args(["-c", program])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        Trickle {
            port: line.trim().parse().unwrap(),
            child,
        }
    }

    pub fn url(&self) -> String {
        format!("git://127.0.0.1:{}/team.git", self.port)
    }
}

impl Drop for Trickle {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
