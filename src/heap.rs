//! Handing the allocator's free pages back to the system after a transient peak.
//!
//! glibc returns freed memory only from the top of each heap: what start-up frees below a
//! block still in use (the router and the OpenAPI document are built from thousands of small
//! allocations, most of them dropped once the routes are made) stays resident for the
//! process's life. On an idle server that was 2 MiB of its 7.8 MiB private memory.

/// Asks glibc to give every arena's free pages back (`malloc_trim(0)`): live allocations are
/// untouched. It walks and locks each arena in turn, so it belongs at a quiet moment (the end
/// of start-up), not on a request's path. Returns whether anything was given back. Elsewhere
/// (musl, other systems) it does nothing: those allocators return memory themselves or have
/// no such call.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)] // The crate's one exception (Cargo.toml denies unsafe code): an FFI call.
pub fn give_back() -> bool {
    // SAFETY: `malloc_trim` takes no pointer and touches only the allocator's own state,
    // under the same arena locks as every `malloc`/`free`; no Rust invariant depends on it.
    unsafe { libc::malloc_trim(0) == 1 }
}

/// See the glibc version above.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn give_back() -> bool {
    false
}

#[cfg(test)]
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod tests {
    /// This process's private resident memory (`RssAnon`), in KiB.
    fn private_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("RssAnon:"))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
            .unwrap()
    }

    #[test]
    fn memory_freed_below_a_live_block_goes_back_to_the_system() {
        // 128 MiB in 32 KiB blocks (below glibc's mmap threshold, so they come from a heap),
        // each written so its pages are resident; then all freed but every 64th, which keeps
        // glibc from returning any of it by shrinking the heap's top.
        let blocks: Vec<Vec<u8>> = (0..4096).map(|i| vec![i as u8 | 1; 32 * 1024]).collect();
        let kept: Vec<Vec<u8>> = blocks
            .into_iter()
            .enumerate()
            .filter_map(|(i, b)| (i % 64 == 63).then_some(b))
            .collect();
        let before = private_kib();
        assert!(super::give_back(), "glibc said it gave nothing back");
        let after = private_kib();
        // Other tests allocate meanwhile; what goes back here is ~126 MiB, far above their noise.
        assert!(
            before.saturating_sub(after) > 64 * 1024,
            "private memory went from {before} KiB to {after} KiB"
        );
        assert!(kept.iter().all(|b| b.iter().all(|&x| x & 1 == 1)));
    }
}
