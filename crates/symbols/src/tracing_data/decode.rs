//! A RAW payload's fields to values, as `perf script` and libtraceevent print them: integers
//! by size and signedness, `char` arrays and `__data_loc char[]` as strings up to their NUL,
//! pointers in hex, other arrays as hex bytes.

use super::{Field, Format, Shape};

/// One decoded field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldValue {
    /// A signed integer.
    Signed(i64),
    /// An unsigned integer.
    Unsigned(u64),
    /// A pointer or an instruction address (`void *`, `unsigned long ip`).
    Pointer(u64),
    /// A `char` array or string, up to its NUL.
    Text(String),
    /// Any other bytes (other arrays, odd sizes).
    Bytes(Vec<u8>),
    /// The record is too short for the field (or its `__data_loc` points outside it).
    Missing,
}

impl std::fmt::Display for FieldValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FieldValue::Signed(v) => write!(f, "{v}"),
            FieldValue::Unsigned(v) => write!(f, "{v}"),
            FieldValue::Pointer(v) => write!(f, "{v:#x}"),
            FieldValue::Text(t) => f.write_str(t),
            FieldValue::Bytes(b) => f.write_str(&hex_bytes(b)),
            FieldValue::Missing => f.write_str("?"),
        }
    }
}

/// Bytes as lowercase hex, no separators.
pub(crate) fn hex_bytes(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// An unsigned integer of 1, 2, 4 or 8 bytes.
pub(crate) fn uint(b: &[u8], big_endian: bool) -> Option<u64> {
    let mut v = 0u64;
    if !matches!(b.len(), 1 | 2 | 4 | 8) {
        return None;
    }
    for i in 0..b.len() {
        let byte = if big_endian { b[i] } else { b[b.len() - 1 - i] };
        v = v << 8 | u64::from(byte);
    }
    Some(v)
}

impl Format {
    /// Every field of `raw` (a sample's RAW payload of this event), in format order.
    pub fn decode<'f>(&'f self, raw: &[u8], big_endian: bool) -> Vec<(&'f Field, FieldValue)> {
        self.fields
            .iter()
            .map(|f| (f, f.decode(raw, big_endian)))
            .collect()
    }
}

impl Field {
    /// The field `"name"` of the record `raw`.
    pub fn decode(&self, raw: &[u8], big_endian: bool) -> FieldValue {
        self.bytes(raw, big_endian)
            .map_or(FieldValue::Missing, |b| self.value(b, big_endian))
    }

    /// The field's bytes in `raw`: where its shape says.
    fn bytes<'r>(&self, raw: &'r [u8], big_endian: bool) -> Option<&'r [u8]> {
        let own = raw.get(self.offset..self.offset.checked_add(self.size)?);
        match self.shape {
            Shape::Scalar | Shape::Array(_) => own,
            Shape::ToEnd => raw.get(self.offset..),
            Shape::DataLoc | Shape::RelLoc => {
                let loc = uint(own?, big_endian)?;
                let (mut at, len) = ((loc & 0xffff) as usize, (loc >> 16 & 0xffff) as usize);
                if self.shape == Shape::RelLoc {
                    at += self.offset + self.size;
                }
                raw.get(at..at.checked_add(len)?)
            }
        }
    }

    fn is_text(&self) -> bool {
        self.shape != Shape::Scalar && self.type_text.ends_with("char")
    }

    fn is_pointer(&self) -> bool {
        self.type_text.contains('*') || matches!(self.name.as_str(), "ip" | "call_site")
    }

    fn value(&self, b: &[u8], big_endian: bool) -> FieldValue {
        if self.is_text() {
            let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
            return FieldValue::Text(String::from_utf8_lossy(&b[..end]).into_owned());
        }
        if self.shape != Shape::Scalar {
            return FieldValue::Bytes(b.to_vec());
        }
        let Some(v) = uint(b, big_endian) else {
            return FieldValue::Bytes(b.to_vec());
        };
        if self.is_pointer() {
            FieldValue::Pointer(v)
        } else if self.signed {
            let shift = 64 - 8 * b.len() as u32;
            FieldValue::Signed(((v << shift) as i64) >> shift)
        } else {
            FieldValue::Unsigned(v)
        }
    }
}
