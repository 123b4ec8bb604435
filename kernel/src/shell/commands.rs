//! The commands of the shell.

use super::{Command, CommandError};
use crate::arch::percpu;
use crate::arch::qemu::{self, ExitCode};
use crate::{clock, heap, memory, println, serial, smp, stress, timer};
use trace::Mode;
use x86_64::VirtAddr;

/// Every command, in the order `help` lists them.
pub static COMMANDS: &[Command] = &[
    Command { name: "help", usage: "", help: "list the commands", run: help },
    Command {
        name: "uptime",
        usage: "",
        help: "time since boot, timer ticks, heap use",
        run: uptime,
    },
    Command {
        name: "fault",
        usage: "page [ADDR] | gp | ud | de | bp | stack",
        help: "raise a CPU exception on purpose (bp is recoverable)",
        run: fault,
    },
    Command { name: "cpus", usage: "", help: "the CPUs online and their timer ticks", run: cpus },
    Command {
        name: "panic",
        usage: "[CPU]",
        help: "panic on purpose, here or on CPU (tests the panic path)",
        run: panic,
    },
    Command {
        name: "stress",
        usage: "[overwrite|discard|both] [MS]",
        help: "ring buffer stress test on every CPU (default: both modes, 1000 ms)",
        run: stress,
    },
    Command { name: "poweroff", usage: "", help: "leave QEMU with success", run: poweroff },
];

fn no_args(args: &[&str]) -> Result<(), CommandError> {
    if args.is_empty() { Ok(()) } else { Err(CommandError::Usage) }
}

fn help(args: &[&str]) -> Result<(), CommandError> {
    no_args(args)?;
    for command in COMMANDS {
        let synopsis = if command.usage.is_empty() {
            command.name.into()
        } else {
            alloc::format!("{} {}", command.name, command.usage)
        };
        println!("  {synopsis:<46} {}", command.help);
    }
    Ok(())
}

fn uptime(args: &[&str]) -> Result<(), CommandError> {
    no_args(args)?;
    let ns = clock::now_ns();
    let (used, size) = heap::usage();
    println!("up {}.{:09} s", ns / 1_000_000_000, ns % 1_000_000_000);
    println!("timer ticks: {} on cpu0 ({} Hz per CPU)", timer::ticks(0), timer::HZ);
    println!("tsc: {} kHz", clock::tsc_hz() / 1000);
    println!("heap: {used} of {size} bytes in use");
    println!("serial input dropped: {} bytes", serial::rx_dropped());
    Ok(())
}

fn cpus(args: &[&str]) -> Result<(), CommandError> {
    no_args(args)?;
    for cpu in 0..smp::online() {
        let apic_id = percpu::get(cpu).map_or(0, |c| c.apic_id());
        println!("cpu{cpu}: APIC id {apic_id}, {} timer ticks", timer::ticks(cpu));
    }
    Ok(())
}

fn panic(args: &[&str]) -> Result<(), CommandError> {
    match args {
        [] => panic!("deliberate panic from the shell"),
        [cpu] => {
            let cpu = cpu.parse().map_err(|_| CommandError::Usage)?;
            if cpu == percpu::index() {
                panic!("deliberate panic from the shell");
            }
            smp::call(cpu, smp::Request::Panic).map_err(CommandError::Failed)?;
            // The other CPU's panic stops this one; wait for it here.
            loop {
                core::hint::spin_loop();
            }
        }
        _ => Err(CommandError::Usage),
    }
}

fn stress(args: &[&str]) -> Result<(), CommandError> {
    let (modes, ms): (&[Mode], &str) = match args {
        [] => (&[Mode::Overwrite, Mode::Discard], "1000"),
        [ms] if ms.parse::<u64>().is_ok() => (&[Mode::Overwrite, Mode::Discard], ms),
        [mode] | [mode, _] => {
            let ms = args.get(1).copied().unwrap_or("1000");
            match *mode {
                "overwrite" => (&[Mode::Overwrite], ms),
                "discard" => (&[Mode::Discard], ms),
                "both" => (&[Mode::Overwrite, Mode::Discard], ms),
                _ => return Err(CommandError::Usage),
            }
        }
        _ => return Err(CommandError::Usage),
    };
    let ms: u64 = ms.parse().map_err(|_| CommandError::Usage)?;
    if ms == 0 || ms > stress::MAX_MS {
        return Err(CommandError::Failed("duration must be 1 to 10000 ms"));
    }
    for &mode in modes {
        stress::run(mode, ms).map_err(CommandError::Failed)?;
    }
    Ok(())
}

fn poweroff(args: &[&str]) -> Result<(), CommandError> {
    no_args(args)?;
    println!("powering off");
    qemu::exit(ExitCode::Success)
}

/// Default address for `fault page`: canonical, in the lower half, never mapped.
const UNMAPPED_ADDRESS: u64 = 0x0dea_dbee_f000;

fn fault(args: &[&str]) -> Result<(), CommandError> {
    match args {
        ["page"] => page_fault(UNMAPPED_ADDRESS),
        ["page", addr] => {
            let digits = addr.strip_prefix("0x").unwrap_or(addr);
            let addr = u64::from_str_radix(digits, 16).map_err(|_| CommandError::Usage)?;
            page_fault(addr)
        }
        ["gp"] => {
            println!("reading non-canonical address 0x8000000000000000");
            // SAFETY: deliberately faults: the address is non-canonical, so the CPU
            // raises #GP before any memory is read.
            unsafe { core::ptr::read_volatile(0x8000_0000_0000_0000 as *const u64) };
            Ok(())
        }
        ["ud"] => {
            println!("executing ud2");
            // SAFETY: deliberately raises #UD; the handler does not return.
            unsafe { core::arch::asm!("ud2") };
            Ok(())
        }
        ["de"] => {
            println!("dividing by zero");
            // SAFETY: deliberately raises #DE with a 64-bit `div` by zero; only
            // registers are touched.
            unsafe {
                core::arch::asm!("div {0}", in(reg) 0u64, inout("rax") 1u64 => _, inout("rdx") 0u64 => _)
            };
            Ok(())
        }
        ["bp"] => {
            println!("executing int3");
            x86_64::instructions::interrupts::int3();
            println!("back from the breakpoint handler");
            Ok(())
        }
        ["stack"] => {
            println!("overflowing the kernel stack");
            println!("unreachable: {}", recurse(0));
            Ok(())
        }
        _ => Err(CommandError::Usage),
    }
}

fn page_fault(addr: u64) -> Result<(), CommandError> {
    let addr =
        VirtAddr::try_new(addr).map_err(|_| CommandError::Failed("address is not canonical"))?;
    if memory::is_mapped(addr) {
        return Err(CommandError::Failed("address is mapped; it would not fault"));
    }
    println!("reading unmapped address {:#x}", addr.as_u64());
    // SAFETY: deliberately faults: the address was just checked to be unmapped, so the
    // read raises #PF and the handler does not return.
    unsafe { core::ptr::read_volatile(addr.as_ptr::<u64>()) };
    Ok(())
}

/// Recurses until the stack's guard page stops it (a double fault on the IST stack).
#[allow(unconditional_recursion, reason = "overflowing the stack is the point")]
fn recurse(depth: u64) -> u64 {
    let frame = [depth; 64];
    core::hint::black_box(&frame);
    recurse(depth + 1) + core::hint::black_box(frame[0])
}
