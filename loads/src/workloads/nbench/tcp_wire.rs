//! tbench's wire: each loadfile operation becomes one request/response
//! exchange over loopback TCP, with the sizes Debian's tbench 4.0 sends
//! (measured per operation: [`MEASURED_TBENCH_4_0`]), and the server
//! only produces and consumes bytes, like `tbench_srv`. Owns the message
//! sizes, the bytes tbench counts, one client's connection, the accepting
//! server and the loopback interface check; timing and phases belong to
//! the driver.
//!
//! A request is `send` bytes: a 4-byte big-endian length (`send - 4`), a
//! 4-byte big-endian response length (`recv - 4`), then padding. The reply
//! is `recv` bytes: a 4-byte big-endian length (`recv - 4`) and padding. The
//! format is tbench's, so our client can talk to `tbench_srv` and Debian's
//! `tbench` to our server. Lengths are explicit big-endian on every arch.

use super::loadfile::{Line, Op, SmbPath};
use nix::sys::socket::{recv, send, MsgFlags};
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;

/// The exchange a tbench client makes once, right after connecting.
pub const SETUP_EXCHANGE: (u32, u32) = (8, 8);

/// Errors of the loopback interface check and of the wire.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The loopback interface is down and could not be brought up.
    #[error("network interface {iface}: cannot {what}")]
    Loopback {
        /// Interface name.
        iface: &'static str,
        /// What failed (`read its flags`, `bring it up`).
        what: &'static str,
        /// The errno.
        #[source]
        source: io::Error,
    },
    /// Connecting to the server failed.
    #[error("cannot connect to the tbench server at {addr}")]
    Connect {
        /// Server address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// Sending a request failed.
    #[error("line {line}: {op}: sending {bytes} bytes failed")]
    Send {
        /// Line number (0: the setup exchange).
        line: u32,
        /// Operation.
        op: &'static str,
        /// Request size.
        bytes: u32,
        /// The errno.
        #[source]
        source: nix::Error,
    },
    /// Receiving a reply failed or the server closed the connection.
    #[error("line {line}: {op}: receiving {bytes} bytes failed ({what})")]
    Recv {
        /// Line number.
        line: u32,
        /// Operation.
        op: &'static str,
        /// Reply size.
        bytes: u32,
        /// `connection closed` or the errno.
        what: String,
    },
    /// The reply's length field is not the length asked for.
    #[error("line {line}: {op}: lost sync with the server (asked for {want} bytes, reply says {got})")]
    LostSync {
        /// Line number.
        line: u32,
        /// Operation.
        op: &'static str,
        /// Requested reply length.
        want: u32,
        /// Length the reply announced.
        got: u32,
    },
    /// The server could not listen or accept.
    #[error("tbench server: cannot {what}")]
    Server {
        /// What failed.
        what: &'static str,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
}

fn path_len(path: &SmbPath, client: &str) -> u32 {
    // tbench sends the client's path with its leading '/'.
    u32::try_from(1 + path.rendered_len(client)).unwrap_or(u32::MAX)
}

/// The (request, reply) sizes tbench 4.0 uses for `op` in client `client`,
/// or `None` for operations it sends nothing for (Deltree, Sleep). A ReadX
/// reply carries what the recorded read returned (`ret_size`), not what
/// it asked for.
pub fn exchange_sizes(op: &Op, client: &str) -> Option<(u32, u32)> {
    let two = |p: &SmbPath| path_len(p, client).saturating_mul(2);
    Some(match op {
        Op::NtCreateX { path, .. } => (76u32.saturating_add(two(path)), 87),
        Op::Close { .. } => (47, 39),
        Op::Rename { from, to } => (51u32.saturating_add(two(from)).saturating_add(two(to)), 39),
        Op::Unlink { path, .. } | Op::Rmdir { path } | Op::Mkdir { path } => (45u32.saturating_add(two(path)), 39),
        Op::QueryPathInfo { path, .. } => (57u32.saturating_add(two(path)), 71),
        Op::QueryFileInfo { .. } | Op::QueryFsInfo { .. } => (59, 71),
        Op::SetFileInfo { .. } => (71, 47),
        Op::FindFirst { pattern, count, .. } => {
            (61u32.saturating_add(two(pattern)), 39u32.saturating_add(count.saturating_mul(90)))
        }
        Op::WriteX { size, .. } => (59u32.saturating_add(*size), 55),
        Op::ReadX { ret_size, .. } => (59, 59u32.saturating_add(*ret_size)),
        Op::LockX { .. } | Op::UnlockX { .. } => (51, 39),
        Op::Flush { .. } => (41, 39),
        Op::Deltree { .. } | Op::Sleep { .. } => return None,
    })
}

/// The bytes tbench 4.0 counts towards throughput for `op`: a WriteX's
/// `size` but a ReadX's `ret_size`, the data its reply carries. (dbench
/// counts a ReadX's `size`: see [`Op::payload_bytes`].) Measured: Debian's
/// tbench replaying only `ReadX 1 0 65536 1000` reports 1,000 bytes per
/// ReadX, only `WriteX 1 0 65536 1000` 65,536 per WriteX.
pub fn counted_bytes(op: &Op) -> u64 {
    match op {
        Op::ReadX { ret_size, .. } => u64::from(*ret_size),
        _ => op.payload_bytes(),
    }
}

/// Every operation of client.txt's vocabulary (and the variants that
/// change a size), with the (request, reply) bytes Debian's tbench 4.0
/// (package dbench 4.0-2.1) put on the wire for it as client 0 against
/// Debian's `tbench_srv`; `None`: it sent nothing. Measured by running
/// `tbench -c LOADFILE -t 1 1 127.0.0.1` under `strace -f -e
/// trace=read,sendto,recvfrom` over a loadfile of these lines, each
/// followed by a Flush as a marker, and adding up each exchange's `sendto`
/// and `recvfrom` lengths in the first pass. `exchange_sizes` must give
/// these (a unit test checks). The ignored host test
/// `tbench_wire_matches_debians_per_operation` in `nbench_compat` measures
/// again on this machine, counting whole messages: Debian's client against
/// a recorder on `tbench_srv`'s port, ours through a relay to
/// `tbench_srv`; both must match this table.
pub const MEASURED_TBENCH_4_0: &[(&str, Option<(u32, u32)>)] = &[
    (r#"NTCreateX "\clients\client1\a" 0x40 0x2 1 NT_STATUS_OK"#, Some((112, 87))),
    (r#"NTCreateX "\clients\client1\abcde" 0x40 0x1 1 NT_STATUS_OBJECT_NAME_NOT_FOUND"#, Some((120, 87))),
    ("Close 1 NT_STATUS_OK", Some((47, 39))),
    (r#"Rename "\clients\client1\abcde" "\clients\client1\b" NT_STATUS_OK"#, Some((131, 39))),
    (r#"Unlink "\clients\client1\a" 0x6 NT_STATUS_OK"#, Some((81, 39))),
    (r#"Rmdir "\clients\client1\abcde" NT_STATUS_OK"#, Some((89, 39))),
    (r#"Deltree "\clients\client1" NT_STATUS_OK"#, None),
    (r#"Deltree "\clients\client1\abcde" NT_STATUS_OK"#, None),
    (r#"Mkdir "\clients" NT_STATUS_OK"#, Some((61, 39))),
    (r#"Mkdir "\clients\client1\abcde" NT_STATUS_OK"#, Some((89, 39))),
    (r#"QUERY_PATH_INFORMATION "\clients\client1\a" 1004 NT_STATUS_OK"#, Some((93, 71))),
    ("QUERY_FILE_INFORMATION 1 258 NT_STATUS_OK", Some((59, 71))),
    ("QUERY_FS_INFORMATION 259 NT_STATUS_OK", Some((59, 71))),
    ("SET_FILE_INFORMATION 1 1004 NT_STATUS_OK", Some((71, 47))),
    (r#"FIND_FIRST "\clients\client1\abcde" 260 1366 5 NT_STATUS_OK"#, Some((105, 489))),
    (r#"FIND_FIRST "\clients\client1\abcde\*" 260 3 20 NT_STATUS_OK"#, Some((109, 1839))),
    ("WriteX 1 0 100 100 NT_STATUS_OK", Some((159, 55))),
    ("WriteX 1 0 100 50 NT_STATUS_OK", Some((159, 55))),
    ("ReadX 1 0 61440 61440 NT_STATUS_OK", Some((59, 61_499))),
    ("ReadX 1 0 65536 1000 NT_STATUS_OK", Some((59, 1059))),
    ("ReadX 1 0 4096 0 NT_STATUS_OK", Some((59, 59))),
    ("LockX 1 2147483538 1 NT_STATUS_OK", Some((51, 39))),
    ("UnlockX 1 2147483538 1 NT_STATUS_OK", Some((51, 39))),
    ("Flush 1 NT_STATUS_OK", Some((41, 39))),
];

fn be32(buf: &[u8]) -> u32 {
    let mut b = [0u8; 4];
    for (d, s) in b.iter_mut().zip(buf) {
        *d = *s;
    }
    u32::from_be_bytes(b)
}

fn send_all(fd: i32, data: &[u8]) -> Result<(), nix::Error> {
    let mut off = 0;
    while off < data.len() {
        match send(fd, data.get(off..).unwrap_or_default(), MsgFlags::MSG_NOSIGNAL) {
            Ok(n) => off += n,
            Err(nix::Error::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Receives exactly `buf.len()` bytes (or, with `MSG_TRUNC`, discards
/// them without copying, as tbench does). `Ok(false)` on end of stream.
fn recv_exact(fd: i32, buf: &mut [u8], flags: MsgFlags) -> Result<bool, nix::Error> {
    let mut off = 0;
    while off < buf.len() {
        match recv(fd, buf.get_mut(off..).unwrap_or_default(), flags | MsgFlags::MSG_WAITALL) {
            Ok(0) => return Ok(false),
            Ok(n) => off += n,
            Err(nix::Error::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// One tbench client's connection.
pub struct WireClient {
    sock: TcpStream,
    name: String,
    buf: Vec<u8>,
}

impl WireClient {
    /// Connects client `id` (named `client<id>`, which sets the path
    /// lengths) to `addr`, sets TCP_NODELAY as tbench does and makes the
    /// setup exchange. `max_io` is the loadfile's largest ReadX/WriteX.
    pub fn connect(addr: SocketAddr, id: u32, max_io: usize) -> Result<WireClient, WireError> {
        let sock = TcpStream::connect(addr).map_err(|source| WireError::Connect { addr, source })?;
        sock.set_nodelay(true).map_err(|source| WireError::Connect { addr, source })?;
        // Requests with paths are a few hundred bytes; FIND_FIRST replies
        // grow with the entry count, ReadX replies with the size.
        let mut c = WireClient { sock, name: format!("client{id}"), buf: vec![0u8; max_io + 4096] };
        c.exchange(0, "setup", SETUP_EXCHANGE)?;
        Ok(c)
    }

    /// The client's name in paths (`client<id>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    fn exchange(&mut self, line: u32, op: &'static str, (send_size, recv_size): (u32, u32)) -> Result<(), WireError> {
        let need = send_size.max(recv_size) as usize;
        if self.buf.len() < need {
            self.buf.resize(need, 0);
        }
        let fd = self.sock.as_raw_fd();
        let req = self.buf.get_mut(..send_size as usize).unwrap_or_default();
        for (d, s) in req
            .iter_mut()
            .zip(send_size.saturating_sub(4).to_be_bytes().into_iter().chain(recv_size.saturating_sub(4).to_be_bytes()))
        {
            *d = s;
        }
        send_all(fd, req).map_err(|source| WireError::Send { line, op, bytes: send_size, source })?;
        let recv_err = |what: String| WireError::Recv { line, op, bytes: recv_size, what };
        let mut header = [0u8; 4];
        match recv_exact(fd, &mut header, MsgFlags::empty()) {
            Ok(true) => {}
            Ok(false) => return Err(recv_err("connection closed".into())),
            Err(e) => return Err(recv_err(e.desc().to_string())),
        }
        let announced = be32(&header);
        let want = recv_size.saturating_sub(4);
        if announced != want {
            return Err(WireError::LostSync { line, op, want, got: announced });
        }
        let body = self.buf.get_mut(..want as usize).unwrap_or_default();
        match recv_exact(fd, body, MsgFlags::MSG_TRUNC) {
            Ok(true) => Ok(()),
            Ok(false) => Err(recv_err("connection closed".into())),
            Err(e) => Err(recv_err(e.desc().to_string())),
        }
    }

    /// Sends the request for one line and waits for its reply.
    pub fn execute(&mut self, line: &Line) -> Result<(), WireError> {
        match exchange_sizes(&line.op, &self.name) {
            Some(sizes) => self.exchange(line.number, line.op.kind().loadfile_name(), sizes),
            None => Ok(()),
        }
    }

    /// Closes the connection (the server's handler then exits).
    pub fn close(self) {
        let _ = self.sock.shutdown(Shutdown::Both);
    }
}

/// Serves one connection as `tbench_srv` does: read a request, answer with
/// the length it asks for, until the client closes. Returns the number of
/// exchanges served.
pub fn serve_connection(conn: &TcpStream) -> Result<u64, WireError> {
    let fd = conn.as_raw_fd();
    let _ = conn.set_nodelay(true);
    let mut buf = vec![0u8; 70_000];
    let mut served = 0u64;
    let io_err = |what, e: nix::Error| WireError::Server { what, source: io::Error::from_raw_os_error(e as i32) };
    loop {
        let mut header = [0u8; 4];
        match recv_exact(fd, &mut header, MsgFlags::empty()) {
            Ok(true) => {}
            Ok(false) => return Ok(served),
            Err(e) => return Err(io_err("read a request", e)),
        }
        let n = be32(&header) as usize;
        if buf.len() < n.max(4) + 4 {
            buf.resize(n.max(4) + 4, 0);
        }
        let body = buf.get_mut(..n).unwrap_or_default();
        match recv_exact(fd, body, MsgFlags::empty()) {
            Ok(true) => {}
            Ok(false) => return Ok(served),
            Err(e) => return Err(io_err("read a request", e)),
        }
        // The request's second word is the reply length; the reply starts
        // with it and carries that many more bytes.
        let reply_len = be32(buf.get(..4).unwrap_or_default()) as usize;
        if buf.len() < reply_len + 4 {
            buf.resize(reply_len + 4, 0);
        }
        let reply = buf.get_mut(..reply_len + 4).unwrap_or_default();
        for (d, s) in reply.iter_mut().zip((reply_len as u32).to_be_bytes()) {
            *d = s;
        }
        send_all(fd, reply).map_err(|e| io_err("send a reply", e))?;
        served += 1;
    }
}

impl super::client_driver::Replayer for WireClient {
    type Error = WireError;

    fn execute(&mut self, line: &Line) -> Result<(), WireError> {
        WireClient::execute(self, line)
    }

    fn carries_out(&self, op: &Op) -> bool {
        exchange_sizes(op, &self.name).is_some()
    }

    fn payload_bytes(&self, op: &Op) -> u64 {
        counted_bytes(op)
    }
}

/// The server process's work, as `tbench_srv` does it: accepts
/// `connections` connections on `listener`, forks a handler process for
/// each, and waits for them. Returns the process exit code (0 when every
/// handler served its client to the end).
pub fn serve_clients(listener: TcpListener, connections: u32) -> i32 {
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
    let mut handlers = Vec::new();
    let mut code = 0;
    for _ in 0..connections {
        let conn = match listener.accept() {
            Ok((c, _)) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => {
                code = 1;
                break;
            }
        };
        // SAFETY: the server process is single-threaded; the handler runs
        // this module's code and leaves with _exit.
        match unsafe { nix::unistd::fork() } {
            Ok(nix::unistd::ForkResult::Child) => {
                drop(listener);
                let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
                let ok = serve_connection(&conn).is_ok();
                drop(conn);
                // SAFETY: leaves without running the parent's atexit work.
                unsafe { libc::_exit(if ok { 0 } else { 1 }) }
            }
            Ok(nix::unistd::ForkResult::Parent { child }) => handlers.push(child),
            Err(_) => {
                code = 1;
                break;
            }
        }
    }
    drop(listener);
    for h in handlers {
        match crate::reap::wait_pid(h) {
            Ok(r) if r.exit.success() => {}
            _ => code = 1,
        }
    }
    code
}

/// A listening socket on 127.0.0.1 with a port the kernel picks.
pub fn listen_loopback() -> Result<TcpListener, WireError> {
    TcpListener::bind(("127.0.0.1", 0)).map_err(|source| WireError::Server { what: "listen on 127.0.0.1", source })
}

/// Makes sure the loopback interface is up: in the appliance nothing else
/// configures it. On a host it is already up and nothing changes.
pub fn ensure_loopback_up() -> Result<(), WireError> {
    const IFACE: &str = "lo";
    let err = |what, source| WireError::Loopback { iface: IFACE, what, source };
    // SAFETY: plain socket(2); the descriptor is closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(err("open a socket to configure it", io::Error::last_os_error()));
    }
    let result = (|| {
        // SAFETY: a zeroed ifreq is a valid value of this C struct.
        let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
        for (d, s) in ifr.ifr_name.iter_mut().zip(IFACE.bytes()) {
            *d = s as libc::c_char;
        }
        // SAFETY: SIOCGIFFLAGS reads into the ifreq we own.
        if unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &mut ifr) } < 0 {
            return Err(err("read its flags", io::Error::last_os_error()));
        }
        // SAFETY: the union member SIOCGIFFLAGS filled in.
        let flags = unsafe { ifr.ifr_ifru.ifru_flags };
        let up = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        if flags & libc::IFF_UP as libc::c_short != 0 {
            return Ok(());
        }
        ifr.ifr_ifru.ifru_flags = flags | up;
        // SAFETY: SIOCSIFFLAGS reads the ifreq we own.
        if unsafe { libc::ioctl(fd, libc::SIOCSIFFLAGS as _, &ifr) } < 0 {
            return Err(err("bring it up", io::Error::last_os_error()));
        }
        Ok(())
    })();
    // SAFETY: fd is ours and not used after this.
    unsafe { libc::close(fd) };
    result
}

#[cfg(test)]
mod tests {
    use super::super::loadfile::Loadfile;
    use super::*;

    fn op(text: &str) -> Op {
        Loadfile::parse("t", text.as_bytes()).unwrap().lines.remove(0).op
    }

    #[test]
    fn sizes_match_tbench_4_0() {
        // Measured as client 0: `client1` in a path stands for the
        // client's name.
        let wrong: Vec<String> = MEASURED_TBENCH_4_0
            .iter()
            .filter_map(|(text, measured)| {
                let ours = exchange_sizes(&op(text), "client0");
                (ours != *measured).then(|| format!("{text}: ours {ours:?}, tbench 4.0 {measured:?}"))
            })
            .collect();
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        // Not in client.txt; measured the same way: sends nothing.
        assert_eq!(exchange_sizes(&Op::Sleep { micros: 10 }, "client0"), None);
        // The setup exchange, measured the same way.
        assert_eq!(SETUP_EXCHANGE, (8, 8));
    }

    #[test]
    fn reads_count_what_they_returned_writes_what_they_asked() {
        assert_eq!(counted_bytes(&op("ReadX 1 0 65536 1000 NT_STATUS_OK")), 1000);
        assert_eq!(counted_bytes(&op("WriteX 1 0 65536 1000 NT_STATUS_OK")), 65_536);
        assert_eq!(counted_bytes(&op("Flush 1 NT_STATUS_OK")), 0);
    }

    #[test]
    fn client_and_server_exchange_over_loopback() {
        ensure_loopback_up().unwrap();
        let listener = listen_loopback().unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (conn, _) = listener.accept().unwrap();
            serve_connection(&conn).unwrap()
        });
        let lf = Loadfile::parse(
            "t",
            b"ReadX 1 0 65536 65536 NT_STATUS_OK\nWriteX 1 0 65536 65536 NT_STATUS_OK\nDeltree \"\\clients\\client1\\a\" NT_STATUS_OK\nFIND_FIRST \"\\a\\*\" 260 1366 900 NT_STATUS_OK\n",
        )
        .unwrap();
        let mut c = WireClient::connect(addr, 3, lf.max_io_size()).unwrap();
        assert_eq!(c.name(), "client3");
        for l in &lf.lines {
            c.execute(l).unwrap();
        }
        c.close();
        // setup + ReadX + WriteX + FIND_FIRST (Deltree sends nothing)
        assert_eq!(server.join().unwrap(), 4);
    }

    #[test]
    fn a_server_that_answers_wrongly_is_lost_sync() {
        let listener = listen_loopback().unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            use std::io::{Read, Write};
            let (mut conn, _) = listener.accept().unwrap();
            let mut req = [0u8; 8];
            conn.read_exact(&mut req).unwrap();
            conn.write_all(&[0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap();
        });
        let e = WireClient::connect(addr, 0, 16).err().unwrap();
        assert!(matches!(e, WireError::LostSync { want: 4, got: 9, .. }), "{e}");
        server.join().unwrap();
    }
}
