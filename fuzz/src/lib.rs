//! What the fuzz targets share.

use tracer_analysis::recording::SYNC;

/// `data` with the checksum of every chunk made right (version 3 framing, from the file
/// header on): a mutated byte in a chunk would otherwise make nearly every input a
/// damaged chunk, which the reader skips, and the fuzzer would never reach the decoding
/// and the analysis behind the checksum.
pub fn seal(data: &[u8]) -> Vec<u8> {
    let mut out = data.to_vec();
    let mut at = 16;
    while at + 16 <= out.len() && out[at..at + 4] == SYNC {
        let tag = u32::from_le_bytes(out[at + 4..at + 8].try_into().unwrap());
        let len = u32::from_le_bytes(out[at + 8..at + 12].try_into().unwrap());
        let end = at + 16 + len as usize;
        if end > out.len() {
            break;
        }
        let mut h = crc32fast::Hasher::new();
        h.update(&tag.to_le_bytes());
        h.update(&len.to_le_bytes());
        h.update(&out[at + 16..end]);
        out[at + 12..at + 16].copy_from_slice(&h.finalize().to_le_bytes());
        at = end;
    }
    out
}
