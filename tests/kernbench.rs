//! kernbench for real, end to end on x86_64: the userland pack (built on
//! first use and cached) attached read-only and found by its serial, the
//! init mounting it at /pack, and a quick build (a handful of Linux
//! objects compiled by Debian's gcc and make, chrooted in the pack, the
//! objects on the ext4 scratch disk): one warmup and one timed build at the
//! optimal job count, in one boot under TCG. Checks the guest's figures
//! and that the envelope names the pack; prints the user:system split.
//!
//! And `bootbench local`, the same build on this host from the same pack:
//! the pack mounted read-only on a loop device for the run, undone after
//! it whatever the workloads did, recorded beside the document; refused
//! with `--pack none`.

mod support;

use bootbench::pack::choice::{resolve, PackChoice};
use loads::schema::Status;
use loads::suite::Suite;
use std::path::{Path, PathBuf};
use support::*;

/// A suite of kernbench's quick target at the optimal job count, one
/// timed build and no warmup.
const QUICK_OPTIMAL: &str = r#"{"name":"kernbench-quick-optimal","workloads":[{"name":"kernbench","iterations":1,"warmup":0,"params":{"target":"quick","jobs":["optimal"]}}]}"#;

#[test]
fn local_with_pack_none_refuses_a_kernbench_suite_naming_the_flag() {
    let dir = scratch();
    let suite = dir.path().join("suite.json");
    std::fs::write(&suite, QUICK_OPTIMAL).unwrap();
    let mut c = bootbench(["local", "--pack", "none", "--suite"]);
    c.arg(&suite);
    let run = run_with_deadline(c, std::time::Duration::from_secs(120));
    assert_eq!(run.code(), Some(1), "{}", run.transcript());
    assert!(run.stderr.contains("--pack none") && run.stderr.contains("kernbench"), "{}", run.transcript());
    assert!(!run.stderr.contains("local: workload"), "nothing ran: {}", run.transcript());
}

/// A small ext4 image (not a usable pack) in `dir`, made by mke2fs.
fn small_ext4(dir: &Path) -> PathBuf {
    let image = dir.join("small.ext4");
    let out = std::process::Command::new("mke2fs")
        .args(["-q", "-F", "-t", "ext4"])
        .arg(&image)
        .arg("8M")
        .output()
        .expect("run mke2fs");
    assert!(out.status.success(), "mke2fs: {}", String::from_utf8_lossy(&out.stderr));
    image
}

/// The loop devices backed by `image`, from sysfs.
fn loop_devices_of(image: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/sys/block").unwrap().flatten() {
        let backing = entry.path().join("loop/backing_file");
        if let Ok(text) = std::fs::read_to_string(&backing) {
            if Path::new(text.trim()) == image {
                found.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
    }
    found
}

/// Runs `suite` with `image` as the pack through the library, as `local`
/// does, and checks that the pack was mounted for it and is gone after:
/// no mount point, no mount, no loop device backed by the image.
fn local_run_leaves_no_pack_behind(suite: &str, image: &Path) -> loads::schema::RunDocument {
    let suite = Suite::from_json("test", suite).unwrap();
    let pack = resolve(&PackChoice::Image(image.to_path_buf()), &suite, "x86_64").unwrap().unwrap();
    let doc = bootbench::local::run_suite(&suite, None, Some(&pack)).unwrap();
    assert_eq!(doc.pack.as_ref().map(|p| p.image.as_path()), Some(image), "the document records the pack");
    let storage = doc.document.provenance.storage.as_ref().expect("provenance.storage names the pack's mount");
    let (device, dir) = (storage.pack_device.clone().unwrap(), storage.pack_mount.clone().unwrap());
    assert!(device.starts_with("/dev/loop"), "{device}");
    assert!(!Path::new(&dir).exists(), "the mount point {dir} is left");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(&dir), "{dir} is still mounted:\n{mounts}");
    assert!(loop_devices_of(image).is_empty(), "{device} still holds {}", image.display());
    doc.document
}

