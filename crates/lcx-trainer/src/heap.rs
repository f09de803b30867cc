//! Keeps memory the trainer frees for its next iteration instead of
//! handing it back to the kernel.
//!
//! Every iteration allocates the same large, short-lived buffers: the
//! traversal's per-game sample buffers, the tens of MB of samples they are
//! gathered into, the kernel's packed weights. glibc serves those from
//! `mmap` (or trims them off the top of its heaps when freed), so each
//! iteration faults them in afresh, one zeroed 4 KB page at a time. On the
//! scaled default config, gathering the samples took 18-34 ms and packing
//! the weights 4-12 ms of a 0.3 s traversal phase, both single-threaded.
//! Raising glibc's mmap and trim thresholds keeps the pages in the heap for
//! reuse; the resident size stays at the largest iteration's, which the
//! trainer needs anyway. `run.keep_freed_memory` (default `true`) turns it
//! on when a trainer is built; `experiments/keep-freed-memory.toml`
//! measures it.

/// glibc's largest mmap threshold on 64-bit targets (`HEAP_MAX_SIZE / 2`);
/// larger allocations are always mapped.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 32 << 20;

/// Raises glibc's mmap threshold to its maximum and stops it from trimming
/// freed memory off its heaps. Process-wide and idempotent; it applies to
/// allocations and frees from then on, so call it before the buffers it is
/// meant for exist. Returns whether both settings took (false off glibc).
pub fn keep_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes allocator parameters; both values
        // are within the ranges glibc accepts (it returns 0 otherwise).
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
                && libc::mallopt(libc::M_TRIM_THRESHOLD, libc::c_int::MAX) == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    false
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    /// Minor page faults of the calling thread so far.
    fn minor_faults() -> i64 {
        // SAFETY: getrusage fills the struct it is given.
        unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            assert_eq!(libc::getrusage(libc::RUSAGE_THREAD, &mut usage), 0);
            usage.ru_minflt
        }
    }

    /// Allocates `bytes`, writes every page, frees them.
    fn touch(bytes: usize) {
        let v = vec![1u8; bytes];
        std::hint::black_box(&v);
    }

    #[test]
    fn a_freed_buffer_is_reused_without_faulting_its_pages_in_again() {
        assert!(keep_freed_memory());
        // 16 MB, like the scaled default's gathered samples: 4096 pages.
        let bytes = 16 << 20;
        touch(bytes);
        let before = minor_faults();
        for _ in 0..3 {
            touch(bytes);
        }
        let faults = minor_faults() - before;
        assert!(
            faults < 512,
            "{faults} page faults for three reused 16 MB buffers"
        );
    }
}
