//! Choosing QEMU's accelerator and clock: KVM when it really works, TCG
//! otherwise, and icount (instruction counting, deterministic guest time)
//! on request. The decision is a pure function of what the host reports, so
//! it is tested without a host that has (or lacks) KVM.

use crate::arch::{Arch, ArchProfile};
use std::fmt;
use std::path::Path;
use std::str::FromStr;

/// The largest `-icount shift` QEMU accepts.
pub const MAX_ICOUNT_SHIFT: u8 = 10;

/// The seed of QEMU's guest-visible random sources (RDRAND and the like,
/// `-seed N`) in icount mode, so every icount boot draws the same numbers.
pub const ICOUNT_QEMU_SEED: u64 = 1;

/// Kernel cmdline words every icount boot gets (unless the cmdline already
/// sets the key): no kernel address-space, mmap or kernel-stack offset
/// randomisation. Under icount the guest clock counts instructions, and
/// these randomisations change instruction counts from boot to boot; without
/// them fork's across-boot CV fell from 2.05% to 0.02% on the Debian 6.1
/// amd64 kernel. Each entry is (key, value), `None` for a bare word.
pub const ICOUNT_DERANDOMISE: &[(&str, Option<&str>)] =
    &[("nokaslr", None), ("norandmaps", None), ("randomize_kstack_offset", Some("off"))];

/// Errors choosing an accelerator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccelError {
    /// Not one of the accepted accelerator names.
    #[error("unknown accelerator '{0}' (valid: auto, kvm, tcg, icount[:SHIFT])")]
    UnknownAccel(String),
    /// Not one of the accepted clock names.
    #[error("unknown clock '{0}' (valid: real, icount[:SHIFT])")]
    UnknownClock(String),
    /// The icount shift is not a number in 0..=10.
    #[error("bad icount shift '{0}' (valid: 0..={MAX_ICOUNT_SHIFT}; each instruction takes 2^SHIFT ns of guest time)")]
    BadShift(String),
    /// icount is emulation-only, so it cannot be combined with KVM.
    #[error("the icount clock needs TCG, but the accelerator 'kvm' was requested")]
    IcountNeedsTcg,
}

/// How QEMU runs guest code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum Accel {
    /// Hardware virtualisation.
    Kvm,
    /// Dynamic translation, guest time follows the host clock.
    Tcg,
    /// Dynamic translation with instruction counting: every instruction
    /// takes 2^`shift` ns of guest time, so guest-measured times measure path
    /// length and are reproducible (`-icount shift=N,sleep=off`).
    Icount {
        /// Nanoseconds per instruction, as a power of two (0..=10).
        shift: u8,
    },
}

impl Accel {
    /// The `-cpu` model for `profile` under this accelerator when the caller
    /// names none: the host's under KVM, the profile's TCG model otherwise.
    pub fn default_cpu(self, profile: &ArchProfile) -> Option<&'static str> {
        match self {
            Accel::Kvm => Some("host"),
            Accel::Tcg | Accel::Icount { .. } => profile.tcg_cpu,
        }
    }

    /// Whether guest code is emulated (TCG or icount).
    pub fn is_emulated(self) -> bool {
        !matches!(self, Accel::Kvm)
    }
}

impl fmt::Display for Accel {
    /// The mode name used in results: `kvm`, `tcg` or `icount`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
            Accel::Icount { .. } => "icount",
        })
    }
}

impl FromStr for Accel {
    type Err = AccelError;

    /// `kvm`, `tcg`, `icount` (shift 0) or `icount:SHIFT`.
    ///
    /// ```
    /// # use qemu::Accel;
    /// assert_eq!("icount:3".parse::<Accel>().unwrap(), Accel::Icount { shift: 3 });
    /// assert_eq!("tcg".parse::<Accel>().unwrap(), Accel::Tcg);
    /// ```
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "kvm" => Ok(Accel::Kvm),
            "tcg" => Ok(Accel::Tcg),
            _ => match parse_icount(s) {
                Some(r) => r,
                None => Err(AccelError::UnknownAccel(s.to_string())),
            },
        }
    }
}

