//! Guest networking for the result upload, set up after the workloads (so
//! nothing of it runs while measuring): lo and one Ethernet interface up,
//! an IPv4 address (static, the one the kernel configured with `ip=`, or
//! DHCP), and a default route. The steps are a table walked in order; a
//! failure names the step and the interface. Owns interface setup only:
//! no upload, no result changes. Never panics.

use crate::dhcp_client::{self, DhcpError};
use loads::suite::IpSetting;
use nix::sys::socket::{socket, AddressFamily, SockFlag, SockType};
use std::fs;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// QEMU user networking: the guest's usual address, the host as gateway,
/// and slirp's DNS forwarder.
pub const QEMU_USER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 15);
/// Prefix length of [`QEMU_USER_ADDR`].
pub const QEMU_USER_PREFIX: u8 = 24;
/// The host, as QEMU user networking shows it.
pub const QEMU_USER_GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);
/// QEMU user networking's DNS forwarder.
pub const QEMU_USER_DNS: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 3);

/// How long a NIC may take to appear after its driver loaded.
const IFACE_WAIT: Duration = Duration::from_secs(5);
/// How long the link may take to come up (e1000 needs about 3.5 s).
const CARRIER_WAIT: Duration = Duration::from_secs(10);
/// Polling interval while waiting (only after the workloads).
const POLL: Duration = Duration::from_millis(20);
/// ARPHRD_ETHER in /sys/class/net/*/type.
const ARPHRD_ETHER: &str = "1";

/// Errors while bringing the network up.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// No usable interface appeared.
    #[error("no Ethernet interface appeared within {waited_ms} ms (is the NIC driver built in, or packed with `bootbench image --modules`?); interfaces seen: {seen:?}")]
    NoInterface {
        /// How long we waited.
        waited_ms: u128,
        /// What /sys/class/net had.
        seen: Vec<String>,
    },
    /// The interface asked for by `bootbench.iface` does not exist.
    #[error("interface '{name}' (bootbench.iface) did not appear within {waited_ms} ms; interfaces seen: {seen:?}")]
    NamedInterfaceMissing {
        /// The name asked for.
        name: String,
        /// How long we waited.
        waited_ms: u128,
        /// What /sys/class/net had.
        seen: Vec<String>,
    },
    /// No link.
    #[error("interface {iface} has no link (carrier) after {waited_ms} ms: is a cable or a QEMU netdev attached?")]
    NoCarrier {
        /// The interface.
        iface: String,
        /// How long we waited.
        waited_ms: u128,
    },
    /// An interface ioctl failed.
    #[error("{what} on {iface} failed")]
    Ioctl {
        /// What was being done.
        what: &'static str,
        /// The interface.
        iface: String,
        /// errno.
        #[source]
        source: nix::Error,
    },
    /// The control socket could not be opened.
    #[error("cannot open a socket to configure interfaces")]
    Socket(#[source] nix::Error),
    /// A sysfs file of the interface could not be read.
    #[error("cannot read {path}")]
    Sysfs {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The MAC address in sysfs is not one.
    #[error("interface {iface} has no usable MAC address ('{text}')")]
    BadMac {
        /// The interface.
        iface: String,
        /// What sysfs said.
        text: String,
    },
    /// `bootbench.ip=kernel`, but the kernel configured nothing.
    #[error("bootbench.ip=kernel, but interface {iface} has no IPv4 address (does the kernel have CONFIG_IP_PNP and an ip= argument?)")]
    NoKernelAddress {
        /// The interface.
        iface: String,
    },
    /// Listing addresses failed.
    #[error("cannot list interface addresses")]
    Addresses(#[source] nix::Error),
    /// DHCP failed.
    #[error("DHCP on {iface} failed")]
    Dhcp {
        /// The interface.
        iface: String,
        /// What went wrong.
        #[source]
        source: DhcpError,
    },
}

/// What the cmdline asked for, defaults not yet applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetRequest {
    /// `bootbench.iface`.
    pub iface: Option<String>,
    /// `bootbench.ip`.
    pub ip: Option<IpSetting>,
    /// `bootbench.gw`.
    pub gw: Option<Ipv4Addr>,
    /// `bootbench.dns`.
    pub dns: Option<Vec<Ipv4Addr>>,
    /// Whether the host said this is QEMU (`bootbench.accel` kvm, tcg or
    /// icount): then the default is QEMU user networking's static address
    /// instead of DHCP.
    pub qemu: bool,
}

/// The interface as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetConfigured {
    /// Interface name.
    pub iface: String,
    /// Its address.
    pub addr: Ipv4Addr,
    /// Prefix length.
    pub prefix: u8,
    /// Default gateway, if one was set.
    pub gateway: Option<Ipv4Addr>,
    /// DNS servers known.
    pub dns: Vec<Ipv4Addr>,
    /// `static`, `kernel` or `dhcp`.
    pub source: &'static str,
    /// Time the bring-up took.
    pub took: Duration,
}

