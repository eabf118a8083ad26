//! A DHCPv4 client for one lease, long enough to upload a result: DISCOVER,
//! OFFER, REQUEST, ACK over a UDP socket bound to the interface (the
//! interface has no address yet, so everything is broadcast and the
//! server is asked to broadcast back). Messages are built and parsed by
//! `dhcproto`. No renewal: the upload takes seconds, leases last minutes
//! at least. Owns the exchange only; configuring the interface is
//! `network`'s job. Never panics on what the network sends.

use dhcproto::v4::{DhcpOption, Flags, Message, MessageType, Opcode, OptionCode};
use dhcproto::{Decodable, Decoder, Encodable, Encoder};
use nix::sys::socket::{setsockopt, sockopt};
use std::ffi::OsString;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

/// Waits for an answer after each send; the DISCOVER is sent once per
/// entry (RFC 2131 suggests 4 s doubling; shorter here, the whole
/// exchange is bounded by the sum).
const DISCOVER_WAITS: &[Duration] =
    &[Duration::from_secs(1), Duration::from_secs(2), Duration::from_secs(4), Duration::from_secs(4)];
/// Waits for the ACK after each REQUEST.
const REQUEST_WAITS: &[Duration] = &[Duration::from_secs(2), Duration::from_secs(4)];

