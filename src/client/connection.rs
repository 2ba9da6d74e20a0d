//! [`Connection`]: the line protocol over the local socket, typed ([`Connection::call`] takes a
//! method's params and returns its result), and starting a daemon in the background when none
//! answers.

use super::error::ClientError;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use interprocess::local_socket::traits::{Stream as _, StreamCommon as _};
use interprocess::local_socket::{GenericFilePath, Stream, ToFsName};
use serde_json::Value;

use crate::protocol::methods::HelloParams;
use crate::protocol::rpc;
use crate::protocol::rpc::Method;
use crate::protocol::{request_line, RpcError, PROTOCOL_VERSION};

/// How long a daemon has to answer `hello` before the client gives up on it.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// One connection to the daemon.
pub struct Connection {
    stream: BufReader<Stream>,
    next_id: u64,
    socket: PathBuf,
    /// The id of the `hello` sent and not answered yet (see [`Connection::connect_pipelined`]).
    hello: Option<u64>,
}

impl Connection {
    /// Connects to the daemon at `socket`, and checks that it speaks this client's protocol.
    pub fn connect(socket: &Path) -> Result<Connection, ClientError> {
        let mut conn = Self::connect_pipelined(socket)?;
        while conn.hello.is_some() {
            let reply = conn.read_reply()?;
            if reply.get("id").and_then(Value::as_u64) == conn.hello {
                conn.check_hello(&reply)?;
            } else if let Some(err) = reply.get("error") {
                // The daemon refuses the connection (it is closed next).
                return Err(rpc_error(err));
            }
        }
        Ok(conn)
    }

    /// Connects and sends `hello` without waiting for its answer: the first call checks it
    /// (before returning its own result), so a prompt's checkpoint costs one round trip, not
    /// two. Only for requests that change nothing a daemon of another protocol could misread
    /// into harm (a checkpoint): the request reaches the daemon before its protocol is known.
    pub fn connect_pipelined(socket: &Path) -> Result<Connection, ClientError> {
        let name = socket
            .to_fs_name::<GenericFilePath>()
            .map_err(|e| ClientError::NoDaemon {
                socket: socket.to_path_buf(),
                detail: Some(e.to_string()),
            })?;
        let stream = Stream::connect(name).map_err(|e| ClientError::NoDaemon {
            socket: socket.to_path_buf(),
            detail: Some(e.to_string()),
        })?;
        // Whoever can put a socket there must not receive our requests.
        let me = rustix::process::geteuid().as_raw();
        match stream.peer_creds().ok().and_then(|c| c.euid()) {
            Some(uid) if uid == me => {}
            other => {
                return Err(ClientError::Protocol(format!(
                    "the process serving {} runs as {}, not as this user (uid {me}); refusing to talk to it",
                    socket.display(),
                    other.map_or("an unknown user".to_string(), |u| format!("uid {u}"))
                )))
            }
        }
        // A daemon that accepts but never answers must not hang the client (or an agent's
        // hook): the handshake has a bound; later requests may take long (a first checkpoint
        // of a big project), and progress is shown meanwhile.
        stream.set_recv_timeout(Some(HANDSHAKE_TIMEOUT))?;
        let mut conn = Connection {
            stream: BufReader::new(stream),
            next_id: 1,
            socket: socket.to_path_buf(),
            hello: None,
        };
        let hello = serde_json::json!(HelloParams {
            client: Some("ckpt".into()),
            protocol: Some(PROTOCOL_VERSION),
        });
        conn.hello = Some(conn.send(rpc::Hello::NAME, &hello)?);
        Ok(conn)
    }