impl NetConfigured {
    /// `key=value` text for the `network` console event.
    pub fn event_text(&self) -> String {
        let dns: Vec<String> = self.dns.iter().map(Ipv4Addr::to_string).collect();
        format!(
            "iface={} addr={}/{} gw={} dns={} via={} ms={}",
            self.iface,
            self.addr,
            self.prefix,
            self.gateway.map(|g| g.to_string()).unwrap_or_else(|| "-".into()),
            if dns.is_empty() { "-".to_string() } else { dns.join(",") },
            self.source,
            self.took.as_millis()
        )
    }
}

/// State the steps share.
struct Bringup<'r> {
    req: &'r NetRequest,
    ctl: Option<OwnedFd>,
    iface: String,
    addr: Option<(Ipv4Addr, u8)>,
    gateway: Option<Ipv4Addr>,
    dns: Vec<Ipv4Addr>,
    source: &'static str,
}

type Step = fn(&mut Bringup<'_>) -> Result<(), NetError>;

/// The bring-up, in order.
const STEPS: &[(&str, Step)] = &[
    ("open the control socket", open_control),
    ("bring up lo", up_loopback),
    ("find the interface", find_interface),
    ("bring up the interface", up_interface),
    ("wait for the link", wait_for_carrier),
    ("get an address", get_address),
    ("assign the address", assign_address),
    ("add the default route", add_default_route),
];

/// Brings the network up as `req` asks. On failure the error says which
/// step failed.
pub fn bring_up(req: &NetRequest) -> Result<NetConfigured, (&'static str, NetError)> {
    let t0 = Instant::now();
    let mut b =
        Bringup { req, ctl: None, iface: String::new(), addr: None, gateway: None, dns: Vec::new(), source: "static" };
    for (name, step) in STEPS {
        step(&mut b).map_err(|e| (*name, e))?;
    }
    let (addr, prefix) = b.addr.unwrap_or((Ipv4Addr::UNSPECIFIED, 0));
    Ok(NetConfigured {
        iface: b.iface,
        addr,
        prefix,
        gateway: b.gateway,
        dns: b.dns,
        source: b.source,
        took: t0.elapsed(),
    })
}

fn open_control(b: &mut Bringup<'_>) -> Result<(), NetError> {
    let fd = socket(AddressFamily::Inet, SockType::Datagram, SockFlag::SOCK_CLOEXEC, None).map_err(NetError::Socket)?;
    b.ctl = Some(fd);
    Ok(())
}

fn ctl_fd(b: &Bringup<'_>) -> Result<i32, NetError> {
    b.ctl.as_ref().map(AsRawFd::as_raw_fd).ok_or(NetError::Socket(nix::Error::EBADF))
}

/// An `ifreq` naming `iface` (the name is truncated to IFNAMSIZ-1; names
/// come from sysfs or a validated cmdline key, both shorter).
fn ifreq(iface: &str) -> libc::ifreq {
    // SAFETY: ifreq is plain data (a name and a union of plain data); all
    // zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(iface.bytes().take(libc::IFNAMSIZ - 1)) {
        *dst = src as libc::c_char;
    }
    req
}