/// Errors of the DHCP exchange.
#[derive(Debug, thiserror::Error)]
pub enum DhcpError {
    /// The client socket could not be set up.
    #[error("cannot set up the DHCP client socket ({what})")]
    Socket {
        /// Which part.
        what: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Sending failed.
    #[error("cannot send the DHCP {kind}")]
    Send {
        /// DISCOVER or REQUEST.
        kind: &'static str,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A message could not be encoded.
    #[error("cannot encode the DHCP {kind}: {why}")]
    Encode {
        /// DISCOVER or REQUEST.
        kind: &'static str,
        /// The encoder's complaint.
        why: String,
    },
    /// No server answered.
    #[error("no DHCP {expected} after {sent} {kind}s over {waited_ms} ms (is a DHCP server on this network?)")]
    NoAnswer {
        /// OFFER or ACK.
        expected: &'static str,
        /// DISCOVER or REQUEST.
        kind: &'static str,
        /// How many were sent.
        sent: usize,
        /// Total wait.
        waited_ms: u128,
    },
    /// The server refused the REQUEST.
    #[error("DHCP server {server} refused the request for {addr} (NAK)")]
    Nak {
        /// The server.
        server: Ipv4Addr,
        /// The address asked for.
        addr: Ipv4Addr,
    },
    /// An offer that cannot be used.
    #[error("DHCP offer from {server} is unusable: {why}")]
    BadOffer {
        /// The server.
        server: Ipv4Addr,
        /// What is wrong.
        why: &'static str,
    },
}

/// What the server gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// Our address.
    pub addr: Ipv4Addr,
    /// Prefix length (from the subnet mask; 24 when the server sent none).
    pub prefix: u8,
    /// The first router, if any.
    pub router: Option<Ipv4Addr>,
    /// DNS servers.
    pub dns: Vec<Ipv4Addr>,
    /// The server's identifier.
    pub server: Ipv4Addr,
    /// Lease time in seconds, if given.
    pub lease_s: Option<u32>,
}

fn request_list() -> DhcpOption {
    DhcpOption::ParameterRequestList(vec![
        OptionCode::SubnetMask,
        OptionCode::Router,
        OptionCode::DomainNameServer,
        OptionCode::AddressLeaseTime,
    ])
}

/// A BOOTREQUEST from `mac` with transaction id `xid`, asking for a
/// broadcast answer, no options yet. Decoded from a fixed header rather
/// than built: dhcproto's constructors (`Message::default`, `new`,
/// `new_with_id`) all draw a random xid with `rand::random()`, i.e. the
/// kernel's getrandom(), which blocks until the kernel's random pool is
/// initialised. Early in a boot without a hardware RNG (the lab agent's
/// DHCP, right after the link comes up) that takes minutes, and the agent
/// hung there before sending a single DISCOVER.
fn empty(xid: u32, mac: [u8; 6], kind: &'static str) -> Result<Message, DhcpError> {
    // op BOOTREQUEST, htype Ethernet, hlen 6, then zeroes up to the
    // magic cookie at offset 236, then the End option.
    let mut header = [0u8; 241];
    header[..3].copy_from_slice(&[1, 1, 6]);
    header[236..].copy_from_slice(&[99, 130, 83, 99, 255]);
    let mut m =
        Message::decode(&mut Decoder::new(&header)).map_err(|e| DhcpError::Encode { kind, why: e.to_string() })?;
    m.set_xid(xid).set_chaddr(&mac).set_flags(Flags::default().set_broadcast());
    Ok(m)
}

/// The DISCOVER for `mac` with transaction id `xid`.
pub fn discover(xid: u32, mac: [u8; 6]) -> Result<Message, DhcpError> {
    let mut m = empty(xid, mac, "DISCOVER")?;
    m.opts_mut().insert(DhcpOption::MessageType(MessageType::Discover));
    m.opts_mut().insert(request_list());
    Ok(m)
}

/// The REQUEST that accepts `offer`.
pub fn request(xid: u32, mac: [u8; 6], offer: &Lease) -> Result<Message, DhcpError> {
    let mut m = empty(xid, mac, "REQUEST")?;
    m.opts_mut().insert(DhcpOption::MessageType(MessageType::Request));
    m.opts_mut().insert(DhcpOption::RequestedIpAddress(offer.addr));
    m.opts_mut().insert(DhcpOption::ServerIdentifier(offer.server));
    m.opts_mut().insert(request_list());
    Ok(m)
}

/// Reads a server's answer: `None` if it is not a reply to `xid`/`mac`
/// (another client's traffic) or does not decode.
pub fn parse_reply(bytes: &[u8], xid: u32, mac: [u8; 6]) -> Option<(MessageType, Message)> {
    let m = Message::decode(&mut Decoder::new(bytes)).ok()?;
    if m.opcode() != Opcode::BootReply || m.xid() != xid || m.chaddr().get(..6) != Some(&mac[..]) {
        return None;
    }
    Some((m.opts().msg_type()?, m))
}

/// The lease an OFFER or ACK describes.
pub fn lease_of(m: &Message, from: Ipv4Addr) -> Result<Lease, DhcpError> {
    let server = match m.opts().get(OptionCode::ServerIdentifier) {
        Some(DhcpOption::ServerIdentifier(s)) => *s,
        _ => from,
    };
    let addr = m.yiaddr();
    if addr.is_unspecified() || addr.is_broadcast() || addr.is_multicast() {
        return Err(DhcpError::BadOffer { server, why: "no usable address (yiaddr)" });
    }
    let prefix = match m.opts().get(OptionCode::SubnetMask) {
        Some(DhcpOption::SubnetMask(mask)) => {
            let bits = u32::from(*mask);
            // A mask must be contiguous ones.
            if bits.leading_ones() + bits.trailing_zeros() != 32 || bits == 0 {
                return Err(DhcpError::BadOffer { server, why: "the subnet mask is not contiguous" });
            }
            bits.leading_ones() as u8
        }
        _ => 24,
    };
    let router = match m.opts().get(OptionCode::Router) {
        Some(DhcpOption::Router(r)) => r.first().copied().filter(|r| !r.is_unspecified()),
        _ => None,
    };
    let dns = match m.opts().get(OptionCode::DomainNameServer) {
        Some(DhcpOption::DomainNameServer(d)) => d.iter().copied().filter(|d| !d.is_unspecified()).take(3).collect(),
        _ => Vec::new(),
    };
    let lease_s = match m.opts().get(OptionCode::AddressLeaseTime) {
        Some(DhcpOption::AddressLeaseTime(t)) => Some(*t),
        _ => None,
    };
    Ok(Lease { addr, prefix, router, dns, server, lease_s })
}

fn encode(m: &Message, kind: &'static str) -> Result<Vec<u8>, DhcpError> {
    let mut buf = Vec::with_capacity(300);
    m.encode(&mut Encoder::new(&mut buf)).map_err(|e| DhcpError::Encode { kind, why: e.to_string() })?;
    Ok(buf)
}

fn open_socket(iface: &str) -> Result<UdpSocket, DhcpError> {
    let err = |what| move |source| DhcpError::Socket { what, source };
    let sock = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 68)).map_err(err("bind 0.0.0.0:68"))?;
    sock.set_broadcast(true).map_err(err("SO_BROADCAST"))?;
    setsockopt(&sock, sockopt::BindToDevice, &OsString::from(iface))
        .map_err(|e| DhcpError::Socket { what: "SO_BINDTODEVICE", source: e.into() })?;
    Ok(sock)
}

