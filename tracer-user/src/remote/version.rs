//! Which tracers may talk: the same major.minor version (the protocol and the record
//! format change with them).

/// Why tracers of these versions may not work together, or None.
pub(super) fn version_mismatch(agent: &str, collector: &str) -> Option<String> {
    let major_minor = |v: &str| v.split('.').take(2).collect::<Vec<_>>().join(".");
    (major_minor(agent) != major_minor(collector)).then(|| {
        format!(
            "the agent runs tracer {agent}, the collector tracer {collector} (major.minor must match)"
        )
    })
}