#[test]
#[ignore = "needs root, mke2fs and a loop device: run scripts/test"]
fn local_unmounts_the_pack_and_detaches_its_loop_device_after_a_run() {
    support::require(nix::unistd::geteuid().is_root(), "root (local mounts the pack)");
    require_program("mke2fs");
    let dir = scratch();
    let image = small_ext4(dir.path());
    let doc = local_run_leaves_no_pack_behind(
        r#"{"name":"t","workloads":[{"name":"fork","iterations":1,"warmup":0}]}"#,
        &image,
    );
    assert_eq!(doc.status, Status::Complete, "{:?}", doc.errors);
}

#[test]
#[ignore = "needs root, mke2fs and a loop device: run scripts/test"]
fn local_unmounts_the_pack_and_detaches_its_loop_device_after_a_failing_workload() {
    support::require(nix::unistd::geteuid().is_root(), "root (local mounts the pack)");
    require_program("mke2fs");
    let dir = scratch();
    let image = small_ext4(dir.path());
    // An empty ext4 is no pack: kernbench fails, naming where it looked,
    // which is where local mounted it.
    let doc = local_run_leaves_no_pack_behind(QUICK_OPTIMAL, &image);
    let w = &doc.workloads[0];
    let error = w.error.as_deref().expect("kernbench fails on an empty pack");
    let mount = doc.provenance.storage.as_ref().and_then(|s| s.pack_mount.clone()).unwrap();
    assert!(error.contains(&format!("no usable userland pack at {mount}")), "{error}");
}

#[test]
#[ignore = "needs root and a loop device: run scripts/test"]
fn local_refuses_an_image_that_does_not_mount_naming_it_and_the_mount_point_and_leaves_nothing() {
    support::require(nix::unistd::geteuid().is_root(), "root (local mounts the pack)");
    let dir = scratch();
    let image = dir.path().join("zeros.img");
    std::fs::write(&image, vec![0u8; 1 << 20]).unwrap();
    let suite = Suite::from_json("test", QUICK_OPTIMAL).unwrap();
    let pack = resolve(&PackChoice::Image(image.clone()), &suite, "x86_64").unwrap().unwrap();
    let e = format!("{:#}", bootbench::local::run_suite(&suite, None, Some(&pack)).unwrap_err());
    assert!(e.contains(&format!("cannot mount the userland pack {}", image.display())), "{e}");
    let mount_point = e.split(" at ").nth(1).and_then(|rest| rest.split(':').next()).expect("names the mount point");
    assert!(mount_point.contains("bootbench-pack-"), "{e}");
    assert!(!Path::new(mount_point).exists(), "the mount point {mount_point} is left");
    assert!(loop_devices_of(&image).is_empty(), "a loop device still holds {}", image.display());
}