/// `icount` or `icount:N`; `None` when `s` is not an icount spelling at all.
fn parse_icount(s: &str) -> Option<Result<Accel, AccelError>> {
    let rest = s.strip_prefix("icount")?;
    if rest.is_empty() {
        return Some(Ok(Accel::Icount { shift: 0 }));
    }
    let n = rest.strip_prefix(':')?;
    Some(match n.parse::<u8>() {
        Ok(shift) if shift <= MAX_ICOUNT_SHIFT => Ok(Accel::Icount { shift }),
        _ => Err(AccelError::BadShift(n.to_string())),
    })
}

/// What the user asked for with `--accel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AccelRequest {
    /// KVM when it works, TCG otherwise ([`detect`]).
    #[default]
    Auto,
    /// Exactly this accelerator.
    Exact(Accel),
}

impl FromStr for AccelRequest {
    type Err = AccelError;

    /// `auto` or anything [`Accel::from_str`] accepts.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "auto" {
            Ok(AccelRequest::Auto)
        } else {
            s.parse().map(AccelRequest::Exact)
        }
    }
}

/// What the user asked for with `--clock`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Clock {
    /// Guest time follows the host's.
    #[default]
    Real,
    /// Instruction counting with this shift (see [`Accel::Icount`]).
    Icount {
        /// Nanoseconds per instruction, as a power of two.
        shift: u8,
    },
}

impl FromStr for Clock {
    type Err = AccelError;

    /// `real`, `icount` (shift 0) or `icount:SHIFT`.
    ///
    /// ```
    /// # use qemu::Clock;
    /// assert_eq!("icount".parse::<Clock>().unwrap(), Clock::Icount { shift: 0 });
    /// assert!("icount:11".parse::<Clock>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "real" {
            return Ok(Clock::Real);
        }
        match parse_icount(s) {
            Some(Ok(Accel::Icount { shift })) => Ok(Clock::Icount { shift }),
            Some(Err(e)) => Err(e),
            _ => Err(AccelError::UnknownClock(s.to_string())),
        }
    }
}

/// The accelerator chosen, and why, for the log and the host envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccelChoice {
    /// The accelerator.
    pub accel: Accel,
    /// Why it was chosen (or why KVM was not).
    pub reason: String,
}

/// What the host says about KVM; the input of [`decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvmProbe {
    /// The guest arch.
    pub guest: Arch,
    /// The host arch, `None` if it is none bootbench knows.
    pub host: Option<Arch>,
    /// `Ok` if /dev/kvm opened read-write, else why not.
    pub kvm_dev: Result<(), String>,
    /// The text of /proc/cpuinfo (its flags lines are what matter).
    pub cpuinfo: String,
    /// Whether the `kvm_pvm` module is loaded (/sys/module/kvm_pvm).
    pub kvm_pvm: bool,
}

impl KvmProbe {
    /// Probes this host for a guest of `guest` arch.
    pub fn probe(guest: Arch) -> KvmProbe {
        let kvm_dev =
            std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm").map(drop).map_err(|e| e.to_string());
        KvmProbe {
            guest,
            host: Arch::host().ok(),
            kvm_dev,
            cpuinfo: std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default(),
            kvm_pvm: Path::new("/sys/module/kvm_pvm").exists(),
        }
    }
}

/// Whether any `flags` line of x86 /proc/cpuinfo lists vmx or svm.
fn has_hw_virt(cpuinfo: &str) -> bool {
    cpuinfo
        .lines()
        .filter_map(|l| l.split_once(':').filter(|(k, _)| k.trim() == "flags").map(|(_, v)| v))
        .any(|flags| flags.split_whitespace().any(|f| f == "vmx" || f == "svm"))
}

