//! The process's allocator (glibc malloc) held to what is in use.
//!
//! A 231-instance django run on the Docker backend grew to 165 MiB of
//! resident memory while heaptrack measured a heap peak of 36 MB: the rest
//! was freed memory glibc kept. Build contexts stream through 256 KiB
//! chunks and git2 reads whole blobs, on blocking threads whose arenas
//! each kept their high-water mark, and glibc's dynamic mmap threshold
//! moves such blocks from mmap (returned on free) into those arenas after
//! the first one is freed. Two settings bound that: a fixed mmap threshold
//! (large blocks always mapped, so freeing returns them) and
//! [`release`] after each image build (free pages of every arena given back).

/// Blocks of this size or more are mapped, not taken from an arena.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 128 * 1024;

/// Fix the mmap threshold (glibc raises it as mapped blocks are freed).
/// Call once, early; process-wide. A no-op off glibc.
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes malloc's parameters.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    }
}

/// Give the free pages of every malloc arena back to the system (after an
/// image build: the largest transient use). A no-op off glibc.
pub fn release() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}