fn sockaddr_v4(addr: Ipv4Addr) -> libc::sockaddr {
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr { s_addr: u32::from(addr).to_be() },
        sin_zero: [0; 8],
    };
    // SAFETY: sockaddr_in and sockaddr are both 16 bytes of plain data;
    // this is how the socket API passes an IPv4 address as a sockaddr.
    unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
}

fn prefix_mask(prefix: u8) -> Ipv4Addr {
    Ipv4Addr::from(u32::MAX.checked_shl(32 - u32::from(prefix.min(32))).unwrap_or(0))
}

/// Runs one interface ioctl.
fn ioctl(
    fd: i32,
    request: libc::c_ulong,
    req: &mut libc::ifreq,
    what: &'static str,
    iface: &str,
) -> Result<(), NetError> {
    // SAFETY: every request used here takes a pointer to an ifreq, which
    // lives for the call.
    let rc = unsafe { libc::ioctl(fd, request as _, req as *mut libc::ifreq) };
    if rc < 0 {
        return Err(NetError::Ioctl { what, iface: iface.to_string(), source: nix::Error::last() });
    }
    Ok(())
}

/// Sets IFF_UP (and IFF_RUNNING is the kernel's business).
fn set_up(fd: i32, iface: &str) -> Result<(), NetError> {
    let mut req = ifreq(iface);
    ioctl(fd, libc::SIOCGIFFLAGS, &mut req, "reading the flags (SIOCGIFFLAGS)", iface)?;
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    unsafe {
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
    }
    ioctl(fd, libc::SIOCSIFFLAGS, &mut req, "setting IFF_UP (SIOCSIFFLAGS)", iface)
}

fn up_loopback(b: &mut Bringup<'_>) -> Result<(), NetError> {
    set_up(ctl_fd(b)?, "lo")
}

fn read_sys(iface: &str, file: &str) -> Result<String, NetError> {
    let path = format!("/sys/class/net/{iface}/{file}");
    fs::read_to_string(&path).map(|s| s.trim().to_string()).map_err(|source| NetError::Sysfs { path, source })
}

/// Ethernet interfaces, by ifindex.
fn ethernet_interfaces() -> (Vec<String>, Vec<String>) {
    let mut all = Vec::new();
    let mut eth = Vec::new();
    if let Ok(dir) = fs::read_dir("/sys/class/net") {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let index: u32 = read_sys(&name, "ifindex").ok().and_then(|s| s.parse().ok()).unwrap_or(u32::MAX);
            if name != "lo" && read_sys(&name, "type").is_ok_and(|t| t == ARPHRD_ETHER) {
                eth.push((index, name.clone()));
            }
            all.push(name);
        }
    }
    eth.sort();
    all.sort();
    (eth.into_iter().map(|(_, n)| n).collect(), all)
}

fn find_interface(b: &mut Bringup<'_>) -> Result<(), NetError> {
    let t0 = Instant::now();
    loop {
        let (eth, all) = ethernet_interfaces();
        let found = match &b.req.iface {
            Some(name) => all.iter().find(|n| *n == name).cloned(),
            None => eth.first().cloned(),
        };
        if let Some(name) = found {
            b.iface = name;
            return Ok(());
        }
        if t0.elapsed() >= IFACE_WAIT {
            let waited_ms = t0.elapsed().as_millis();
            return Err(match &b.req.iface {
                Some(name) => NetError::NamedInterfaceMissing { name: name.clone(), waited_ms, seen: all },
                None => NetError::NoInterface { waited_ms, seen: all },
            });
        }
        std::thread::sleep(POLL);
    }
}

