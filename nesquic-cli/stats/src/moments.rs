//! Mean, sample variance and standard deviation.

/// Arithmetic mean; `None` when empty.
pub fn mean(x: &[f64]) -> Option<f64> {
    (!x.is_empty()).then(|| x.iter().sum::<f64>() / x.len() as f64)
}

/// Mean and sample variance (n - 1 in the denominator); `None` below two values.
pub fn mean_var(x: &[f64]) -> Option<(f64, f64)> {
    if x.len() < 2 {
        return None;
    }
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some((mean, var))
}

/// Sample standard deviation (n - 1 in the denominator); `None` below two values.
pub fn std_dev(x: &[f64]) -> Option<f64> {
    mean_var(x).map(|(_, var)| var.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn textbook_moments() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sum of squares 32, sample variance 32/7.
        let x = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert_eq!(mean(&x), Some(5.0));
        let (m, var) = mean_var(&x).expect("eight values");
        assert_eq!(m, 5.0);
        assert!((var - 32.0 / 7.0).abs() < 1e-12, "{var}");
        assert!((std_dev(&x).expect("eight values") - 2.138_089_935).abs() < 1e-9);
        assert_eq!((mean(&[]), mean_var(&[1.0]), std_dev(&[1.0])), (None, None, None));
    }
}
