//! Integer arrays for the page's data: LEB128 varints, base64-encoded.
//!
//! A 1M-sample capture embeds hundreds of thousands of stack ids and counts; as JSON numbers
//! they would take 6–8 bytes each and as much time to parse. Most are small (deltas, counts
//! of 1), so a varint takes one or two bytes, and the page decodes them in one pass
//! (`unpack` in page.js).

use super::escape::base64;

/// Unsigned integers, appended one by one, then [`Packed::finish`]ed into base64 text.
#[derive(Debug, Default, Clone)]
pub struct Packed {
    bytes: Vec<u8>,
    len: usize,
}

impl Packed {
    /// Appends `n` (LEB128: seven bits a byte, low first, high bit = more follows).
    pub fn push(&mut self, mut n: u64) {
        self.len += 1;
        while n >= 0x80 {
            self.bytes.push((n as u8 & 0x7f) | 0x80);
            n >>= 7;
        }
        self.bytes.push(n as u8);
    }

    /// Appends a signed value zigzag-encoded (-1 → 1, 1 → 2), for "none" markers of -1.
    pub fn push_signed(&mut self, n: i64) {
        self.push(((n << 1) ^ (n >> 63)) as u64);
    }

    /// How many values were pushed.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The base64 of the varint bytes.
    pub fn finish(&self) -> String {
        base64(&self.bytes)
    }
}

impl FromIterator<u64> for Packed {
    fn from_iter<I: IntoIterator<Item = u64>>(iter: I) -> Packed {
        let mut p = Packed::default();
        for n in iter {
            p.push(n);
        }
        p
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The varints of a packed array, as the page decodes them.
    pub(crate) fn decode(b64: &str) -> Vec<u64> {
        use base64::Engine as _;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        let mut out = Vec::new();
        let (mut n, mut shift) = (0u64, 0);
        for b in bytes {
            n |= u64::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                out.push(n);
                (n, shift) = (0, 0);
            }
        }
        out
    }

    /// Values of every byte length, zero and u53 max among them, come back unchanged.
    #[test]
    fn pack_varint_round_trips() {
        let values = [0, 1, 127, 128, 300, 16_383, 16_384, 1 << 40, (1 << 53) - 1];
        let packed: Packed = values.iter().copied().collect();
        assert_eq!(packed.len(), values.len());
        assert_eq!(decode(&packed.finish()), values);
    }

    /// Zigzag puts -1 at 1 and small positives at even numbers.
    #[test]
    fn pack_signed_zigzag_small() {
        let mut p = Packed::default();
        for n in [0, -1, 1, -2, 5] {
            p.push_signed(n);
        }
        assert_eq!(decode(&p.finish()), [0, 1, 2, 3, 10]);
    }
}