fn up_interface(b: &mut Bringup<'_>) -> Result<(), NetError> {
    set_up(ctl_fd(b)?, &b.iface)
}

fn wait_for_carrier(b: &mut Bringup<'_>) -> Result<(), NetError> {
    let t0 = Instant::now();
    loop {
        // EINVAL while the interface is still going up: keep waiting.
        if read_sys(&b.iface, "carrier").is_ok_and(|c| c == "1") {
            return Ok(());
        }
        if t0.elapsed() >= CARRIER_WAIT {
            return Err(NetError::NoCarrier { iface: b.iface.clone(), waited_ms: t0.elapsed().as_millis() });
        }
        std::thread::sleep(POLL);
    }
}

/// The interface's current IPv4 address and prefix, if any.
fn current_address(iface: &str) -> Result<Option<(Ipv4Addr, u8)>, NetError> {
    let addrs = nix::ifaddrs::getifaddrs().map_err(NetError::Addresses)?;
    for a in addrs.filter(|a| a.interface_name == iface) {
        let Some(ip) = a.address.as_ref().and_then(|s| s.as_sockaddr_in()).map(|s| s.ip()) else { continue };
        let prefix = a
            .netmask
            .as_ref()
            .and_then(|s| s.as_sockaddr_in())
            .map(|m| u32::from(m.ip()).count_ones() as u8)
            .unwrap_or(32);
        return Ok(Some((ip, prefix)));
    }
    Ok(None)
}

/// DNS servers the kernel's IP autoconfiguration found (/proc/net/pnp).
fn kernel_dns() -> Vec<Ipv4Addr> {
    fs::read_to_string("/proc/net/pnp")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("nameserver"))
        .filter_map(|a| a.trim().parse().ok())
        .filter(|a: &Ipv4Addr| !a.is_unspecified())
        .collect()
}

fn mac_address(iface: &str) -> Result<[u8; 6], NetError> {
    let text = read_sys(iface, "address")?;
    let bytes: Vec<u8> = text.split(':').filter_map(|h| u8::from_str_radix(h, 16).ok()).collect();
    <[u8; 6]>::try_from(bytes.as_slice()).map_err(|_| NetError::BadMac { iface: iface.to_string(), text })
}

fn get_address(b: &mut Bringup<'_>) -> Result<(), NetError> {
    let existing = current_address(&b.iface)?;
    let setting = match (b.req.ip, existing) {
        (Some(s), _) => s,
        // The kernel configured it (ip= with IP_PNP): keep it.
        (None, Some(_)) => IpSetting::Kernel,
        (None, None) if b.req.qemu => IpSetting::Static { addr: QEMU_USER_ADDR, prefix: QEMU_USER_PREFIX },
        (None, None) => IpSetting::Dhcp,
    };
    match setting {
        IpSetting::Static { addr, prefix } => {
            b.addr = Some((addr, prefix));
            b.source = "static";
            // QEMU's defaults only when the address is QEMU's default too.
            let qemu_default = b.req.ip.is_none();
            b.gateway = b.req.gw.or(qemu_default.then_some(QEMU_USER_GATEWAY));
            b.dns = b.req.dns.clone().unwrap_or_else(|| if qemu_default { vec![QEMU_USER_DNS] } else { Vec::new() });
        }
        IpSetting::Kernel => {
            let addr = existing.ok_or_else(|| NetError::NoKernelAddress { iface: b.iface.clone() })?;
            b.addr = Some(addr);
            b.source = "kernel";
            // The kernel added its route already; only an explicit gw is added.
            b.gateway = b.req.gw;
            b.dns = b.req.dns.clone().unwrap_or_else(kernel_dns);
        }
        IpSetting::Dhcp => {
            let mac = mac_address(&b.iface)?;
            let lease = dhcp_client::lease(&b.iface, mac)
                .map_err(|source| NetError::Dhcp { iface: b.iface.clone(), source })?;
            b.addr = Some((lease.addr, lease.prefix));
            b.source = "dhcp";
            b.gateway = b.req.gw.or(lease.router);
            b.dns = b.req.dns.clone().unwrap_or(lease.dns);
        }
    }
    Ok(())
}