    /// Connects, starting `ckptd` in the background first if nobody answers and `spawn` is set.
    /// When `socket` is only the default (not named by --socket or the configuration), the
    /// daemon recorded in the data directory is tried before a new one is started.
    pub fn connect_or_spawn(
        socket: &Path,
        spawn: bool,
        log_dir: &Path,
        default_socket: bool,
        pipelined: bool,
    ) -> Result<Connection, ClientError> {
        let connect = |socket: &Path| match pipelined {
            true => Self::connect_pipelined(socket),
            false => Self::connect(socket),
        };
        match connect(socket) {
            Ok(c) => Ok(c),
            // The daemon serving this data directory may listen elsewhere (it was started
            // where XDG_RUNTIME_DIR was set, this client runs where it is not): it says where.
            Err(ClientError::NoDaemon { .. })
                if default_socket && running_elsewhere(socket, log_dir).is_some() =>
            {
                let elsewhere = running_elsewhere(socket, log_dir).expect("checked just above");
                connect(&elsewhere)
            }
            Err(ClientError::NoDaemon { .. }) if spawn => {
                let log = log_dir.join("ckptd.log");
                let logged_before = std::fs::metadata(&log).map_or(0, |m| m.len());
                let mut child = spawn_daemon(socket, log_dir)?;
                let deadline = Instant::now() + Duration::from_secs(15);
                loop {
                    match connect(socket) {
                        Ok(c) => return Ok(c),
                        Err(ClientError::NoDaemon { detail, .. }) => {
                            if let Ok(Some(status)) = child.try_wait() {
                                // It may have lost a race to another daemon that now answers.
                                if let Ok(c) = connect(socket) {
                                    return Ok(c);
                                }
                                return Err(daemon_exited(&log, logged_before, status));
                            }
                            if Instant::now() > deadline {
                                return Err(ClientError::NoDaemon {
                                    socket: socket.to_path_buf(),
                                    detail,
                                });
                            }
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        Err(other) => return Err(other),
                    }
                }
            }
            Err(e) => Err(e),
        }
    }

    /// A handle that closes this connection from another thread: a read blocked on it (a
    /// subscription's [`Connection::next_notification`]) then ends, and the daemon sees the
    /// connection end.
    pub fn closer(&self) -> Result<Closer, ClientError> {
        use std::os::fd::AsFd;
        let fd = match self.stream.get_ref() {
            Stream::UdSocket(s) => s.as_fd().try_clone_to_owned()?,
        };
        Ok(Closer(fd))
    }

    /// Waits for the next notification and returns its params (None when the daemon closed
    /// the connection).
    pub fn next_notification(&mut self) -> Result<Option<Value>, ClientError> {
        loop {
            let mut line = String::new();
            if self.stream.read_line(&mut line)? == 0 {
                return Ok(None);
            }
            let message: Value =
                serde_json::from_str(&line).map_err(|e| ClientError::Protocol(e.to_string()))?;
            if message.get("id").is_none() {
                return Ok(Some(message.get("params").cloned().unwrap_or(Value::Null)));
            }
        }
    }

    /// Calls method `M` and decodes its result.
    pub fn call<M: Method>(&mut self, params: &M::Params) -> Result<M::Result, ClientError> {
        let params = serde_json::to_value(params)
            .map_err(|e| ClientError::Usage(format!("cannot encode the request: {e}")))?;
        let result = self.call_value(M::NAME, params)?;
        serde_json::from_value(result)
            .map_err(|e| ClientError::Protocol(format!("the daemon's `{}` result: {e}", M::NAME)))
    }

    /// Sends one request as JSON and waits for its reply (for tools that speak JSON only).
    pub fn call_value(&mut self, method: &str, params: Value) -> Result<Value, ClientError> {
        let id = self.send(method, &params)?;
        // The reply, and the answer to a `hello` sent with it if there was one: a daemon of
        // another protocol is reported as that, whatever it answered.
        let mut outcome = None;
        while outcome.is_none() || self.hello.is_some() {
            let reply = self.read_reply()?;
            let of = reply.get("id").and_then(Value::as_u64);
            if self.hello.is_some() && of == self.hello {
                self.check_hello(&reply)?;
            } else if let Some(err) = reply.get("error") {
                if of != Some(id) {
                    // About the connection, not a request (it is closed next).
                    return Err(rpc_error(err));
                }
                outcome = Some(Err(rpc_error(err)));
            } else if of == Some(id) {
                // Notifications and replies to other requests are skipped.
                outcome = Some(Ok(reply.get("result").cloned().unwrap_or(Value::Null)));
            }
        }
        outcome.unwrap_or(Ok(Value::Null))
    }

    /// Sends one request; returns its id.
    fn send(&mut self, method: &str, params: &Value) -> Result<u64, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        self.stream
            .get_mut()
            .write_all(&request_line(id, method, params))?;
        Ok(id)
    }

