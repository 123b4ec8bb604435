//! The dump's byte-level codecs: LEB128 varints, zigzag, base64 and CRC-32.

/// Appends `v` as an unsigned LEB128 varint; returns the bytes written.
pub(crate) fn put_varint(out: &mut [u8], mut v: u64) -> Option<usize> {
    let mut n = 0;
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        *out.get_mut(n)? = byte | if v != 0 { 0x80 } else { 0 };
        n += 1;
        if v == 0 {
            return Some(n);
        }
    }
}

/// Reads an unsigned LEB128 varint off the front of `input`.
pub(crate) fn get_varint(input: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = input.split_first()?;
        *input = rest;
        value |= u64::from(byte & 0x7f).checked_shl(shift)?;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// Zigzag: small negative and positive numbers both become small unsigned ones.
pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
pub(crate) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Base64 (standard alphabet, `=` padding) of `input` into `out`; returns the length.
pub(crate) fn base64_encode(input: &[u8], out: &mut [u8]) -> usize {
    let mut n = 0;
    for chunk in input.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let v = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            out[n + i] =
                if i <= chunk.len() { ALPHABET[(v >> (18 - 6 * i)) as usize & 63] } else { b'=' };
        }
        n += 4;
    }
    n
}

/// Decodes base64 text; `None` if it is not valid base64.
pub(crate) fn base64_decode(text: &str) -> Option<alloc::vec::Vec<u8>> {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let value = |c: u8| ALPHABET.iter().position(|&a| a == c).map(|v| v as u32);
    let mut out = alloc::vec::Vec::with_capacity(bytes.len() / 4 * 3);
    for (i, quad) in bytes.chunks(4).enumerate() {
        let last = i == bytes.len() / 4 - 1;
        let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return None;
        }
        let mut v = 0u32;
        for &c in &quad[..4 - pad] {
            v = v << 6 | value(c)?;
        }
        v <<= 6 * pad as u32;
        let decoded = [(v >> 16) as u8, (v >> 8) as u8, v as u8];
        out.extend_from_slice(&decoded[..3 - pad]);
    }
    Some(out)
}

/// CRC-32 (IEEE 802.3, as zlib computes it).
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xedb8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    }

    #[test]
    fn varints_and_zigzag_round_trip() {
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut buf = [0u8; 10];
            let n = put_varint(&mut buf, v).unwrap();
            let mut input = &buf[..n];
            assert_eq!(get_varint(&mut input), Some(v));
            assert!(input.is_empty());
        }
        for v in [0i64, -1, 1, -64, 64, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!(put_varint(&mut [0u8; 1], 300), None, "too small a buffer is refused");
        assert_eq!(get_varint(&mut &[0x80u8][..]), None, "a truncated varint is refused");
    }

    #[test]
    fn base64_round_trips_every_length() {
        for len in 0..20 {
            let input: alloc::vec::Vec<u8> = (0..len as u8).map(|b| b.wrapping_mul(37)).collect();
            let mut out = [0u8; 32];
            let n = base64_encode(&input, &mut out);
            let text = core::str::from_utf8(&out[..n]).unwrap();
            assert_eq!(base64_decode(text).as_deref(), Some(&input[..]));
        }
        assert_eq!(base64_decode("A==="), None);
        assert_eq!(base64_decode("AB=C"), None);
        assert_eq!(base64_decode("ab!d"), None);
    }
}
