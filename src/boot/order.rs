//! The order in which `bootbench run` boots several kernels. Interleaved
//! (A B A B ...) is the default, so slow drift of the host cannot pass for
//! a kernel difference; random runs each round's kernels in a fresh random
//! order (blocked randomisation: every kernel still boots once per round),
//! which also breaks any periodic host effect; sequential (A A ... B B ...)
//! is there for comparison with old habits and is the least robust.

use rand::seq::SliceRandom;
use rand::SeedableRng;

/// How boots of several kernels are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BootOrder {
    /// A B A B ...
    Interleaved,
    /// All boots of A, then all of B.
    Sequential,
    /// Each round a random permutation of the kernels.
    Random,
}

/// The schedule: (round, kernel index) pairs in boot order. `seed` is used
/// by `Random` only.
pub fn schedule(order: BootOrder, kernels: usize, rounds: u32, seed: u64) -> Vec<(u32, usize)> {
    match order {
        BootOrder::Interleaved => (0..rounds).flat_map(|r| (0..kernels).map(move |k| (r, k))).collect(),
        BootOrder::Sequential => (0..kernels).flat_map(|k| (0..rounds).map(move |r| (r, k))).collect(),
        BootOrder::Random => {
            let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
            let mut out = Vec::new();
            for r in 0..rounds {
                let mut ks: Vec<usize> = (0..kernels).collect();
                ks.shuffle(&mut rng);
                out.extend(ks.into_iter().map(|k| (r, k)));
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders() {
        assert_eq!(schedule(BootOrder::Interleaved, 2, 2, 0), vec![(0, 0), (0, 1), (1, 0), (1, 1)]);
        assert_eq!(schedule(BootOrder::Sequential, 2, 2, 0), vec![(0, 0), (1, 0), (0, 1), (1, 1)]);
        let r = schedule(BootOrder::Random, 3, 50, 9);
        assert_eq!(r.len(), 150);
        // Blocked: each round holds every kernel once.
        for round in 0..50u32 {
            let mut ks: Vec<usize> = r.iter().filter(|(x, _)| *x == round).map(|(_, k)| *k).collect();
            ks.sort();
            assert_eq!(ks, vec![0, 1, 2]);
        }
        // Random enough that the kernels do not always come in the same order.
        assert!(r.chunks(3).any(|c| c[0].1 != 0) && r.chunks(3).any(|c| c[0].1 == 0));
        assert_eq!(schedule(BootOrder::Random, 3, 50, 9), r, "the seed fixes the order");
    }
}
