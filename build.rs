//! Link options of the release binary (the one the Dockerfile ships); other builds are untouched.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("PROFILE") != "release" || var("CARGO_CFG_TARGET_OS") != "linux" {
        return;
    }
    if var("CARGO_CFG_TARGET_ENV") == "gnu" {
        // Relative relocations packed (DT_RELR, glibc ≥ 2.36: the image's Debian 12 has 2.36):
        // the binary stays position-independent (ASLR), and its ~100,000 relocations (2.3 MB,
        // read at every start and resident after it) take 27 KB.
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    if var("CARGO_CFG_TARGET_ARCH") == "x86_64" {
        // Identical functions and read-only data folded into one copy (the monomorphised
        // generics of the SDK's and serde's code repeat a lot): -1.6 MiB. Rust promises no
        // distinct addresses for either (rustc merges functions itself), so nothing can rely on
        // them. Needs lld: the toolchain's default linker on x86-64 Linux (elsewhere `cc`'s may
        // be GNU ld, which has no such option).
        println!("cargo:rustc-link-arg-bins=-Wl,--icf=all");
    }
}
