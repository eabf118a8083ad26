//! dbench's I/O buffers: each ReadX `malloc`s a buffer of its size and each
//! WriteX `calloc`s one, and frees it after the call (dbench 4.0's
//! `fileio.c`), so a glibc allocation (and, for sizes past the mmap
//! threshold, an `mmap`, page faults and a `munmap`) is part of every
//! operation. This test binary counts allocations through its own global
//! allocator, so it holds one test only.

use loads::workloads::nbench::fs_client::FsClient;
use loads::workloads::nbench::loadfile::Loadfile;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

const WRITE_SIZE: usize = 12_345;
const READ_SIZE: usize = 23_456;

static ZEROED_WRITE_BUFFERS: AtomicU64 = AtomicU64::new(0);
static READ_BUFFERS: AtomicU64 = AtomicU64::new(0);

struct Counting;

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() == READ_SIZE {
            READ_BUFFERS.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() == WRITE_SIZE {
            ZEROED_WRITE_BUFFERS.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[test]
fn every_read_and_write_gets_a_buffer_of_its_own_size_as_dbench_allocates_one() {
    let tmp = tempfile::tempdir().unwrap();
    let text = format!(
        "NTCreateX \"\\clients\\client1\\f\" 0x0 0x2 1 NT_STATUS_OK\n\
         WriteX 1 0 {WRITE_SIZE} {WRITE_SIZE} NT_STATUS_OK\n\
         WriteX 1 {WRITE_SIZE} {WRITE_SIZE} {WRITE_SIZE} NT_STATUS_OK\n\
         WriteX 1 0 {WRITE_SIZE} {WRITE_SIZE} NT_STATUS_OK\n\
         ReadX 1 0 {READ_SIZE} {READ_SIZE} NT_STATUS_OK\n\
         ReadX 1 0 {READ_SIZE} {READ_SIZE} NT_STATUS_OK\n\
         ReadX 1 0 {READ_SIZE} {READ_SIZE} NT_STATUS_OK\n\
         Close 1 NT_STATUS_OK\n"
    );
    let lf = Loadfile::parse("buffers", text.as_bytes()).unwrap();
    let mut client = FsClient::open(tmp.path(), 0).unwrap();
    std::fs::create_dir_all(tmp.path().join("clients/client0")).unwrap();
    let (w0, r0) = (ZEROED_WRITE_BUFFERS.load(Ordering::SeqCst), READ_BUFFERS.load(Ordering::SeqCst));
    for line in &lf.lines {
        client.execute(line).unwrap();
    }
    let writes = ZEROED_WRITE_BUFFERS.load(Ordering::SeqCst) - w0;
    let reads = READ_BUFFERS.load(Ordering::SeqCst) - r0;
    assert_eq!(writes, 3, "one zeroed buffer of the write's size per WriteX (dbench's calloc)");
    assert_eq!(reads, 3, "one buffer of the read's size per ReadX (dbench's malloc)");
}
