//! Which user a TCP connection to the page comes from. Every local user can connect to
//! 127.0.0.1, so the page serves only connections whose other end belongs to this user, as the
//! daemon's socket does (there, the kernel says who the peer is; on TCP it is asked).
//!
//! The kernel is asked for the peer's socket with `sock_diag` (netlink, one exact lookup, what
//! `ss` uses); where netlink is not allowed, `/proc/net/tcp` is read instead. A connection
//! whose owner neither can tell is refused.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};

/// `SOCK_DIAG_BY_FAMILY`, the request and answer of an `inet_diag` lookup.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `NLMSG_ERROR`: the kernel's answer when it found nothing (or refused).
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const IPPROTO_TCP: u8 = 6;
/// Where `idiag_uid` is in the answer: after the netlink header (16 bytes) and the
/// `inet_diag_msg` fields before it (4 + 48 + 12).
const UID_AT: usize = 16 + 4 + 48 + 12;

/// The uid owning the other end of a connection from `peer` to `local` (both on this host).
pub fn owner(local: SocketAddr, peer: SocketAddr) -> io::Result<u32> {
    let (SocketAddr::V4(local), SocketAddr::V4(peer)) = (local, peer) else {
        return Err(io::Error::other("the page listens on IPv4 only"));
    };
    match sock_diag(local, peer) {
        Ok(uid) => Ok(uid),
        Err(diag) => proc_net_tcp(local, peer).map_err(|proc| {
            io::Error::other(format!(
                "cannot tell which user a connection comes from (sock_diag: {diag}; \
                 /proc/net/tcp: {proc})"
            ))
        }),
    }
}

/// Asks the kernel for the socket at `peer` connected to `local` (its own end of the
/// connection) and returns its owner.
fn sock_diag(local: SocketAddrV4, peer: SocketAddrV4) -> io::Result<u32> {
    let fd = rustix::net::socket_with(
        AddressFamily::NETLINK,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        Some(rustix::net::netlink::SOCK_DIAG),
    )?;
    rustix::net::sockopt::set_socket_timeout(
        &fd,
        rustix::net::sockopt::Timeout::Recv,
        Some(std::time::Duration::from_secs(1)),
    )?;
    rustix::net::send(&fd, &request(local, peer), SendFlags::empty())?;
    let mut answer = [0u8; 512];
    let (_, n) = rustix::net::recv(&fd, &mut answer[..], RecvFlags::empty())?;
    parse_answer(&answer[..n])
}

/// An `inet_diag_req_v2` for one TCP socket: the one whose own address is `peer` and whose
/// other end is `local` (addresses and ports in network order, the header in the host's).
fn request(local: SocketAddrV4, peer: SocketAddrV4) -> Vec<u8> {
    let mut m = Vec::with_capacity(72);
    m.extend_from_slice(&72u32.to_ne_bytes()); // nlmsg_len
    m.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    m.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // nlmsg_seq
    m.extend_from_slice(&0u32.to_ne_bytes()); // nlmsg_pid: the kernel
    m.push(rustix::net::AddressFamily::INET.as_raw() as u8);
    m.push(IPPROTO_TCP);
    m.push(0); // idiag_ext
    m.push(0); // pad
    m.extend_from_slice(&u32::MAX.to_ne_bytes()); // idiag_states: any
    m.extend_from_slice(&peer.port().to_be_bytes()); // idiag_sport
    m.extend_from_slice(&local.port().to_be_bytes()); // idiag_dport
    for ip in [peer.ip(), local.ip()] {
        m.extend_from_slice(&ip.octets());
        m.extend_from_slice(&[0u8; 12]);
    }
    m.extend_from_slice(&0u32.to_ne_bytes()); // idiag_if
    m.extend_from_slice(&[0xff; 8]); // idiag_cookie: INET_DIAG_NOCOOKIE
    m
}

fn parse_answer(a: &[u8]) -> io::Result<u32> {
    let word = |at: usize| -> Option<[u8; 4]> { a.get(at..at + 4)?.try_into().ok() };
    let kind = a
        .get(4..6)
        .map(|b| u16::from_ne_bytes([b[0], b[1]]))
        .ok_or_else(|| io::Error::other("a short answer"))?;
    match kind {
        SOCK_DIAG_BY_FAMILY => word(UID_AT)
            .map(u32::from_ne_bytes)
            .ok_or_else(|| io::Error::other("a short answer")),
        NLMSG_ERROR => {
            let errno = word(16).map_or(0, i32::from_ne_bytes);
            Err(io::Error::from_raw_os_error(-errno))
        }
        other => Err(io::Error::other(format!("an answer of type {other}"))),
    }
}

/// The same lookup in `/proc/net/tcp`: the line whose local address is `peer` and whose remote
/// one is `local`, and its `uid` column.
fn proc_net_tcp(local: SocketAddrV4, peer: SocketAddrV4) -> io::Result<u32> {
    let table = crate::fs::read_small(std::path::Path::new("/proc/net/tcp"), 64 << 20)
        .ok_or_else(|| io::Error::other("unreadable"))?;
    find_in_table(&String::from_utf8_lossy(&table), local, peer)
        .ok_or_else(|| io::Error::other("no such connection"))
}

/// `/proc/net/tcp` spells an address as the 32-bit number of its bytes in memory order, in
/// hex, then `:` and the port in hex.
fn spelled(a: SocketAddrV4) -> String {
    let ip = u32::from_ne_bytes(a.ip().octets());
    format!("{ip:08X}:{:04X}", a.port())
}

fn find_in_table(table: &str, local: SocketAddrV4, peer: SocketAddrV4) -> Option<u32> {
    let (ours, theirs) = (spelled(local), spelled(peer));
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.get(1) == Some(&theirs.as_str()) && fields.get(2) == Some(&ours.as_str()))
            .then(|| fields.get(7)?.parse().ok())?
    })
}

/// The address the page listens on.
pub const LOOPBACK: Ipv4Addr = Ipv4Addr::LOCALHOST;

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ways of asking name this process's user as the owner of a connection it made.
    #[test]
    fn a_connection_of_this_user_is_found_both_ways() {
        let listener = std::net::TcpListener::bind((LOOPBACK, 0)).unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, peer) = listener.accept().unwrap();
        let local = server.local_addr().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        let me = rustix::process::geteuid().as_raw();
        let (SocketAddr::V4(l), SocketAddr::V4(p)) = (local, peer) else {
            unreachable!()
        };
        assert_eq!(owner(local, peer).unwrap(), me);
        assert_eq!(proc_net_tcp(l, p).unwrap(), me);
        // sock_diag where the kernel allows netlink here.
        if let Ok(uid) = sock_diag(l, p) {
            assert_eq!(uid, me);
        }
        // A connection nobody has is found by neither.
        let nobody = SocketAddrV4::new(LOOPBACK, 1);
        assert!(owner(local, SocketAddr::V4(nobody)).is_err());
    }

    #[test]
    fn addresses_are_spelled_as_the_kernel_prints_them() {
        let a = SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 1), 0x1f90);
        assert_eq!(spelled(a), "0100007F:1F90");
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   \
                     0: 0100007F:C350 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1001        0 123 1\n";
        let peer = SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 1), 0xc350);
        assert_eq!(find_in_table(table, a, peer), Some(1001));
        assert_eq!(find_in_table(table, peer, a), None);
    }
}
