//! Confidentiality and takeover: stores private to the user, a socket folder nobody else can
//! swap, a client that talks only to a daemon of its own user, edits and exports that never
//! reach into `.git` or write through a symlink.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::harness::*;

const NOBODY: &str = "65534";

/// Runs `args` as uid/gid 65534 with an environment that lets git read any repository.
fn as_nobody(env: &TestEnv, args: &[&str]) -> std::process::Output {
    let config = env.home.join("nobody.gitconfig");
    std::fs::write(&config, "[safe]\n\tdirectory = *\n").unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    Command::new("setpriv")
        .args(["--reuid", NOBODY, "--regid", NOBODY, "--clear-groups", "--"])
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/")
        .env("GIT_CONFIG_GLOBAL", &config)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap()
}

/// Every file and folder below `dir` whose mode lets others in.
fn loose_modes(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let meta = std::fs::symlink_metadata(&p).unwrap();
        if meta.mode() & 0o077 != 0 && !meta.file_type().is_symlink() {
            found.push(format!("{:o} {}", meta.mode() & 0o777, p.display()));
        }
        if meta.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
        }
    }
    found
}

#[test]
fn stores_are_private_and_old_installs_are_tightened() {
    if !is_root() {
        eprintln!("skipped: needs root to act as another user");
        return;
    }
    let mut env = TestEnv::new();
    // A home others may enter, as on most machines.
    std::fs::set_permissions(env.tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    write(&env.proj(), "secret.txt", "the user's secret\n");
    chmod(&env.proj(), "secret.txt", 0o600);
    // Enough files that even the old layout wrote them as a pack (which it left 0444).
    for i in 0..300 {
        write(&env.proj(), &format!("many/f{i}.txt"), &format!("{i}\n"));
    }
    env.watch();
    let id = env.checkpoint("first");
    let store = env.store();
    assert_eq!(loose_modes(&env.data_dir()), Vec::<String>::new());
    let spec = format!("{id}:secret.txt");
    let git_dir = store.to_str().unwrap();
    let out = as_nobody(&env, &["git", "--git-dir", git_dir, "show", &spec]);
    assert!(
        !out.status.success(),
        "another user read the store: {}",
        stdout(&out)
    );

    // An install from before: everything readable by others. The next daemon tightens it.
    env.stop_daemon();
    let st = Command::new("chmod")
        .args(["-R", "go+rX"])
        .arg(env.data_dir())
        .status()
        .unwrap();
    assert!(st.success());
    assert!(
        as_nobody(&env, &["git", "--git-dir", git_dir, "show", &spec])
            .status
            .success()
    );
    env.start_daemon();
    write(&env.proj(), "b.txt", "b\n");
    env.checkpoint("second");
    assert_eq!(loose_modes(&env.data_dir()), Vec::<String>::new());
    let out = as_nobody(&env, &["git", "--git-dir", git_dir, "show", &spec]);
    assert!(
        !out.status.success(),
        "another user read the store: {}",
        stdout(&out)
    );
    env.fsck();
}

/// Starts ckptd and expects it to refuse to run; returns its stderr.
fn refused_start(env: &TestEnv) -> String {
    let mut cmd = Command::new(CKPTD);
    env.env(&mut cmd);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_timeout(&mut child, Duration::from_secs(20)).expect("ckptd kept running");
    assert!(!status.success());
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    err
}

#[test]
fn the_socket_folder_must_be_ours_and_private() {
    let mut env = TestEnv::without_daemon("");
    let dir = env.socket.parent().unwrap().to_path_buf();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    env.start_daemon();
    let mode = std::fs::metadata(&dir).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o700, "a loose socket folder of ours is tightened");
    env.stop_daemon();

    if is_root() {
        let st = Command::new("chown")
            .args([NOBODY, dir.to_str().unwrap()])
            .status()
            .unwrap();
        assert!(st.success());
        let err = refused_start(&env);
        assert!(err.contains("belongs to uid 65534"), "{err}");
        let st = Command::new("chown")
            .args(["0", dir.to_str().unwrap()])
            .status()
            .unwrap();
        assert!(st.success());
    }

    // Only a socket nobody answers on may be replaced: a regular file stays.
    std::fs::write(&env.socket, "someone's file").unwrap();
    let err = refused_start(&env);
    assert!(err.contains("other than a socket"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&env.socket).unwrap(),
        "someone's file"
    );
}