/// Decides between KVM and TCG from a probe.
///
/// KVM is chosen only when the guest arch is the host's, /dev/kvm opens
/// read-write, an x86 host's CPU has vmx or svm, and the `kvm_pvm` module
/// (PVM, KVM without hardware virtualisation, under which guests hang in
/// early boot) is not loaded.
///
/// ```
/// # use qemu::{accel::{decide, KvmProbe}, Accel, Arch};
/// let probe = KvmProbe {
///     guest: Arch::Ppc64le,
///     host: Some(Arch::X86_64),
///     kvm_dev: Ok(()),
///     cpuinfo: "flags : fpu vmx".into(),
///     kvm_pvm: false,
/// };
/// assert_eq!(decide(&probe).accel, Accel::Tcg);
/// ```
pub fn decide(probe: &KvmProbe) -> AccelChoice {
    let tcg = |reason: String| AccelChoice { accel: Accel::Tcg, reason };
    match probe.host {
        Some(h) if h == probe.guest => {}
        Some(h) => return tcg(format!("guest arch {} differs from host arch {h}; using TCG", probe.guest)),
        None => return tcg(format!("host arch is not one KVM can run {} guests on; using TCG", probe.guest)),
    }
    if let Err(e) = &probe.kvm_dev {
        return tcg(format!("/dev/kvm cannot be opened read-write ({e}); using TCG"));
    }
    let x86 = matches!(probe.guest, Arch::X86_64 | Arch::I386);
    if x86 && !has_hw_virt(&probe.cpuinfo) {
        let pvm = if probe.kvm_pvm { " (kvm_pvm)" } else { "" };
        return tcg(format!("/dev/kvm present but CPU lacks vmx/svm{pvm}: guests hang; using TCG"));
    }
    if probe.kvm_pvm {
        return tcg("/dev/kvm is provided by kvm_pvm, under which guests hang; using TCG".to_string());
    }
    AccelChoice { accel: Accel::Kvm, reason: "/dev/kvm usable and guest arch matches host; using KVM".to_string() }
}

/// Probes this host and decides between KVM and TCG for `arch`.
pub fn detect(arch: Arch) -> AccelChoice {
    decide(&KvmProbe::probe(arch))
}

