//! What a CPU was running when it wrote a record: the platform says it at write time
//! ([`crate::Platform::context`]) and every record keeps it in four bits of its
//! header, so readers show it truthfully whatever events were enabled.

/// Where a record was written. The values fit in three bits (see [`Context`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activity {
    /// The CPU's idle loop (thread context).
    Idle,
    /// The CPU's thread: the kernel's work on that CPU (on the boot CPU, the shell).
    Task,
    /// A hard interrupt (or exception) handler, `depth` handlers deep (1: not
    /// nested; kept up to 3, deeper nesting shows as 3).
    Irq {
        /// Handlers open on the CPU, this one included (1..=3).
        depth: u8,
    },
    /// A non-maskable interrupt, taken over thread context or over an interrupt
    /// handler (`in_irq`).
    Nmi {
        /// Whether an interrupt handler was running when the NMI arrived.
        in_irq: bool,
    },
    /// Not recorded: the record comes from a dump written before records kept their
    /// context.
    Unknown,
}

/// A record's context: an [`Activity`] and whether interrupts were disabled, packed
/// into four bits (bit 3: interrupts off; bits 0..3: the activity).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Context(u8);

const IRQS_OFF: u8 = 0b1000;
const UNKNOWN: u8 = 0b0111;

impl Context {
    /// Thread context, interrupts enabled: what a platform that cannot tell says.
    pub const TASK: Context = Context(1);
    /// The context of a record whose context was not recorded.
    pub const UNKNOWN: Context = Context(UNKNOWN);
    /// The bit of [`Context::bits`] set when interrupts were disabled; the bits below
    /// it are the activity's code, `Context::new(activity, false).bits()`.
    pub const IRQS_OFF_BIT: u8 = IRQS_OFF;

    /// The context of a record written by `activity`, with interrupts disabled or not.
    pub const fn new(activity: Activity, irqs_off: bool) -> Context {
        let code = match activity {
            Activity::Idle => 0,
            Activity::Task => 1,
            Activity::Irq { depth: 0 | 1 } => 2,
            Activity::Irq { depth: 2 } => 3,
            Activity::Irq { .. } => 4,
            Activity::Nmi { in_irq: false } => 5,
            Activity::Nmi { in_irq: true } => 6,
            Activity::Unknown => return Context::UNKNOWN,
        };
        Context(code | if irqs_off { IRQS_OFF } else { 0 })
    }

    /// The context kept in a header's four bits (higher bits are ignored).
    #[inline(always)]
    pub const fn from_bits(bits: u8) -> Context {
        Context(bits & 0xf)
    }

    /// The four bits a header keeps.
    #[inline(always)]
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// What the CPU was running.
    pub const fn activity(self) -> Activity {
        match self.0 & !IRQS_OFF {
            0 => Activity::Idle,
            1 => Activity::Task,
            2 => Activity::Irq { depth: 1 },
            3 => Activity::Irq { depth: 2 },
            4 => Activity::Irq { depth: 3 },
            5 => Activity::Nmi { in_irq: false },
            6 => Activity::Nmi { in_irq: true },
            _ => Activity::Unknown,
        }
    }

    /// Whether interrupts were disabled on the CPU (always false when unknown).
    pub const fn irqs_off(self) -> bool {
        self.0 & IRQS_OFF != 0 && self.0 != UNKNOWN | IRQS_OFF
    }

    /// Interrupt handlers open on the CPU, an NMI counting as one (0 in thread
    /// context).
    pub const fn depth(self) -> u8 {
        match self.activity() {
            Activity::Irq { depth } => depth,
            Activity::Nmi { in_irq } => 1 + in_irq as u8,
            Activity::Idle | Activity::Task | Activity::Unknown => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contexts_round_trip_through_four_bits() {
        let all = [
            Activity::Idle,
            Activity::Task,
            Activity::Irq { depth: 1 },
            Activity::Irq { depth: 2 },
            Activity::Irq { depth: 3 },
            Activity::Nmi { in_irq: false },
            Activity::Nmi { in_irq: true },
        ];
        for activity in all {
            for off in [false, true] {
                let c = Context::from_bits(Context::new(activity, off).bits());
                assert_eq!((c.activity(), c.irqs_off()), (activity, off));
                assert!(c.bits() < 16);
            }
        }
        assert_eq!(
            Context::new(Activity::Irq { depth: 9 }, true).activity(),
            Activity::Irq { depth: 3 }
        );
        assert_eq!(Context::new(Activity::Unknown, true), Context::UNKNOWN);
        assert_eq!(Context::from_bits(0xff).activity(), Activity::Unknown);
        assert!(!Context::from_bits(0xff).irqs_off());
        assert_eq!(Context::new(Activity::Nmi { in_irq: true }, true).depth(), 2);
        assert_eq!(Context::TASK.depth(), 0);
    }
}
