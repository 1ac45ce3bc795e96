//! What-if edits: scale the work of chosen procedures and recompute the critical path
//! on the edited graph. A factor applies to the procedure's inclusive time (its callees
//! too), so `PROC=0` is the online engine's zeroing of PROC; when several scaled
//! procedures are active on one arc (one calls the other) their factors multiply.

use super::cpm::Schedule;
use super::{ArcId, ArcKind, Graph};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ScaleError {
    #[error("--scale {0}: expected PROCEDURE=FACTOR")]
    Syntax(String),
    #[error("--scale {spec}: factor must be a number >= 0")]
    Factor { spec: String },
    #[error("--scale {spec}: no selected procedure {name} in the recording (it has: {known})")]
    Unknown {
        spec: String,
        name: String,
        known: String,
    },
}

/// One `PROCEDURE=FACTOR` edit.
#[derive(Clone, Debug, PartialEq)]
pub struct Scale {
    pub procedure: usize,
    pub factor: f64,
}

/// Parses `PROCEDURE=FACTOR` against the recording's procedure names (demangled), or
/// their symbols (by `ProcId`, as the names) as the binaries have them.
pub fn parse_scale(
    spec: &str,
    procedures: &[String],
    symbols: &[String],
) -> Result<Scale, ScaleError> {
    let (name, factor) = spec
        .rsplit_once('=')
        .ok_or_else(|| ScaleError::Syntax(spec.into()))?;
    let factor: f64 = factor
        .trim()
        .parse()
        .ok()
        .filter(|f: &f64| f.is_finite() && *f >= 0.0)
        .ok_or_else(|| ScaleError::Factor { spec: spec.into() })?;
    let procedure = procedures
        .iter()
        .position(|p| p == name.trim())
        .or_else(|| symbols.iter().position(|s| s == name.trim()))
        .ok_or_else(|| ScaleError::Unknown {
            spec: spec.into(),
            name: name.trim().into(),
            known: if procedures.is_empty() {
                "none; select procedures with tracer record --func".into()
            } else {
                procedures.join(", ")
            },
        })?;
    Ok(Scale { procedure, factor })
}

/// Arc weights after the edits.
pub struct ScaledWeights {
    /// Multiplier per context.
    by_context: Vec<f64>,
}

impl ScaledWeights {
    pub fn new(g: &Graph, scales: &[Scale]) -> Self {
        let by_context = g
            .contexts
            .iter()
            .map(|c| {
                scales
                    .iter()
                    .filter(|s| c.procedures.contains(&s.procedure))
                    .map(|s| s.factor)
                    .product()
            })
            .collect();
        ScaledWeights { by_context }
    }

    pub fn weight(&self, g: &Graph, id: ArcId) -> u64 {
        let a = g.arc(id);
        let f = self.by_context[a.context as usize];
        if f == 1.0 {
            a.weight
        } else {
            (a.weight as f64 * f).round() as u64
        }
    }

    pub fn schedule(&self, g: &Graph) -> Schedule {
        Schedule::with_weights(g, |id, _| self.weight(g, id))
    }
}

/// How much shorter a critical path of `length` gets if `class` took no time: a
/// selected procedure (its callees too, as [`ScaledWeights`] with factor 0), or with
/// `None` all the work outside every selected procedure. The online engine's zeroing;
/// the report and the exports both read it from here.
pub(crate) fn zeroing_gain(g: &Graph, class: Option<usize>, length: u64) -> u64 {
    let zeroed = match class {
        Some(procedure) => ScaledWeights::new(
            g,
            &[Scale {
                procedure,
                factor: 0.0,
            }],
        )
        .schedule(g),
        None => Schedule::with_weights(g, |_, a| {
            let outside = g.contexts[a.context as usize].procedures.is_empty();
            if a.kind == ArcKind::Program && outside {
                0
            } else {
                a.weight
            }
        }),
    };
    length - zeroed.length
}

/// What the critical path (of length `length`) gets shorter by when program arcs lose
/// some of their work: `lowered` by arc, never below 0 (a sampled function's time inside
/// the arcs, `graph::attribution`).
pub(crate) fn lowered_gain(
    g: &Graph,
    lowered: &rustc_hash::FxHashMap<ArcId, u64>,
    length: u64,
) -> u64 {
    let zeroed = Schedule::with_weights(g, |id, a| {
        a.weight
            .saturating_sub(lowered.get(&id).copied().unwrap_or(0))
    });
    length.saturating_sub(zeroed.length)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        let procs = vec!["stage_slow".to_string(), "a=b".to_string()];
        assert_eq!(
            parse_scale("stage_slow=0.5", &procs, &procs),
            Ok(Scale {
                procedure: 0,
                factor: 0.5
            })
        );
        assert_eq!(parse_scale("a=b=0", &procs, &procs).unwrap().procedure, 1);
        assert!(matches!(
            parse_scale("stage_slow", &procs, &procs),
            Err(ScaleError::Syntax(_))
        ));
        assert!(matches!(
            parse_scale("stage_slow=-1", &procs, &procs),
            Err(ScaleError::Factor { .. })
        ));
        let e = parse_scale("nope=0", &procs, &procs)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no selected procedure nope"), "{e}");
    }

    #[test]
    fn names_a_procedure_by_its_name_or_its_symbol() {
        let names = vec!["tools::solve".to_string(), "solve(int)".to_string()];
        let symbols = vec![
            "_ZN5tools5solve17h0123456789abcdefE".to_string(),
            "_Z5solvei".to_string(),
        ];
        for spec in ["solve(int)=0", "_Z5solvei=0"] {
            assert_eq!(parse_scale(spec, &names, &symbols).unwrap().procedure, 1);
        }
        let e = parse_scale("solve=0", &names, &symbols).unwrap_err();
        assert!(
            e.to_string().contains("it has: tools::solve, solve(int)"),
            "{e}"
        );
    }
}
