//! The protobuf wire format written by hand, for the packets an export makes millions
//! of: building a prost struct per packet (strings and vectors allocated) and encoding
//! it (`encoded_len` walks every nested message once per level) was about a tenth of
//! the Perfetto export's samples. The bytes are the ones prost writes: fields in
//! ascending tag order, varints at their shortest, a set optional field written even
//! when it holds its default.

/// Wire types.
const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LEN: u32 = 2;

// Each function here is a few instructions, called per field of millions of packets:
// inlined (the profile showed them as calls, 14 % of the formatting thread's samples).

#[inline]
fn varint(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push(v as u8 | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

#[inline]
fn key(b: &mut Vec<u8>, field: u32, wire: u32) {
    varint(b, u64::from(field << 3 | wire));
}

/// A `uint32` or `uint64` field.
#[inline]
pub(crate) fn uint(b: &mut Vec<u8>, field: u32, v: u64) {
    key(b, field, VARINT);
    varint(b, v);
}

/// An `int32` or `int64` field: a negative value takes ten bytes, sign-extended.
#[inline]
pub(crate) fn int(b: &mut Vec<u8>, field: u32, v: i64) {
    key(b, field, VARINT);
    varint(b, v as u64);
}

#[inline]
pub(crate) fn fixed64(b: &mut Vec<u8>, field: u32, v: u64) {
    key(b, field, FIXED64);
    b.extend_from_slice(&v.to_le_bytes());
}

#[inline]
pub(crate) fn string(b: &mut Vec<u8>, field: u32, s: &str) {
    key(b, field, LEN);
    varint(b, s.len() as u64);
    b.extend_from_slice(s.as_bytes());
}

/// A nested message, its fields written by `body`. Its length goes before it, which is
/// known only after: one byte is kept for it, and the body moved when it needs more
/// (a body of 128 bytes or more; rare here).
#[inline]
pub(crate) fn message(b: &mut Vec<u8>, field: u32, body: impl FnOnce(&mut Vec<u8>)) {
    key(b, field, LEN);
    let at = b.len();
    b.push(0);
    body(b);
    let len = b.len() - at - 1;
    if len < 0x80 {
        b[at] = len as u8;
    } else {
        let mut prefix = Vec::with_capacity(10);
        varint(&mut prefix, len as u64);
        b.splice(at..at + 1, prefix);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shortest varints, and negative int32s as prost writes them (ten bytes).
    #[test]
    fn varints_as_prost_writes_them() {
        for v in [0u64, 1, 127, 128, 300, 1 << 40, u64::MAX] {
            let mut ours = Vec::new();
            uint(&mut ours, 8, v);
            let mut theirs = Vec::new();
            prost::encoding::uint64::encode(8, &v, &mut theirs);
            assert_eq!(ours, theirs, "{v}");
        }
        for v in [0i32, -1, 120, i32::MIN, i32::MAX] {
            let mut ours = Vec::new();
            int(&mut ours, 2, i64::from(v));
            let mut theirs = Vec::new();
            prost::encoding::int32::encode(2, &v, &mut theirs);
            assert_eq!(ours, theirs, "{v}");
        }
    }

    /// A nested message of 127, 128 and 20,000 bytes: its length's varint before it.
    #[test]
    fn long_messages_move_their_body() {
        for n in [125usize, 126, 20_000] {
            let text = "x".repeat(n);
            let mut ours = vec![7];
            message(&mut ours, 11, |b| string(b, 23, &text));
            let mut inner = Vec::new();
            prost::encoding::string::encode(23, &text, &mut inner);
            let mut theirs = vec![7];
            prost::encoding::bytes::encode(11, &inner, &mut theirs);
            assert_eq!(ours, theirs, "{n}");
        }
    }
}