fn assign_address(b: &mut Bringup<'_>) -> Result<(), NetError> {
    if b.source == "kernel" {
        return Ok(());
    }
    let Some((addr, prefix)) = b.addr else { return Ok(()) };
    let fd = ctl_fd(b)?;
    let mut req = ifreq(&b.iface);
    req.ifr_ifru.ifru_addr = sockaddr_v4(addr);
    ioctl(fd, libc::SIOCSIFADDR, &mut req, "setting the address (SIOCSIFADDR)", &b.iface)?;
    let mut req = ifreq(&b.iface);
    req.ifr_ifru.ifru_netmask = sockaddr_v4(prefix_mask(prefix));
    ioctl(fd, libc::SIOCSIFNETMASK, &mut req, "setting the netmask (SIOCSIFNETMASK)", &b.iface)
}

fn add_default_route(b: &mut Bringup<'_>) -> Result<(), NetError> {
    let Some(gw) = b.gateway else { return Ok(()) };
    let fd = ctl_fd(b)?;
    let mut dev: Vec<libc::c_char> = b.iface.bytes().map(|c| c as libc::c_char).chain(std::iter::once(0)).collect();
    // SAFETY: rtentry is plain data plus a device-name pointer; zero is a
    // valid "no device" value, set below to `dev`, which outlives the call.
    let mut rt: libc::rtentry = unsafe { std::mem::zeroed() };
    rt.rt_dst = sockaddr_v4(Ipv4Addr::UNSPECIFIED);
    rt.rt_genmask = sockaddr_v4(Ipv4Addr::UNSPECIFIED);
    rt.rt_gateway = sockaddr_v4(gw);
    rt.rt_flags = (libc::RTF_UP | libc::RTF_GATEWAY) as libc::c_ushort;
    rt.rt_dev = dev.as_mut_ptr();
    // SAFETY: SIOCADDRT takes a pointer to an rtentry, valid for the call.
    let rc = unsafe { libc::ioctl(fd, libc::SIOCADDRT as _, &mut rt as *mut libc::rtentry) };
    match rc {
        0 => Ok(()),
        // A default route already there (the kernel's ip=) is fine.
        _ if nix::Error::last() == nix::Error::EEXIST => Ok(()),
        _ => Err(NetError::Ioctl {
            what: "adding the default route (SIOCADDRT)",
            iface: b.iface.clone(),
            source: nix::Error::last(),
        }),
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn prefix_masks() {
        assert_eq!(prefix_mask(24), Ipv4Addr::new(255, 255, 255, 0));
        assert_eq!(prefix_mask(32), Ipv4Addr::BROADCAST);
        assert_eq!(prefix_mask(1), Ipv4Addr::new(128, 0, 0, 0));
        assert_eq!(prefix_mask(0), Ipv4Addr::UNSPECIFIED);
    }

    #[test]
    fn event_text_names_everything() {
        let c = NetConfigured {
            iface: "eth0".into(),
            addr: QEMU_USER_ADDR,
            prefix: 24,
            gateway: Some(QEMU_USER_GATEWAY),
            dns: vec![QEMU_USER_DNS],
            source: "static",
            took: Duration::from_millis(12),
        };
        assert_eq!(c.event_text(), "iface=eth0 addr=10.0.2.15/24 gw=10.0.2.2 dns=10.0.2.3 via=static ms=12");
    }

    #[test]
    fn ifreq_names_are_nul_terminated_and_bounded() {
        let r = ifreq("a-very-long-interface-name");
        assert_eq!(r.ifr_name[libc::IFNAMSIZ - 1], 0);
        assert_eq!(r.ifr_name[0], b'a' as libc::c_char);
    }
}
