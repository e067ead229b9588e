//! Links the Linux executable at a fixed address instead of as a position-independent one.
//!
//! A position-independent executable is relocated by the loader at every start: acp-usage's
//! 36,000 pointers in read-only data (formatting tables, panic locations, vtables of every
//! dependency) were written, and the 580 KiB holding them copied, before `main`, and copied
//! again page by page after the guard's fork. That was the largest single part of what wrapping
//! an agent added to its `initialize` round trip (1 ms of 3.3 in `--scenario startup`). The
//! trade-off: the executable's own code and data are no longer placed at a random address (the
//! libraries, heap, stack and mappings still are). The musl release builds get the same from
//! `.cargo/config.toml` (`relocation-model=static`, which a build script cannot set).

// Cargo reads a build script's directives from its standard output.
#![allow(clippy::print_stdout)]

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
