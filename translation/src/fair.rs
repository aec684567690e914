//! Fair polling: a connection table or a connection's streams are visited starting one further
//! along on every turn, so none is always served first when the batch or the send window fills.

/// Where the next visit starts.
#[derive(Debug, Default, Clone, Copy)]
pub struct Rotation(usize);

impl Rotation {
    /// Indices `0..n` starting one further along than the previous call's.
    pub fn order(&mut self, n: usize) -> impl Iterator<Item = usize> {
        let start = if n == 0 { 0 } else { self.0 % n };
        self.0 = self.0.wrapping_add(1);
        (start..n).chain(0..start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_index_once_and_a_new_first_each_time() {
        let mut r = Rotation::default();
        assert_eq!(r.order(3).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(r.order(3).collect::<Vec<_>>(), [1, 2, 0]);
        assert_eq!(r.order(3).collect::<Vec<_>>(), [2, 0, 1]);
        assert_eq!(r.order(0).count(), 0);
        assert_eq!(r.order(2).collect::<Vec<_>>(), [0, 1]);
    }
}
