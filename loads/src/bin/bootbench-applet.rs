//! Runs one of bootbench's applets: `bootbench-applet --applet NAME ARGS...`,
//! the argv the workloads exec. A test harness binary cannot dispatch
//! applets, so the loads crate's tests point `RunContext::applet_exe`
//! here; it is also handy for trying an applet by hand.

fn main() {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    match loads::applets::main(&argv) {
        Some(code) => std::process::exit(code),
        None => {
            eprintln!("usage: bootbench-applet --applet NAME [ARGS...]\napplets: {}", loads::applets::NAMES.join(", "));
            std::process::exit(2)
        }
    }
}