/// Resolves the user's `--accel` and `--clock` for a guest of `arch`.
///
/// An explicit `kvm` is honoured even where [`detect`] would not choose it
/// (the reason then carries the probe's warning); `--clock icount` selects
/// TCG with instruction counting.
///
/// ```
/// # use qemu::{accel::{choose, AccelRequest}, Accel, Arch, Clock};
/// let c = choose(AccelRequest::Auto, Clock::Icount { shift: 0 }, Arch::X86_64).unwrap();
/// assert_eq!(c.accel, Accel::Icount { shift: 0 });
/// ```
pub fn choose(request: AccelRequest, clock: Clock, arch: Arch) -> Result<AccelChoice, AccelError> {
    match (request, clock) {
        (AccelRequest::Exact(Accel::Kvm), Clock::Icount { .. }) => Err(AccelError::IcountNeedsTcg),
        (AccelRequest::Exact(Accel::Icount { shift }), Clock::Icount { shift: s }) if s != shift => {
            Err(AccelError::BadShift(format!("{shift} (accel) vs {s} (clock)")))
        }
        (_, Clock::Icount { shift }) | (AccelRequest::Exact(Accel::Icount { shift }), Clock::Real) => {
            Ok(AccelChoice { accel: Accel::Icount { shift }, reason: format!("icount shift={shift} requested") })
        }
        (AccelRequest::Exact(Accel::Tcg), Clock::Real) => {
            Ok(AccelChoice { accel: Accel::Tcg, reason: "TCG requested".to_string() })
        }
        (AccelRequest::Exact(Accel::Kvm), Clock::Real) => {
            let auto = detect(arch);
            let reason = match auto.accel {
                Accel::Kvm => "KVM requested".to_string(),
                _ => format!("KVM requested although the probe says: {}", auto.reason),
            };
            Ok(AccelChoice { accel: Accel::Kvm, reason })
        }
        (AccelRequest::Auto, Clock::Real) => Ok(detect(arch)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_model_follows_the_accelerator() {
        assert_eq!(Accel::Kvm.default_cpu(&Arch::X86_64.profile()), Some("host"));
        assert_eq!(Accel::Tcg.default_cpu(&Arch::X86_64.profile()), Some("max"));
        assert_eq!(Accel::Tcg.default_cpu(&Arch::Ppc64.profile()), None);
    }

    fn probe() -> KvmProbe {
        KvmProbe {
            guest: Arch::X86_64,
            host: Some(Arch::X86_64),
            kvm_dev: Ok(()),
            cpuinfo: "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr pae vmx sse2\n".to_string(),
            kvm_pvm: false,
        }
    }

    #[test]
    fn kvm_when_everything_is_there() {
        assert_eq!(decide(&probe()).accel, Accel::Kvm);
        let amd = KvmProbe { cpuinfo: "flags : fpu svm".into(), ..probe() };
        assert_eq!(decide(&amd).accel, Accel::Kvm);
    }

    #[test]
    fn this_machine_kind_pvm_without_vmx_is_tcg() {
        let p = KvmProbe { cpuinfo: "flags : fpu sse2 hypervisor".into(), kvm_pvm: true, ..probe() };
        let c = decide(&p);
        assert_eq!(c.accel, Accel::Tcg);
        assert_eq!(c.reason, "/dev/kvm present but CPU lacks vmx/svm (kvm_pvm): guests hang; using TCG");
    }

    #[test]
    fn each_missing_piece_gives_tcg_with_its_reason() {
        let c = decide(&KvmProbe { kvm_dev: Err("No such file or directory (os error 2)".into()), ..probe() });
        assert!(c.accel == Accel::Tcg && c.reason.contains("/dev/kvm cannot be opened"), "{c:?}");
        let c = decide(&KvmProbe { guest: Arch::Ppc64le, ..probe() });
        assert!(c.accel == Accel::Tcg && c.reason.contains("differs from host"), "{c:?}");
        let c = decide(&KvmProbe { kvm_pvm: true, ..probe() });
        assert!(c.accel == Accel::Tcg && c.reason.contains("kvm_pvm"), "{c:?}");
        // "vmx" inside another flag name does not count.
        let c = decide(&KvmProbe { cpuinfo: "flags : vmxnotreally svmx".into(), ..probe() });
        assert_eq!(c.accel, Accel::Tcg);
        // A ppc64 host has no vmx flag and needs none.
        let ppc = KvmProbe { guest: Arch::Ppc64le, host: Some(Arch::Ppc64le), cpuinfo: String::new(), ..probe() };
        assert_eq!(decide(&ppc).accel, Accel::Kvm);
    }

    #[test]
    fn parsing_accel_and_clock() {
        assert_eq!("icount".parse::<Accel>().unwrap(), Accel::Icount { shift: 0 });
        assert_eq!("icount:10".parse::<Accel>().unwrap(), Accel::Icount { shift: 10 });
        assert_eq!("icount:11".parse::<Accel>(), Err(AccelError::BadShift("11".into())));
        assert_eq!("icountx".parse::<Accel>(), Err(AccelError::UnknownAccel("icountx".into())));
        assert_eq!("auto".parse::<AccelRequest>().unwrap(), AccelRequest::Auto);
        assert_eq!("kvm".parse::<AccelRequest>().unwrap(), AccelRequest::Exact(Accel::Kvm));
        assert_eq!("real".parse::<Clock>().unwrap(), Clock::Real);
        assert_eq!("icount:5".parse::<Clock>().unwrap(), Clock::Icount { shift: 5 });
        assert!(matches!("tcg".parse::<Clock>(), Err(AccelError::UnknownClock(_))));
        assert_eq!(Accel::Icount { shift: 4 }.to_string(), "icount");
        assert_eq!(serde_json::to_string(&Accel::Icount { shift: 4 }).unwrap(), r#"{"mode":"icount","shift":4}"#);
    }

    #[test]
    fn choose_combines_accel_and_clock() {
        let kvm = AccelRequest::Exact(Accel::Kvm);
        assert_eq!(choose(kvm, Clock::Icount { shift: 0 }, Arch::X86_64), Err(AccelError::IcountNeedsTcg));
        let tcg = choose(AccelRequest::Exact(Accel::Tcg), Clock::Icount { shift: 2 }, Arch::X86_64).unwrap();
        assert_eq!(tcg.accel, Accel::Icount { shift: 2 });
        let t = choose(AccelRequest::Exact(Accel::Tcg), Clock::Real, Arch::X86_64).unwrap();
        assert_eq!(t.accel, Accel::Tcg);
        assert_eq!(choose(kvm, Clock::Real, Arch::Ppc64).unwrap().accel, Accel::Kvm);
    }
}
