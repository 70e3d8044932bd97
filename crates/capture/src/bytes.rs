//! Bounds-checked integer reads of either byte order, for the ELF, note and perf.data
//! structures both sides take apart by hand: out of range (or past `usize::MAX`) is `None`,
//! never a panic.

fn array_at<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// The `u16` at `at`, big- or little-endian.
pub fn u16_at(b: &[u8], at: usize, big_endian: bool) -> Option<u16> {
    let a = array_at(b, at)?;
    Some(if big_endian {
        u16::from_be_bytes(a)
    } else {
        u16::from_le_bytes(a)
    })
}

/// The `u32` at `at`, big- or little-endian.
pub fn u32_at(b: &[u8], at: usize, big_endian: bool) -> Option<u32> {
    let a = array_at(b, at)?;
    Some(if big_endian {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    })
}

/// The `u64` at `at`, big- or little-endian.
pub fn u64_at(b: &[u8], at: usize, big_endian: bool) -> Option<u64> {
    let a = array_at(b, at)?;
    Some(if big_endian {
        u64::from_be_bytes(a)
    } else {
        u64::from_le_bytes(a)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both byte orders, at an offset, and the last whole value in the slice.
    #[test]
    fn reads_both_byte_orders() {
        let b = [0u8, 1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(u16_at(&b, 1, false), Some(0x0201));
        assert_eq!(u16_at(&b, 1, true), Some(0x0102));
        assert_eq!(u32_at(&b, 1, false), Some(0x0403_0201));
        assert_eq!(u32_at(&b, 1, true), Some(0x0102_0304));
        assert_eq!(u64_at(&b, 1, false), Some(0x0807_0605_0403_0201));
        assert_eq!(u64_at(&b, 1, true), Some(0x0102_0304_0506_0708));
        assert_eq!(u16_at(&b, 7, false), Some(0x0807));
    }

    /// Short slices and offsets near `usize::MAX` are `None`, not a panic.
    #[test]
    fn out_of_range_is_none() {
        let b = [0u8; 8];
        assert_eq!(u16_at(&b, 7, false), None);
        assert_eq!(u32_at(&b, 5, true), None);
        assert_eq!(u64_at(&b, 1, false), None);
        assert_eq!(u64_at(&[], 0, false), None);
        for at in [usize::MAX, usize::MAX - 1, usize::MAX - 7] {
            assert_eq!(u16_at(&b, at, false), None);
            assert_eq!(u32_at(&b, at, false), None);
            assert_eq!(u64_at(&b, at, true), None);
        }
    }
}
