//! The kernel build that the `kbuild` and `contest` workloads time (and
//! whose source tree SDET's scripts work on): the seeded source tree, the
//! `make` applet that schedules the `cc` and `ld` applets, and the call
//! that times one build. Owns building; must not depend on any workload,
//! the workload registry, the suite or the runner, nor on the applet
//! dispatcher (it starts applets through `applet_argv`).

pub mod make;
pub mod source_tree;

/// Online CPUs, as kernbench counted them.
pub fn online_cpus() -> usize {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::_NPROCESSORS_ONLN) {
        Ok(Some(n)) if n > 0 => n as usize,
        _ => 1,
    }
}