#[test]
#[ignore = "needs root and the userland pack (built on first use, networked): run scripts/test"]
fn local_runs_a_quick_kernbench_on_this_host_from_the_pack() {
    require_local_pack();
    let dir = scratch();
    let suite = dir.path().join("suite.json");
    std::fs::write(&suite, QUICK_OPTIMAL).unwrap();
    let out = dir.path().join("local.json");
    let mut c = bootbench(["local", "--suite"]);
    c.arg(&suite).arg("-o").arg(&out);
    let run = run_with_deadline(c, BOOT_DEADLINE);
    run.assert_success();
    let doc: bootbench::local::LocalDocument = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let pack = doc.pack.as_ref().expect("the document records the pack");
    assert_eq!(pack.image_sha256, bootbench::pack::image::sha256_file(&pack.image).unwrap());
    assert!(pack.packages.iter().any(|p| p.starts_with("gcc-12=")), "{:?}", pack.packages);
    assert!(pack.serial.is_empty(), "no guest found it by a serial");
    let doc = doc.document;
    assert!(doc.errors.is_empty(), "{:?}", doc.errors);
    let failed: Vec<_> = doc.workloads.iter().filter_map(|w| w.error.as_deref()).collect();
    assert_eq!(doc.status, Status::Complete, "{failed:?}");
    let mount = doc.provenance.storage.as_ref().and_then(|s| s.pack_mount.clone()).expect("pack_mount");
    assert!(!Path::new(&mount).exists(), "the mount point {mount} is left");

    let w = doc.workloads.iter().find(|w| w.name == "kernbench").expect("a kernbench result");
    assert_eq!(w.iterations.len(), 1, "{w:?}");
    let it = &w.iterations[0];
    assert_eq!(it.detail["pack"], mount.as_str(), "kernbench built in the pack local mounted");
    // Where it was mounted is no parameter: two local runs compare.
    assert!(w.params.get("pack").is_none() && w.params["pack_id"].as_str().map(str::len) == Some(64), "{:?}", w.params);
    assert!(it.errors.is_empty(), "{:?}", it.errors);
    let v = |k: &str| it.metrics.get(k).unwrap_or_else(|| panic!("no {k}: {:?}", it.metrics.keys())).value;
    let (elapsed, user, system) = (v("elapsed_optimal"), v("user_optimal"), v("system_optimal"));
    assert_eq!(it.detail["objects_optimal"], 4, "{:?}", it.detail);
    assert!(elapsed > 0.0 && user > 0.0 && system > 0.0, "elapsed {elapsed} s, user {user} s, system {system} s");
    eprintln!(
        "kernbench quick, {} on this host ({} CPUs): elapsed {elapsed:.2} s, user {user:.2} s, system {system:.2} s \
         (user:system {:.0}:{:.0})",
        it.detail["jobs_optimal"],
        it.detail["cpus"],
        100.0 * user / (user + system),
        100.0 * system / (user + system),
    );
}

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn a_quick_kernbench_and_sdet_run_the_packs_programs_and_record_the_pack() {
    require_x86_64_boot();
    support::require(nix::unistd::geteuid().is_root(), "root (mmdebstrap --mode=root builds the pack)");
    for program in ["mmdebstrap", "mke2fs"] {
        require_program(program);
    }
    let _boot = boot_lock();
    let dir = scratch();
    let out = dir.path().join("results.json");
    let workloads = "kernbench,sdet,contest";
    let mut c = bootbench(["run", "--accel", "tcg", "--workloads", workloads, "--iterations", "1", "--warmup", "1"]);
    // --mem auto: what quick's four compilers at once need (960 MiB of
    // MemTotal), more than the base 1 GiB. In the same boot: SDET at 1 and
    // 4 scripts, every kind of command once per script; contest's
    // ctar_load and list_load rows with the pack's tar and ls (on a part
    // of the Linux tree, beside a short synthetic build).
    let append = "bootbench.kernbench.jobs=optimal bootbench.sdet.levels=[1,4] bootbench.sdet.units=14 \
                  bootbench.contest.rows=ctar_load,list_load bootbench.contest.load_tools=pack \
                  bootbench.contest.tar_dirs=linux/kernel,linux/mm bootbench.contest.files=24";
    c.args(["--append", append, "-o"]).arg(&out);
    let boot = boot_completely(c, &out);
    let doc = boot.result.as_ref().expect("an ok boot carries the guest document");
    // 1088 MiB: the least whose estimated MemTotal (less 74 MiB) holds 960.
    assert_eq!(boot.machine.mem_mib, 1088, "--mem auto");
    let mem_total = doc.provenance.machine.mem_bytes >> 20;
    eprintln!("MemTotal of a {} MiB guest: {mem_total} MiB", boot.machine.mem_mib);
    assert!(mem_total >= 960, "the host's estimate of what the kernel keeps was too low: {mem_total} MiB");

    // The pack: found by serial and mounted by the guest, named by the host.
    let s = doc.provenance.storage.as_ref().expect("provenance.storage");
    assert_eq!(s.pack_mount.as_deref(), Some("/pack"));
    let device = s.pack_device.as_deref().expect("pack_device");
    assert_ne!(Some(device), s.scratch_device.as_deref(), "the pack is not the scratch disk");
    // That the scratch disk kept /dev/vda beside the pack is the guest's
    // own check (its serial is not the pack's): `doc.errors` is empty.
    let pack = boot.pack.as_ref().expect("the envelope records the pack");
    assert_eq!(pack.image_sha256, sha256_file(&pack.image));
    assert!(pack.packages.iter().any(|p| p.starts_with("gcc-12=")), "{:?}", pack.packages);
    assert!(pack.packages.iter().any(|p| p.starts_with("linux-source-6.1=")), "{:?}", pack.packages);
    assert_eq!(pack.linux_config.as_deref(), Some("x86_64_defconfig"));
    assert_eq!(pack.linux_config_sha256.as_ref().map(String::len), Some(64));

    // The build: every quick object compiled, timed, with the kernel's
    // accounting of the build's processes.
    let w = doc.workloads.iter().find(|w| w.name == "kernbench").expect("a kernbench result");
    assert_eq!(w.iterations.len(), 1, "{w:?}");
    // The guest read the pack's identity from the pack itself; it is the
    // key the host cached the image under, so results from other packs
    // (another compiler, another tree) have other parameters.
    assert_eq!(w.params["pack_id"], serde_json::json!(pack.key), "{:?}", w.params);
    let it = &w.iterations[0];
    assert!(it.errors.is_empty(), "{:?}", it.errors);
    let v = |k: &str| it.metrics.get(k).unwrap_or_else(|| panic!("no {k}: {:?}", it.metrics.keys())).value;
    let (elapsed, user, system) = (v("elapsed_optimal"), v("user_optimal"), v("system_optimal"));
    assert_eq!(it.detail["objects_optimal"], 4, "{:?}", it.detail);
    assert_eq!(it.detail["fs"], "ext4", "the objects went to the scratch disk: {:?}", it.detail);
    // Four compiles of real kernel files take seconds of CPU, mostly user.
    assert!(user > 1.0 && user > system, "user {user} s, system {system} s");
    let cpu = v("cpu_percent_optimal");
    assert!((cpu - (user + system) / elapsed * 100.0).abs() < 0.5, "{cpu}");
    eprintln!(
        "kernbench quick, {} under TCG: elapsed {elapsed:.1} s, user {user:.1} s, system {system:.1} s \
         (user:system {:.0}:{:.0}), {cpu:.0}% CPU, {} sleeps, {} context switches; boot wall {:.0} s",
        it.detail["jobs_optimal"],
        100.0 * user / (user + system),
        100.0 * system / (user + system),
        v("sleeps_optimal"),
        v("context_switches_optimal"),
        boot.boot.wall_s
    );

    // SDET: real scripts under the pack's dash, 1 and 4 at once.
    let w = doc.workloads.iter().find(|w| w.name == "sdet").expect("an sdet result");
    assert_eq!(w.params["pack_id"], serde_json::json!(pack.key), "{:?}", w.params);
    assert_eq!(w.params["version"], 2, "{:?}", w.params);
    assert!(w.error.is_none(), "{:?}", w.error);
    let it = &w.iterations[0];
    assert!(it.errors.is_empty(), "{:?}", it.errors);
    assert_eq!(it.detail["pack"], "/pack");
    assert_eq!(it.detail["commands_per_script"], 18, "{:?}", it.detail);
    let mut rates = Vec::new();
    for n in [1u32, 4] {
        let rate = it.metrics[&format!("scripts_per_hour_{n}")].value;
        let elapsed = it.detail[&format!("elapsed_{n}")].as_f64().unwrap();
        assert!((rate - f64::from(n) * 3600.0 / elapsed).abs() < 1e-6 * rate, "{n}: {rate} scripts/h, {elapsed} s");
        let (user, system) =
            (it.detail[&format!("user_{n}")].as_f64().unwrap(), it.detail[&format!("system_{n}")].as_f64().unwrap());
        // Each script forks and execs 18 programs and compiles a file:
        // the guest's accounting sees all of it under the driver.
        assert!(user + system > 0.3 * elapsed, "{n}: user {user} s, system {system} s of {elapsed} s");
        rates.push(format!("{n}: {rate:.0} scripts/h ({elapsed:.1} s, user {user:.1} s, system {system:.1} s)"));
    }
    eprintln!("sdet under TCG, real scripts: {}", rates.join("; "));

    // contest's tar and list loads: the pack's tar and ls on the part of
    // the Linux tree copied to the scratch disk, stopped with the build.
    let w = doc.workloads.iter().find(|w| w.name == "contest").expect("a contest result");
    assert_eq!((&w.params["load_tools"], &w.params["build"]), (&"pack".into(), &"synthetic".into()), "{:?}", w.params);
    assert_eq!(w.params["pack_id"], serde_json::json!(pack.key), "the loads ran the pack's programs: {:?}", w.params);
    let it = &w.iterations[0];
    assert!(it.errors.is_empty(), "{:?}", it.errors);
    let d = &it.detail;
    assert_eq!(d["fs"], "ext4", "the tree is on the scratch disk: {d:?}");
    // linux/kernel and linux/mm of 6.1: 769 entries (588 and 181).
    let (entries, bytes) = (d["tree_entries"].as_u64().unwrap(), d["tree_bytes"].as_u64().unwrap());
    assert!((700..900).contains(&entries) && bytes > 10 << 20, "{entries} entries, {bytes} bytes");
    let roots: Vec<&str> = d["list_roots"].as_array().unwrap().iter().filter_map(|r| r.as_str()).collect();
    assert!(roots.contains(&"/usr") && roots.contains(&"/bootbench") && !roots.contains(&"/proc"), "{roots:?}");
    let mut figures = Vec::new();
    for (row, unit) in [("ctar_load", "archives"), ("list_load", "listings")] {
        let r = d["rows"].as_array().unwrap().iter().find(|r| r["row"] == row).unwrap();
        assert_eq!(r["load_unit"], unit, "{r}");
        assert_eq!(r["load_killed"], false, "stopped at the word, not killed after the grace: {r}");
        assert!(r["load_stop_s"].as_f64().unwrap() < 2.0, "{r}");
        let lcpu = it.metrics[&format!("lcpu_percent_{row}")].value;
        assert!(lcpu > 0.0, "{row}: the pack's tar and ls count as the load's: {r}");
        figures.push(format!(
            "{row}: {} {unit} in {:.1} s of build, LCPU {lcpu:.0}%, {:.0} MiB read and {:.0} MiB written by the row",
            it.metrics[&format!("loads_{row}")].value,
            it.metrics[&format!("time_{row}")].value,
            r["vmstat"]["pgpgin"].as_f64().unwrap_or(0.0) / 1024.0,
            r["vmstat"]["pgpgout"].as_f64().unwrap_or(0.0) / 1024.0,
        ));
    }
    eprintln!("contest under TCG, the pack's loads on {entries} entries ({} MiB): {}", bytes >> 20, figures.join("; "));
}