/// Sends `msg` once per wait in `waits` until a reply of type `want` (or a
/// NAK) arrives.
fn exchange(
    sock: &UdpSocket,
    packet: &[u8],
    kind: &'static str,
    waits: &[Duration],
    xid: u32,
    mac: [u8; 6],
    want: MessageType,
) -> Result<(MessageType, Message, Ipv4Addr), DhcpError> {
    let t0 = Instant::now();
    let server = SocketAddrV4::new(Ipv4Addr::BROADCAST, 67);
    let mut buf = [0u8; 1500];
    for wait in waits {
        sock.send_to(packet, server).map_err(|source| DhcpError::Send { kind, source })?;
        let until = Instant::now() + *wait;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            if sock.set_read_timeout(Some(left)).is_err() {
                break;
            }
            let Ok((n, from)) = sock.recv_from(&mut buf) else { break };
            let from = match from.ip() {
                std::net::IpAddr::V4(a) => a,
                std::net::IpAddr::V6(_) => continue,
            };
            let Some((kind_got, m)) = buf.get(..n).and_then(|b| parse_reply(b, xid, mac)) else { continue };
            if kind_got == want || kind_got == MessageType::Nak {
                return Ok((kind_got, m, from));
            }
        }
    }
    let expected = if want == MessageType::Offer { "OFFER" } else { "ACK" };
    Err(DhcpError::NoAnswer { expected, kind, sent: waits.len(), waited_ms: t0.elapsed().as_millis() })
}

