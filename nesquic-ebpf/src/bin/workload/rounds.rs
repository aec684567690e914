//! Alternating-batch timing, for the workload's calibration modes: K kinds of call timed in
//! batches taken in turn, so drift on a noisy machine hits every kind alike.

/// Per round, the mean ns per call of each of the K kinds: `time_batch(k)` runs one batch of
/// `batch` calls of kind `k` and returns its ns; batches alternate until `calls` calls of each.
/// A first round warms up caches, sockets and the clock and is not returned.
pub fn alternating_rounds<const K: usize>(
    rounds: u64,
    calls: u64,
    batch: u64,
    mut time_batch: impl FnMut(usize) -> f64,
) -> Vec<[f64; K]> {
    let mut out = Vec::new();
    for round in 0..rounds + 1 {
        let mut ns = [0.0f64; K];
        let mut n = 0;
        while n < calls.max(batch) {
            for (k, total) in ns.iter_mut().enumerate() {
                *total += time_batch(k);
            }
            n += batch;
        }
        if round > 0 {
            out.push(ns.map(|total| total / n as f64));
        }
    }
    out
}