/// Runs `bootbench run` (`c`, writing `out`) and returns its one boot,
/// which must be ok with a complete guest document and no errors.
fn boot_completely(c: std::process::Command, out: &Path) -> bootbench::results::BootRecord {
    let run = run_with_deadline(c, BOOT_DEADLINE);
    run.assert_success();
    let boot = only_boot(out, &run);
    assert_eq!(boot.boot.classification, "ok", "{:?}\n{}", boot.boot.detail, boot.console_log);
    let doc = boot.result.as_ref().expect("an ok boot must carry the guest document");
    assert!(doc.errors.is_empty(), "{:?}", doc.errors);
    assert_eq!(doc.status, Status::Complete);
    boot
}

/// The ELF machine (`e_machine`) of `path` in the ext4 image `image`, read
/// with debugfs without mounting it (in the file's own byte order).
fn elf_machine_in_image(image: &Path, path: &str) -> u16 {
    let out = std::process::Command::new("debugfs")
        .args(["-R", &format!("cat {path}")])
        .arg(image)
        .output()
        .expect("debugfs runs");
    let head = &out.stdout;
    assert!(head.len() > 20 && head.starts_with(b"\x7fELF"), "{path} in {} is no ELF file", image.display());
    let bytes = [head[18], head[19]];
    if head[5] == 1 {
        u16::from_le_bytes(bytes)
    } else {
        u16::from_be_bytes(bytes)
    }
}