    /// The next message from the daemon. While `hello` is unanswered, a daemon silent for
    /// [`HANDSHAKE_TIMEOUT`] is unresponsive.
    fn read_reply(&mut self) -> Result<Value, ClientError> {
        let mut line = String::new();
        match self.stream.read_line(&mut line) {
            Ok(0) => Err(ClientError::Protocol(
                "the daemon closed the connection".into(),
            )),
            Ok(_) => serde_json::from_str(&line).map_err(|e| ClientError::Protocol(e.to_string())),
            Err(e)
                if self.hello.is_some()
                    && matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
            {
                Err(ClientError::Unresponsive {
                    socket: self.socket.clone(),
                    timeout: HANDSHAKE_TIMEOUT,
                })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Checks the answer to `hello` (and lifts the handshake's time bound).
    fn check_hello(&mut self, reply: &Value) -> Result<(), ClientError> {
        self.hello = None;
        if let Some(err) = reply.get("error") {
            return Err(rpc_error(err));
        }
        let result = reply.get("result").cloned().unwrap_or(Value::Null);
        let hello: <rpc::Hello as Method>::Result = serde_json::from_value(result)
            .map_err(|e| ClientError::Protocol(format!("the daemon's `hello` result: {e}")))?;
        if hello.protocol != PROTOCOL_VERSION {
            return Err(ClientError::Protocol(format!(
                "daemon speaks protocol {}, this client {PROTOCOL_VERSION}; restart ckptd",
                hello.protocol
            )));
        }
        self.stream.get_ref().set_recv_timeout(None)?;
        Ok(())
    }
}

/// Closes a [`Connection`] from elsewhere (see [`Connection::closer`]); dropping it does too.
pub struct Closer(std::os::fd::OwnedFd);

impl Drop for Closer {
    fn drop(&mut self) {
        let _ = rustix::net::shutdown(&self.0, rustix::net::Shutdown::Both);
    }
}

/// Why the ckptd a client started exited: what it wrote to its log (from `from` on), so the
/// cause is said where the command was run; a configuration it refused is a configuration
/// error (exit 78).
fn daemon_exited(log: &Path, from: u64, status: std::process::ExitStatus) -> ClientError {
    let written = crate::fs::read_small(log, 16 << 20).unwrap_or_default();
    let text = String::from_utf8_lossy(written.get(from as usize..).unwrap_or_default());
    let said: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && *l != "Caused by:")
        .collect();
    let cause = said[said.len().saturating_sub(4)..].join("; ");
    let message = format!(
        "the ckptd started for this command exited ({status}){}; its log: {}",
        match cause.is_empty() {
            true => String::new(),
            false => format!(": {cause}"),
        },
        log.display()
    );
    match text.contains("loading configuration") {
        true => ClientError::Config(message),
        false => ClientError::Other(message),
    }
}

/// A reply's `error` member as the client's error.
pub(crate) fn rpc_error(err: &Value) -> ClientError {
    match serde_json::from_value::<RpcError>(err.clone()) {
        Ok(err) => err.into(),
        Err(e) => ClientError::Protocol(e.to_string()),
    }
}

/// The socket of the daemon that holds `data_dir`'s lock, when it is not `socket` and something
/// answers there.
fn running_elsewhere(socket: &Path, data_dir: &Path) -> Option<PathBuf> {
    let record = crate::fs::read_small(&data_dir.join(crate::protocol::endpoint::PID_FILE), 4096)?;
    let record = String::from_utf8(record).ok()?;
    let other = PathBuf::from(record.lines().nth(1)?);
    (other != socket && crate::protocol::endpoint::is_answering(&other)).then_some(other)
}

fn spawn_daemon(socket: &Path, log_dir: &Path) -> Result<std::process::Child, ClientError> {
    use std::os::unix::process::CommandExt;
    let beside = std::env::current_exe()
        .ok()
        .map(|e| e.with_file_name("ckptd"))
        .filter(|p| p.exists());
    let program = beside.unwrap_or_else(|| PathBuf::from("ckptd"));
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(log_dir)?;
    }
    let log = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(log_dir.join("ckptd.log"))?
    };
    let mut cmd = std::process::Command::new(&program);
    // As the systemd units set it (see ckptd.service), unless the user chose otherwise.
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        cmd.env("MALLOC_ARENA_MAX", "2");
    }
    let child = cmd
        .arg("--socket")
        .arg(socket)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        // Its own process group: a Ctrl-C aimed at the client must not stop the daemon.
        .process_group(0)
        .spawn()
        .map_err(|e| ClientError::NoDaemon {
            socket: socket.to_path_buf(),
            detail: Some(format!("cannot start {}: {e}", program.display())),
        })?;
    Ok(child)
}