#[test]
fn the_client_talks_only_to_a_daemon_of_its_own_user() {
    if !is_root() {
        eprintln!("skipped: needs root to act as another user");
        return;
    }
    let env = TestEnv::without_daemon("");
    let dir = env.home.join("shared");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(env.tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let socket = dir.join("impostor.sock");
    let server = format!(
        r#"import socket
s = socket.socket(socket.AF_UNIX)
s.bind({:?})
s.listen(1)
print("ready", flush=True)
c, _ = s.accept()
try:
    c.recv(65536)
    c.sendall(b'{{"jsonrpc":"2.0","id":1,"result":{{"protocol":1}}}}\n')
    c.recv(65536)
except OSError:
    pass
"#,
        socket.to_str().unwrap()
    );
    let mut impostor = Command::new("setpriv")
        .args(["--reuid", NOBODY, "--regid", NOBODY, "--clear-groups", "--"])
        .args(["/usr/bin/python3", "-c", &server])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(impostor.stdout.as_mut().unwrap()),
        &mut ready,
    )
    .unwrap();
    let out = env.ckpt(&["--socket", socket.to_str().unwrap(), "status"]);
    let _ = impostor.kill();
    let _ = impostor.wait();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("uid 65534"), "{}", stderr(&out));
}

#[test]
fn edits_never_reach_into_git() {
    let env = TestEnv::new();
    let proj = env.proj();
    write(&proj, ".git/config", "[core]\n");
    write(&proj, "a.txt", "a\n");
    env.watch();
    for path in [".git/config", ".GIT/hooks/pre-commit", "sub/.Git/x"] {
        let out = env.ckpt(&["edit", "begin", path]);
        assert_eq!(out.status.code(), Some(1), "{path}: {}", stdout(&out));
        assert!(
            stderr(&out).contains("unsafe path"),
            "{path}: {}",
            stderr(&out)
        );
    }
    let token = env.json(&["edit", "begin", "a.txt"])["token"]
        .as_str()
        .unwrap()
        .to_string();
    write(&proj, "a.txt", "changed\n");
    env.json(&["edit", "abort", &token]);
    assert_eq!(std::fs::read_to_string(proj.join("a.txt")).unwrap(), "a\n");
    assert_eq!(
        std::fs::read_to_string(proj.join(".git/config")).unwrap(),
        "[core]\n"
    );
    env.assert_serving();
}

#[test]
fn an_export_never_overwrites_or_writes_through_a_symlink() {
    let env = TestEnv::new();
    write(&env.proj(), "a.txt", "a\n");
    env.watch();
    let id = env.checkpoint("first");
    let existing = env.home.join("existing.bundle");
    std::fs::write(&existing, "keep me").unwrap();
    let out = env.ckpt(&["export", &id, "--bundle", existing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--force"), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "keep me");

    let victim = env.home.join("victim.txt");
    std::fs::write(&victim, "not a bundle").unwrap();
    let link = env.home.join("link.bundle");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let out = env.ckpt(&["export", &id, "--bundle", link.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    env.json(&["export", &id, "--bundle", link.to_str().unwrap(), "--force"]);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "not a bundle");
    assert!(!std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let heads = Command::new("git")
        .args(["bundle", "list-heads"])
        .arg(&link)
        .output()
        .unwrap();
    assert!(heads.status.success(), "{}", stderr(&heads));
    env.assert_serving();
}

/// The daemon's record in the data directory replaced by a symlink to someone's file: the link
/// is replaced, the file it points to is never written; a symlink where the lock file goes is
/// refused, with its path.
#[test]
fn the_pid_record_and_the_lock_are_never_written_through_a_symlink() {
    let mut env = TestEnv::without_daemon("");
    let data = env.data_dir();
    std::fs::create_dir_all(&data).unwrap();
    let precious = env.home.join("precious.txt");
    std::fs::write(&precious, "keep me\n").unwrap();
    std::os::unix::fs::symlink(&precious, data.join("ckptd.pid")).unwrap();
    env.start_daemon();
    env.assert_serving();
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep me\n");
    let record = data.join("ckptd.pid");
    assert!(std::fs::symlink_metadata(&record).unwrap().is_file());
    let pid = env.daemon.as_ref().unwrap().id().to_string();
    assert!(
        std::fs::read_to_string(&record).unwrap().starts_with(&pid),
        "the record names the daemon"
    );
    env.stop_daemon();
    let lock = data.join("ckptd.lock");
    std::fs::remove_file(&lock).unwrap();
    std::os::unix::fs::symlink(&precious, &lock).unwrap();
    let err = refused_start(&env);
    assert!(err.contains(&data.display().to_string()), "{err}");
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep me\n");
}