/// A guest arch's quick real build, and what its pack must be.
struct ForeignBuild {
    arch: qemu::Arch,
    /// `uname -m` in the guest.
    uname: &'static [&'static str],
    /// The pack's kernel configuration target.
    config: &'static str,
    /// The binutils package of the arch's own triplet.
    binutils: &'static str,
    /// fixdep's ELF machine: the tree's host programs are the guest's.
    elf_machine: u16,
}

/// Boots `want.arch` under TCG with its own pack (built on first use, its
/// tree prepared by its own gcc) and times one quick build at the optimal
/// job count after one warmup; checks the pack is the arch's and the build
/// ran its programs, and prints the user:system split beside the elapsed
/// time.
fn quick_real_build_on(want: &ForeignBuild) {
    let arch = want.arch;
    require_program(arch.profile().qemu_binary.to_str().unwrap_or_default());
    let debian = bootbench::kernel::DebianArch::for_target(arch).expect("a Debian arch");
    default_kernel(debian);
    require_local_pack();
    require_program("debugfs");
    let _boot = boot_lock();
    let dir = scratch();
    let out = dir.path().join("results.json");
    let mut c = bootbench(["run", "--arch", arch.name(), "--accel", "tcg", "--workloads", "kernbench"]);
    c.args(["--iterations", "1", "--warmup", "1", "--append", "bootbench.kernbench.jobs=optimal", "-o"]).arg(&out);
    let boot = boot_completely(c, &out);
    let doc = boot.result.as_ref().expect("an ok boot carries the guest document");
    assert!(want.uname.contains(&doc.provenance.machine.arch.as_str()), "{:?}", doc.provenance.machine.arch);

    // The arch's own pack: its packages, its defconfig, its host programs.
    let pack = boot.pack.as_ref().expect("the envelope records the pack");
    assert_eq!(pack.image_sha256, sha256_file(&pack.image));
    assert_eq!(pack.linux_config.as_deref(), Some(want.config));
    assert!(pack.packages.iter().any(|p| p.starts_with(&format!("{}=", want.binutils))), "{:?}", pack.packages);
    let machine = elf_machine_in_image(&pack.image, "/usr/src/linux-obj/scripts/basic/fixdep");
    assert_eq!(machine, want.elf_machine, "{arch}: the tree's host programs must be the guest's, not the host's");

    let w = doc.workloads.iter().find(|w| w.name == "kernbench").expect("a kernbench result");
    assert!(w.error.is_none(), "{:?}", w.error);
    assert_eq!(w.params["pack_id"], serde_json::json!(pack.key), "{:?}", w.params);
    let it = &w.iterations[0];
    assert!(it.errors.is_empty(), "{:?}", it.errors);
    assert_eq!(it.detail["objects_optimal"], 4, "{:?}", it.detail);
    let v = |k: &str| it.metrics.get(k).unwrap_or_else(|| panic!("no {k}: {:?}", it.metrics.keys())).value;
    let (elapsed, user, system) = (v("elapsed_optimal"), v("user_optimal"), v("system_optimal"));
    assert!(user > 1.0 && user > system, "user {user} s, system {system} s");
    eprintln!(
        "kernbench quick on {arch} under TCG, {}: elapsed {elapsed:.1} s, user {user:.1} s, system {system:.1} s \
         (user:system {:.0}:{:.0}), {:.0}% CPU; boot wall {:.0} s",
        it.detail["jobs_optimal"],
        100.0 * user / (user + system),
        100.0 * system / (user + system),
        v("cpu_percent_optimal"),
        boot.boot.wall_s
    );
}

