//! Hygiene of what the appliance packs: the guest init that `bootbench
//! image` builds is a static x86_64 executable, so the kernel can run it as
//! /init with no loader and no libraries in the initramfs. Needs cargo (it
//! builds the init), nothing else.

use bootbench::boot::init_build::{self, InitBuildError};
use object::{Architecture, Object};

#[test]
fn the_built_guest_init_is_a_static_x86_64_executable() {
    let bin = init_build::build("x86_64-unknown-linux-gnu")
        .unwrap_or_else(|e| panic!("building the init failed: {:#}", anyhow::Error::from(e)));
    init_build::check_static(&bin).unwrap_or_else(|e| panic!("{:#}", anyhow::Error::from(e)));
    let data = std::fs::read(&bin).unwrap();
    let elf = object::File::parse(&*data).expect("the init is ELF");
    assert_eq!(elf.architecture(), Architecture::X86_64);
    assert!(elf.is_64() && elf.is_little_endian());
    assert!(elf.entry() != 0, "no entry point");

    // The check can fail: this test binary is dynamically linked.
    let me = std::env::current_exe().unwrap();
    match init_build::check_static(&me) {
        Err(InitBuildError::NotStatic { path }) => assert_eq!(path, me),
        other => panic!("a dynamic executable passed the static check: {other:?}"),
    }
}
