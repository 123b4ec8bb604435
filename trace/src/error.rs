//! Typed errors: API misuse never panics.

use core::fmt;

/// Why a control operation (create, resize, clear, read, swap) failed. Nothing changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// A buffer of zero bytes, or zero CPUs, was requested, or lent words (a region's
    /// rings among them) too few for a ring (8 words, 64 bytes).
    ZeroSize,
    /// The requested size exceeds what a ring can address (2^37 bytes per CPU).
    TooBig,
    /// The allocator could not provide the memory.
    NoMemory,
    /// The operation needs recording off (resize, clear of the live set).
    Recording,
    /// Another reader or control operation holds what this one needs.
    Busy,
    /// The CPU index is not below the buffer's CPU count.
    BadCpu,
    /// A snapshot operation needs a spare buffer set, and there is none.
    NoSpare,
    /// The operation waits (for other CPUs, or for a lock that code waiting for them
    /// holds), and the caller may not: it runs in an interrupt, with interrupts off,
    /// or inside a writer on its CPU (it would wait for itself).
    WouldDeadlock,
    /// A ring's structure is inconsistent: that ring takes no more writes until it
    /// is cleared (the others go on).
    Corrupt,
    /// The set's rings live in lent memory of a fixed size: they cannot be resized
    /// nor given a snapshot spare.
    Fixed,
    /// The persistent region does not hold the saved trace given to restore (another
    /// region's, or this one's before it was written again).
    NotSaved,
    /// Lent words whose count is not a power of two: a ring's length must be.
    NotPowerOfTwo,
    /// The recorder was replaced by its instance (resized, its clock or snapshot
    /// changed): take the instance's current one.
    Replaced,
    /// Lent words that overlap words another ring is built over: two rings over the
    /// same words would write over each other's records, uncounted.
    Lent,
}

/// Why a write recorded nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteError {
    /// Recording is off for this buffer set: nothing was attempted or counted.
    Off,
    /// The event was counted as dropped (discard mode full, or commit overrun).
    Dropped,
    /// The payload is larger than a record of this ring can hold.
    TooLarge,
    /// The event id is one of the ids reserved by the ring format.
    ReservedId,
    /// The platform reported a CPU index not below the buffer's CPU count.
    BadCpu,
    /// The ring was found corrupt earlier; it takes no more writes.
    Corrupt,
    /// An instance's buffer took no record of a marker: its recording is off, the
    /// CPU is outside its cpumask, or the ring refused it (counted there).
    NotTaken,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::ZeroSize => "buffer too small (no bytes, no CPUs, or under a ring's 64 bytes)",
            Error::TooBig => "buffer too big",
            Error::NoMemory => "out of memory",
            Error::Recording => "recording must be off",
            Error::Busy => "busy",
            Error::BadCpu => "no such CPU",
            Error::NoSpare => "no spare buffer allocated",
            Error::WouldDeadlock => {
                "needs a context that may wait (thread context, interrupts on, not inside a writer)"
            }
            Error::Corrupt => "a ring is corrupt: it takes no more writes until it is cleared",
            Error::Fixed => {
                "the buffer lives in reserved memory: its size is fixed, and it has no snapshot"
            }
            Error::NotSaved => "the region does not hold that saved trace (validate it again)",
            Error::NotPowerOfTwo => "a ring's words must be a power of two",
            Error::Replaced => {
                "the instance has replaced this recorder (resized, or its clock or snapshot changed)"
            }
            Error::Lent => "those words are lent to another ring already (a ring's are its own)",
        })
    }
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WriteError::Off => "recording is off",
            WriteError::Dropped => "event dropped",
            WriteError::TooLarge => "record too large for the ring",
            WriteError::ReservedId => "reserved event id",
            WriteError::BadCpu => "no such CPU",
            WriteError::Corrupt => "ring buffer corrupt",
            WriteError::NotTaken => "the buffer took no record",
        })
    }
}

impl core::error::Error for Error {}
impl core::error::Error for WriteError {}
