//! The record format: one 64-bit header word, then the payload in 64-bit words.
//!
//! ```text
//!  63                          32 31     28 27            12 11          0
//! +------------------------------+---------+----------------+------------+
//! | timestamp, low 32 bits (ns)  | ctx (4) |  event id (16) | length (12)|
//! +------------------------------+---------+----------------+------------+
//! | payload bytes 0..8 (little endian)                                   |
//! | ...  ceil(length / 8) words, the last one zero-padded                |
//! ```
//!
//! `ctx` is the writer's [`Context`] (thread, interrupt, NMI; interrupts off).
//! The high bits of the timestamp (`ts >> 32`, "hi") are not stored per record: a
//! ring carries them in *anchor* records (id [`ANCHOR_ID`], payload = the full 64-bit
//! timestamp), written before the first record whose hi differs from the previous
//! anchor's, i.e. at most once per 2^32 ns (4.3 s), and in the tail word, so a reader
//! starting at the oldest record knows its hi. See DESIGN.md.

use crate::context::Context;

/// Bits of the payload length field.
pub(crate) const LEN_BITS: u32 = 12;
/// Bits of the event id field.
pub(crate) const ID_BITS: u32 = 16;
/// Bits of the context field.
pub(crate) const CTX_BITS: u32 = 4;
/// Bits of the timestamp kept in the header.
pub(crate) const TS_BITS: u32 = 32;
/// Where the timestamp's bits start.
const TS_SHIFT: u32 = LEN_BITS + ID_BITS + CTX_BITS;

/// Largest payload of one record, in bytes.
pub const MAX_PAYLOAD: usize = (1 << LEN_BITS) - 1;
/// Reserved id: an anchor record carrying the full timestamp.
pub(crate) const ANCHOR_ID: u16 = 0xffff;
/// Reserved id: a record abandoned by its writer (reserved, never committed).
pub(crate) const PAD_ID: u16 = 0xfffe;
/// Largest event id a caller may use.
pub const MAX_EVENT_ID: u16 = 0xfffd;

/// Words taken by an anchor record (header + full timestamp).
pub(crate) const ANCHOR_WORDS: u64 = 2;

/// Bits of a ring position kept in the tail word.
pub(crate) const POS_BITS: u32 = 36;
const POS_MASK: u64 = (1 << POS_BITS) - 1;
/// Bits of hi kept in the tail word (64 - 36 = 28; timestamps below 2^60 ns).
const HI_MASK: u64 = (1 << (64 - POS_BITS)) - 1;

/// What a writer says of its record in the header: the event id and its context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tag {
    /// Event id (or a reserved id).
    pub(crate) id: u16,
    /// The writer's context.
    pub(crate) ctx: Context,
}

/// Builds a header word (the timestamp's bits above [`TS_BITS`] fall off).
#[inline(always)]
pub(crate) const fn header(tag: Tag, len: usize, ts: u64) -> u64 {
    (len as u64)
        | ((tag.id as u64) << LEN_BITS)
        | ((tag.ctx.bits() as u64) << (LEN_BITS + ID_BITS))
        | (ts << TS_SHIFT)
}

/// A decoded header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    /// Payload length in bytes.
    pub(crate) len: usize,
    /// Event id (or a reserved id).
    pub(crate) id: u16,
    /// The writer's context.
    pub(crate) ctx: Context,
    /// Low [`TS_BITS`] of the timestamp.
    pub(crate) ts_lo: u64,
}

impl Header {
    /// Splits a header word into its fields.
    #[inline(always)]
    pub(crate) const fn decode(word: u64) -> Header {
        Header {
            len: (word & ((1 << LEN_BITS) - 1)) as usize,
            id: ((word >> LEN_BITS) & ((1 << ID_BITS) - 1)) as u16,
            ctx: Context::from_bits((word >> (LEN_BITS + ID_BITS)) as u8),
            ts_lo: word >> TS_SHIFT,
        }
    }

    /// Words the whole record takes (header included).
    #[inline(always)]
    pub(crate) const fn words(&self) -> u64 {
        record_words(self.len)
    }
}

/// Words taken by a record with a payload of `len` bytes.
#[inline(always)]
pub(crate) const fn record_words(len: usize) -> u64 {
    // 1 + ceil(len / 8), in three instructions: the reclaim walk chains these.
    (len as u64 + 15) >> 3
}

/// The high part of a timestamp, as kept in the tail word.
#[inline(always)]
pub(crate) const fn ts_hi(ts: u64) -> u64 {
    (ts >> TS_BITS) & HI_MASK
}

/// Rebuilds a full timestamp from hi and a header's low bits.
#[inline(always)]
pub(crate) const fn ts_join(hi: u64, lo: u64) -> u64 {
    (hi << TS_BITS) | lo
}

/// Packs the tail word: the position of the oldest record (mod 2^36) and the hi in
/// effect there (that of the last anchor before it).
#[inline(always)]
pub(crate) const fn pack_tail(pos: u64, hi: u64) -> u64 {
    (pos & POS_MASK) | ((hi & HI_MASK) << POS_BITS)
}

/// Unpacks a tail word into (full position, hi), using `near`, a full position known
/// to be within 2^35 words of the tail, to restore the position's high bits.
#[inline(always)]
pub(crate) const fn unpack_tail(near: u64, tail: u64) -> (u64, u64) {
    let diff = (tail.wrapping_sub(near)) & POS_MASK;
    // Sign-extend the 36-bit difference.
    let diff = ((diff << (64 - POS_BITS)) as i64 >> (64 - POS_BITS)) as u64;
    (near.wrapping_add(diff), tail >> POS_BITS)
}

/// Operating mode of a buffer set when a ring is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Flight recorder: the oldest records are reclaimed and counted as overrun.
    Overwrite,
    /// Producer/consumer: the new record is dropped and counted as dropped.
    Discard,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips() {
        let ctx = Context::from_bits(0b1011);
        let w = header(Tag { id: 0x1234, ctx }, 4095, (1 << 32) - 1);
        assert_eq!(Header::decode(w), Header { len: 4095, id: 0x1234, ctx, ts_lo: (1 << 32) - 1 });
        let w = header(Tag { id: ANCHOR_ID, ctx: Context::TASK }, 8, (7 << 32) + 5);
        assert_eq!(
            Header::decode(w),
            Header { len: 8, id: ANCHOR_ID, ctx: Context::TASK, ts_lo: 5 }
        );
        assert_eq!(Header::decode(w).words(), 2);
        assert_eq!(record_words(0), 1);
        assert_eq!(record_words(16), 3);
        assert_eq!(record_words(17), 4);
    }

    #[test]
    fn timestamps_split_and_join() {
        let ts = 0x0abc_def0_1234_5678u64;
        let lo = Header::decode(header(Tag { id: 1, ctx: Context::TASK }, 0, ts)).ts_lo;
        assert_eq!(ts_join(ts_hi(ts), lo), ts);
    }

    #[test]
    fn tail_positions_survive_40_bit_wrap() {
        let near = (1u64 << 36) + 10; // just past a wrap of the 36-bit field
        for pos in [near - 100, near, near + 100, (1 << 36) - 3] {
            let t = pack_tail(pos, 0x0fab_cdef);
            assert_eq!(unpack_tail(near, t), (pos, 0x0fab_cdef));
        }
    }
}