/// Gets a lease on `iface` (up, with link, no address yet).
pub fn lease(iface: &str, mac: [u8; 6]) -> Result<Lease, DhcpError> {
    let sock = open_socket(iface)?;
    let xid = fastrand::u32(..);
    let packet = encode(&discover(xid, mac)?, "DISCOVER")?;
    let (_, offer_msg, from) = exchange(&sock, &packet, "DISCOVER", DISCOVER_WAITS, xid, mac, MessageType::Offer)?;
    let offer = lease_of(&offer_msg, from)?;
    let packet = encode(&request(xid, mac, &offer)?, "REQUEST")?;
    let (kind, ack, from) = exchange(&sock, &packet, "REQUEST", REQUEST_WAITS, xid, mac, MessageType::Ack)?;
    if kind == MessageType::Nak {
        return Err(DhcpError::Nak { server: offer.server, addr: offer.addr });
    }
    lease_of(&ack, from)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    const MAC: [u8; 6] = [0x52, 0x54, 0, 0x12, 0x34, 0x56];

    /// What a server would answer to `req`.
    fn answer(req: &Message, kind: MessageType, mask: Option<Ipv4Addr>) -> Vec<u8> {
        let mut m = empty(req.xid(), MAC, "test").unwrap();
        m.set_opcode(Opcode::BootReply).set_chaddr(&req.chaddr()[..6]).set_yiaddr([10, 0, 2, 15]);
        m.opts_mut().insert(DhcpOption::MessageType(kind));
        m.opts_mut().insert(DhcpOption::ServerIdentifier([10, 0, 2, 2].into()));
        if let Some(mask) = mask {
            m.opts_mut().insert(DhcpOption::SubnetMask(mask));
        }
        m.opts_mut().insert(DhcpOption::Router(vec![[10, 0, 2, 2].into()]));
        m.opts_mut().insert(DhcpOption::DomainNameServer(vec![[10, 0, 2, 3].into()]));
        m.opts_mut().insert(DhcpOption::AddressLeaseTime(86400));
        encode(&m, "test").unwrap()
    }

    #[test]
    fn messages_are_built_without_dhcprotos_blocking_random_xid() {
        // dhcproto's constructors call rand::random(), i.e. a
        // getrandom() that blocks until the kernel's random pool is ready:
        // minutes early in a boot without a hardware RNG.
        let source = include_str!("dhcp_client.rs");
        let code = source.split("#[cfg(test)]").next().unwrap();
        for banned in
            [concat!("Message::", "default("), concat!("Message::", "new("), concat!("Message::", "new_with_id(")]
        {
            let uses = code.lines().filter(|l| !l.trim_start().starts_with("//") && l.contains(banned)).count();
            assert_eq!(uses, 0, "{banned} draws a blocking random xid");
        }
        let m = discover(0x1234_5678, MAC).unwrap();
        assert_eq!(m.xid(), 0x1234_5678);
        assert_eq!(m.opcode(), Opcode::BootRequest);
        assert_eq!(m.hlen(), 6);
    }

    #[test]
    fn discover_asks_for_broadcast_and_the_options_we_use() {
        let bytes = encode(&discover(7, MAC).unwrap(), "DISCOVER").unwrap();
        let m = Message::decode(&mut Decoder::new(&bytes)).unwrap();
        assert_eq!(m.opts().msg_type(), Some(MessageType::Discover));
        assert!(m.flags().broadcast());
        assert_eq!(m.xid(), 7);
        assert_eq!(&m.chaddr()[..6], &MAC);
        assert!(m.opts().get(OptionCode::ParameterRequestList).is_some());
    }

    #[test]
    fn offer_becomes_a_lease_and_a_request_for_it() {
        let req = discover(9, MAC).unwrap();
        let bytes = answer(&req, MessageType::Offer, Some([255, 255, 255, 0].into()));
        let (kind, m) = parse_reply(&bytes, 9, MAC).unwrap();
        assert_eq!(kind, MessageType::Offer);
        let lease = lease_of(&m, [10, 0, 2, 2].into()).unwrap();
        assert_eq!(
            lease,
            Lease {
                addr: [10, 0, 2, 15].into(),
                prefix: 24,
                router: Some([10, 0, 2, 2].into()),
                dns: vec![[10, 0, 2, 3].into()],
                server: [10, 0, 2, 2].into(),
                lease_s: Some(86400),
            }
        );
        let r = request(9, MAC, &lease).unwrap();
        assert_eq!(r.opts().msg_type(), Some(MessageType::Request));
        assert!(
            matches!(r.opts().get(OptionCode::RequestedIpAddress), Some(DhcpOption::RequestedIpAddress(a)) if *a == lease.addr)
        );
        assert!(
            matches!(r.opts().get(OptionCode::ServerIdentifier), Some(DhcpOption::ServerIdentifier(a)) if *a == lease.server)
        );
    }

    #[test]
    fn other_clients_and_garbage_are_ignored() {
        let req = discover(9, MAC).unwrap();
        let bytes = answer(&req, MessageType::Offer, None);
        assert!(parse_reply(&bytes, 10, MAC).is_none(), "another transaction");
        assert!(parse_reply(&bytes, 9, [1, 2, 3, 4, 5, 6]).is_none(), "another client");
        assert!(parse_reply(&[0u8; 3], 9, MAC).is_none());
        assert!(parse_reply(&[0xffu8; 400], 9, MAC).is_none());
    }

    #[test]
    fn bad_masks_and_missing_addresses_are_refused() {
        let req = discover(1, MAC).unwrap();
        let bytes = answer(&req, MessageType::Offer, Some([255, 0, 255, 0].into()));
        let (_, m) = parse_reply(&bytes, 1, MAC).unwrap();
        assert!(lease_of(&m, [10, 0, 2, 2].into()).unwrap_err().to_string().contains("subnet mask"));
        let mut m = m;
        m.set_yiaddr(Ipv4Addr::UNSPECIFIED);
        assert!(lease_of(&m, [10, 0, 2, 2].into()).unwrap_err().to_string().contains("no usable address"));
    }
}
