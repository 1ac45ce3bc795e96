//! Field offsets of the classic tracepoints we use (futex), read from tracefs: they
//! differ between kernel versions (e.g. sched_process_fork switched to __data_loc comm
//! fields in 6.x).

use std::path::Path;

use tracer_common::ProbeConfig;

use super::{ProbeError, TracefsError};

const ROOTS: &[&str] = &["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

fn events_root() -> Result<&'static str, ProbeError> {
    if let Some(root) = ROOTS.iter().find(|r| Path::new(r).join("events").is_dir()) {
        return Ok(root);
    }
    // tracefs is not mounted: mount it where the kernel expects it.
    let status = std::process::Command::new("mount")
        .args(["-t", "tracefs", "nodev", ROOTS[0]])
        .status();
    if matches!(status, Ok(s) if s.success()) && Path::new(ROOTS[0]).join("events").is_dir() {
        return Ok(ROOTS[0]);
    }
    Err(TracefsError::NotMounted.into())
}

/// Offset of `field` in the tracepoint `group/name`.
pub(crate) fn field_offset(group: &str, name: &str, field: &str) -> Result<u32, ProbeError> {
    let path = Path::new(events_root()?)
        .join("events")
        .join(group)
        .join(name)
        .join("format");
    let text = std::fs::read_to_string(&path).map_err(|source| TracefsError::Read {
        path: path.clone(),
        source,
    })?;
    let offset = parse_offset(&text, field).ok_or_else(|| TracefsError::NoField {
        group: group.to_string(),
        name: name.to_string(),
        field: field.to_string(),
    })?;
    Ok(offset)
}

fn parse_offset(format: &str, field: &str) -> Option<u32> {
    for line in format.lines() {
        let line = line.trim();
        let Some(decl) = line.strip_prefix("field:") else {
            continue;
        };
        let decl = decl.split(';').next()?.trim();
        // The name is the last word, possibly followed by [N].
        let last = decl
            .rsplit(|c: char| c.is_whitespace() || c == '*')
            .next()?;
        let name = last.split('[').next()?;
        if name == field {
            let off = line.split("offset:").nth(1)?.split(';').next()?.trim();
            return off.parse().ok();
        }
    }
    None
}

/// The futex tracepoints' field offsets, in a config that is otherwise default.
pub(crate) fn futex_offsets() -> Result<ProbeConfig, ProbeError> {
    Ok(ProbeConfig {
        futex_uaddr: field_offset("syscalls", "sys_enter_futex", "uaddr")?,
        futex_op: field_offset("syscalls", "sys_enter_futex", "op")?,
        futex_val: field_offset("syscalls", "sys_enter_futex", "val")?,
        futex_ret: field_offset("syscalls", "sys_exit_futex", "ret")?,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_format_lines() {
        let f = "\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
                 \tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
                 \tfield:u32 * uaddr;\toffset:16;\tsize:8;\tsigned:0;\n\
                 \tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;\n";
        assert_eq!(parse_offset(f, "prev_pid"), Some(24));
        assert_eq!(parse_offset(f, "prev_comm"), Some(8));
        assert_eq!(parse_offset(f, "uaddr"), Some(16));
        assert_eq!(parse_offset(f, "filename"), Some(8));
        assert_eq!(parse_offset(f, "next_pid"), None);
    }
}
