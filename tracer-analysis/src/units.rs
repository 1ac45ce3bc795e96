//! How figures are written for people: nanoseconds as milliseconds, parts as percent.
//! One copy, so that the report, the profile, the metrics, the diagnosis and the CLI's
//! messages round alike. The JSON keeps nanoseconds; only shares and the diagnosis's
//! figures are rounded there, by these same functions.

/// Nanoseconds as milliseconds.
pub fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Milliseconds with three decimals (a nanosecond's precision no one reads), as the
/// text outputs write them.
pub fn ms_text(ns: u64) -> String {
    format!("{:.3}", ms(ns))
}

/// Milliseconds with one decimal and their unit, for the what-if's predictions (a model
/// whose figures mean nothing past a tenth of a millisecond); `ns` is fractional there.
pub fn ms_tenths(ns: f64) -> String {
    format!("{:.1} ms", ns / 1e6)
}

/// Milliseconds rounded to hundredths: the diagnosis's figures.
pub(crate) fn ms_hundredths(ns: u64) -> f64 {
    (ns as f64 / 1e4).round() / 100.0
}

/// `part` in percent of `whole`, rounded to hundredths; 0 of nothing.
pub(crate) fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        (part as f64 * 10000.0 / whole as f64).round() / 100.0
    }
}

/// The width of a table's name column: `at_least`, or the longest of `names` (demangled
/// C++ names with their parameters run long), so that the figures' columns stay aligned.
pub(crate) fn name_column<'a>(names: impl Iterator<Item = &'a str>, at_least: usize) -> usize {
    names
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(0)
        .max(at_least)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_round_as_the_outputs_show_them() {
        assert_eq!(ms_text(1_234_567), "1.235");
        assert_eq!(ms_hundredths(1_234_567), 1.23);
        assert_eq!(percent(1, 3), 33.33);
        assert_eq!(percent(5, 0), 0.0);
        assert_eq!(ms(2_500_000), 2.5);
        assert_eq!(ms_tenths(1_250_001.0), "1.3 ms");
    }
}
