//! Reachability for the pairs cheap facts could not decide: is `u` an ancestor of `v`?
//! Answered with bitsets in column chunks (64 × W candidate ancestors per pass, one pass over
//! the topological range the chunk can reach), so memory stays at O(n·W) words per thread
//! whatever the plan's size.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::pairs::Candidates;
use crate::graph::Dag;

/// Undecided pairs grouped by their earlier task `u`: `(v, index into the candidates)`.
pub(super) struct Partners {
    offsets: Vec<usize>,
    pub(super) pairs: Vec<(u32, u32)>,
}

impl Partners {
    /// Groups the parts' undecided `(u, v, k)` triples by `u` (a counting sort), with `k`
    /// made global (`bases[p]` is part p's first candidate index).
    pub(super) fn group(n: usize, parts: &[Candidates], bases: &[usize]) -> Self {
        let mut offsets = vec![0usize; n + 1];
        for part in parts {
            for &(u, _, _) in &part.pending {
                offsets[u as usize + 1] += 1;
            }
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        let mut cursor = offsets.clone();
        let mut pairs = vec![(0u32, 0u32); offsets[n]];
        for (part, &base) in parts.iter().zip(bases) {
            for &(u, v, k) in &part.pending {
                pairs[cursor[u as usize]] = (v, (base + k as usize) as u32);
                cursor[u as usize] += 1;
            }
        }
        Partners { offsets, pairs }
    }

    fn of(&self, u: usize) -> &[(u32, u32)] {
        &self.pairs[self.offsets[u]..self.offsets[u + 1]]
    }
}

/// For every undecided pair `(v, k)` of `u`, decides whether `u` is an ancestor of `v`, and
/// marks `conflict[k]` when it is not. Chunks of columns are independent, so they are shared
/// out among threads, each with its own bitset buffer.
pub(super) fn resolve(dag: &Dag, partners: &Partners, conflict: &mut [bool], words: usize) {
    let n = dag.len();
    let mut columns: Vec<u32> = (0..n as u32)
        .filter(|&u| !partners.of(u as usize).is_empty())
        .collect();
    if columns.is_empty() {
        return;
    }
    columns.sort_unstable_by_key(|&u| dag.topo_pos(u as usize));
    let chunks: Vec<&[u32]> = columns.chunks(words * 64).collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |p| p.get().min(8))
        .min(chunks.len());
    let found: Vec<u32> = if threads < 2 {
        let mut scratch = Scratch::new(n);
        chunks
            .iter()
            .flat_map(|c| scratch.chunk(dag, partners, c, words))
            .collect()
    } else {
        let next = AtomicUsize::new(0);
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let mut scratch = Scratch::new(n);
                        let mut found = Vec::new();
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some(chunk) = chunks.get(i) else { break };
                            found.extend(scratch.chunk(dag, partners, chunk, words));
                        }
                        found
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("reachability does not panic"))
                .collect()
        })
    };
    for k in found {
        conflict[k as usize] = true;
    }
}

/// One thread's working memory.
struct Scratch {
    col_of: Vec<u32>,
    bits: Vec<u64>,
}

impl Scratch {
    fn new(n: usize) -> Self {
        Scratch {
            col_of: vec![u32::MAX; n],
            bits: Vec::new(),
        }
    }

    /// The candidate indices of this chunk's pairs that are not ordered.
    fn chunk(&mut self, dag: &Dag, partners: &Partners, chunk: &[u32], words: usize) -> Vec<u32> {
        for (c, &u) in chunk.iter().enumerate() {
            self.col_of[u as usize] = c as u32;
        }
        let start = dag.topo_pos(chunk[0] as usize);
        let end = chunk
            .iter()
            .flat_map(|&u| partners.of(u as usize).iter())
            .map(|&(v, _)| dag.topo_pos(v as usize))
            .max()
            .unwrap_or(start);
        let bits = &mut self.bits;
        bits.clear();
        bits.resize((end - start + 1) * words, 0);
        // Row x holds the chunk's columns that are x itself or an ancestor of x.
        for (offset, &x) in dag.topo()[start..=end].iter().enumerate() {
            let x = x as usize;
            let row = offset * words;
            for &d in dag.deps(x) {
                let dp = dag.topo_pos(d as usize);
                if dp < start {
                    continue;
                }
                let drow = (dp - start) * words;
                let (lo, hi) = bits.split_at_mut(row);
                for (dst, src) in hi[..words].iter_mut().zip(&lo[drow..drow + words]) {
                    *dst |= *src;
                }
            }
            let c = self.col_of[x];
            if c != u32::MAX {
                bits[row + (c as usize) / 64] |= 1u64 << (c % 64);
            }
        }
        let mut found = Vec::new();
        for &u in chunk {
            let c = self.col_of[u as usize] as usize;
            for &(v, k) in partners.of(u as usize) {
                let row = (dag.topo_pos(v as usize) - start) * words;
                if bits[row + c / 64] & (1u64 << (c % 64)) == 0 {
                    found.push(k);
                }
            }
        }
        for &u in chunk {
            self.col_of[u as usize] = u32::MAX;
        }
        found
    }
}