// In the long tier since the default tier went over its CI budget: cold,
// it builds the i386 pack and boots a real build under TCG, and the
// default tier keeps the same path on x86_64
// (`a_quick_kernbench_and_sdet_run_the_packs_programs_and_record_the_pack`)
// and boots i386 in `cross_arch`.
#[test]
#[ignore = "long tier: run scripts/test --long"]
fn long_tier_a_quick_real_build_on_i386_runs_the_i386_packs_own_compiler() {
    quick_real_build_on(&ForeignBuild {
        arch: qemu::Arch::I386,
        uname: &["i686", "i586", "i386"],
        config: "i386_defconfig",
        binutils: "binutils-i686-linux-gnu",
        elf_machine: 3,
    });
}

#[test]
#[ignore = "long tier: run scripts/test --long"]
fn long_tier_a_quick_real_build_on_ppc64le_runs_the_ppc64el_packs_own_compiler() {
    require(
        Path::new("/proc/sys/fs/binfmt_misc/qemu-ppc64le").exists(),
        "qemu-user registered for ppc64el programs (scripts/setup registers it): the pack is built under it",
    );
    quick_real_build_on(&ForeignBuild {
        arch: qemu::Arch::Ppc64le,
        uname: &["ppc64le"],
        config: "ppc64le_defconfig",
        binutils: "binutils-powerpc64le-linux-gnu",
        elf_machine: 21,
    });
}
