//! The host a boot ran on, for the results' envelope: its name, CPU model,
//! logical CPUs and kernel release, as `/proc` gives them (what `uname -n`
//! and `uname -r` print, and `/proc/cpuinfo`). What cannot be read stays
//! empty: a boot is never refused for a missing description of its host.

use crate::results::HostRef;

/// This host, as far as it can be read.
pub fn this_host() -> HostRef {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    HostRef {
        name: read("/proc/sys/kernel/hostname").trim().to_string(),
        cpu: cpu_model(&read("/proc/cpuinfo")),
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get() as u32),
        kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
    }
}

/// The CPU model of `/proc/cpuinfo`: x86's `model name`, else POWER's
/// `cpu`, else Arm's `Hardware`; empty when none is there.
fn cpu_model(cpuinfo: &str) -> String {
    ["model name", "cpu", "Hardware"]
        .iter()
        .find_map(|key| {
            cpuinfo.lines().find_map(|line| {
                let (k, v) = line.split_once(':')?;
                (k.trim() == *key).then(|| v.trim().to_string())
            })
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_model_is_x86_s_model_name_or_power_s_cpu() {
        let x86 =
            "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\nflags\t: fpu\n";
        assert_eq!(cpu_model(x86), "Intel(R) Xeon(R) CPU @ 2.20GHz");
        let power = "processor\t: 0\ncpu\t\t: POWER9 (architected), altivec supported\nclock\t\t: 2200MHz\n";
        assert_eq!(cpu_model(power), "POWER9 (architected), altivec supported");
        assert_eq!(cpu_model("processor : 0\n"), "");
    }

    #[test]
    fn this_host_has_a_name_a_kernel_and_cpus() {
        let h = this_host();
        assert!(!h.name.is_empty() && !h.kernel.is_empty() && h.cpus >= 1, "{h:?}");
    }
}
