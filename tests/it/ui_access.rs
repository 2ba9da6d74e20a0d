//! Who reaches `ckpt ui`, attacked as another local user would: the token in a process's
//! arguments, connections from another uid, idle connections by the thousand, and page reloads
//! that must not use up the daemon's connections.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::harness::*;
use crate::ui::{project_query, Ui};

const NOBODY: &str = "65534";

/// Runs a Python program as uid 65534 (the caller checks it is root).
fn python_as_nobody(program: &str, args: &[&str]) -> Output {
    Command::new("setpriv")
        .args(["--reuid", NOBODY, "--regid", NOBODY, "--clear-groups", "--"])
        .args(["/usr/bin/python3", "-c", program])
        .args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap()
}

/// Every process's arguments that hold `needle`, as the user running this program sees them
/// (but this program's own, which hold it).
const SCAN: &str = r#"
import os, sys
needle = sys.argv[1].encode()
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) != os.getpid():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if needle in f.read():
                    print(pid)
        except OSError:
            pass
"#;

/// The browser is handed a private file, never the token: no process's arguments hold it
/// (another user reads every process's in /proc), the file is this user's alone and goes when
/// the page stops.
#[test]
fn the_browser_is_never_handed_the_token() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "f.txt", "one\n");
    env.watch();
    env.checkpoint("the secret plan");
    let bin = env.home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let opened = env.home.join("opened");
    // A stand-in browser that stays running, its arguments in /proc, while it is looked at.
    std::fs::write(
        bin.join("xdg-open"),
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > {}.tmp\nmv {0}.tmp {0}\nsleep 30\n",
            opened.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(bin.join("xdg-open"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut ui = Ui::start_with(&env, &p, &[], Some(&bin));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !opened.exists() {
        assert!(Instant::now() < deadline, "the stand-in browser never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    let handed = std::fs::read_to_string(&opened).unwrap();
    let page = Path::new(handed.trim());
    assert!(
        !handed.contains(&ui.token),
        "the browser's argument: {handed}"
    );
    assert!(page.is_absolute(), "{handed}");
    let meta = std::fs::metadata(page).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let redirect = std::fs::read_to_string(page).unwrap();
    assert!(redirect.contains(&ui.url), "{redirect}");

    let found = match is_root() {
        true => {
            let out = python_as_nobody(SCAN, &[&ui.token]);
            assert!(out.status.success(), "{}", stderr(&out));
            let read = python_as_nobody(
                "import sys; open(sys.argv[1]).read()",
                &[page.to_str().unwrap()],
            );
            assert!(!read.status.success(), "another user read the page's file");
            stdout(&out)
        }
        false => {
            let out = Command::new("python3")
                .args(["-c", SCAN, &ui.token])
                .output()
                .unwrap();
            stdout(&out)
        }
    };
    assert_eq!(found.trim(), "", "processes whose arguments hold the token");

    signal(ui.child.id(), "INT");
    wait_timeout(&mut ui.child, Duration::from_secs(5)).expect("ckpt ui stops on SIGINT");
    assert!(!page.exists(), "the page's file outlived ckpt ui");
}

/// Connections from another user are closed before anything is read, token or not; a
/// thousand of them, held open, do not keep this user from the page.
#[test]
fn another_users_connections_are_refused_and_never_crowd_the_page_out() {
    if !is_root() {
        eprintln!("skipped: needs root to act as another user");
        return;
    }
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "f.txt", "one\n");
    env.watch();
    env.checkpoint("the secret plan");
    let ui = Ui::start(&env, &p);
    let list = format!("/api/list?{}", project_query(&p));
    // With the token (as if it had leaked): no answer at all.
    let ask = r#"
import socket, sys
port, token, target = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.create_connection(("127.0.0.1", port))
s.settimeout(10)
s.sendall(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n".encode())
data = b""
try:
    while chunk := s.recv(65536):
        data += chunk
except OSError:
    pass
print(data.decode(errors="replace"))
"#;
    let out = python_as_nobody(ask, &[&ui.port.to_string(), &ui.token, &list]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stdout(&out).contains("secret plan"), "{}", stdout(&out));
    assert!(!stdout(&out).contains("HTTP/1.1"), "{}", stdout(&out));

    // 1,100 connections of another user, open and silent, while this user asks.
    let crowd = r#"
import resource, socket, sys, time
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
port = int(sys.argv[1])
held = []
for _ in range(1100):
    try:
        held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
    except OSError:
        pass
print(len(held), flush=True)
time.sleep(20)
"#;
    let mut crowd = Command::new("setpriv")
        .args(["--reuid", NOBODY, "--regid", NOBODY, "--clear-groups", "--"])
        .args(["/usr/bin/python3", "-c", crowd, &ui.port.to_string()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut count = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(crowd.stdout.as_mut().unwrap()),
        &mut count,
    )
    .unwrap();
    let started = Instant::now();
    let listed = ui.get(&list);
    let took = started.elapsed();
    let _ = crowd.kill();
    let _ = crowd.wait();
    assert!(count.trim().parse::<u32>().unwrap() > 1000, "{count}");
    assert_eq!(listed.status, 200, "{listed:?}");
    assert!(listed.body.contains("secret plan"));
    assert!(took < Duration::from_secs(5), "the page took {took:?}");
    env.assert_serving();
}

/// This user's idle connections (more than the page serves at once) make room for a request,
/// and a connection that never sends a request is closed within the header timeout.
#[test]
fn idle_connections_are_closed_and_make_room() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "f.txt", "one\n");
    env.watch();
    env.checkpoint("kept");
    let ui = Ui::start(&env, &p);
    let idle: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(("127.0.0.1", ui.port)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let list = format!("/api/list?{}", project_query(&p));
    let listed = ui.get(&list);
    assert_eq!(listed.status, 200, "{listed:?}");
    // The ones still open are closed by the header timeout (10 s).
    let mut last = idle.into_iter().last().unwrap();
    last.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 16];
    let n = last.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "an idle connection got an answer");
    assert!(started.elapsed() < Duration::from_secs(15));
}

/// Reloading the page (its event stream opened and dropped) hundreds of times never uses up
/// the daemon's connections: each stream's daemon connection closes with it, and a prompt's
/// hook still gets through.
#[test]
fn page_reloads_never_use_up_the_daemons_connections() {
    let env = TestEnv::new();
    let p = env.proj();
    write(&p, "f.txt", "one\n");
    env.watch();
    env.checkpoint("first");
    let ui = Ui::start(&env, &p);
    let daemon = env.daemon.as_ref().unwrap().id();
    let fds = || {
        std::fs::read_dir(format!("/proc/{daemon}/fd"))
            .unwrap()
            .count()
    };
    let before = fds();
    for _ in 0..300 {
        let mut stream = TcpStream::connect(("127.0.0.1", ui.port)).unwrap();
        write!(
            stream,
            "GET /api/events?{} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n{}\r\n",
            project_query(&p),
            ui.port,
            ui.auth()
        )
        .unwrap();
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).unwrap();
        assert_eq!(&head, b"HTTP/1.1 200");
    }
    write(&p, "f.txt", "two\n");
    let hook = serde_json::json!({"session_id": "s1", "cwd": p, "prompt": "after the reloads",
        "hook_event_name": "UserPromptSubmit"});
    let mut cmd = Command::new(ckpt_bin());
    env.env(&mut cmd);
    let mut child = cmd
        .current_dir(&p)
        .args(["hook", "claude-code"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(hook.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(stderr(&out), "", "the hook's complaint");
    let list = env.json(&["list"]);
    assert_eq!(list[0]["label"], "after the reloads", "{list}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while fds() > before + 20 {
        assert!(
            Instant::now() < deadline,
            "the daemon holds {} descriptors, {before} before the reloads",
            fds()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    env.assert_serving();
}
