//! The one stable hash: FNV-1a, 64 bits. What is named or keyed with it — a repository's
//! worktree folder, a long-run checkpoint past its length, a review's rejection identity —
//! must not change between runs, builds or machines, which `std`'s hashers do not promise.

/// FNV-1a, 64 bits, of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}
