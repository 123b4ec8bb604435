//! Time from starting QEMU (TCG) to the shell's first prompt, over several boots.
//! `cargo bench -p e2e --bench boot_time`

use boot::qemu::Config;
use e2e::Machine;

fn main() {
    const BOOTS: usize = 5;
    let mut times: Vec<_> = (0..BOOTS)
        .map(|_| {
            // `boot_with` boots each time (`boot` restores a saved machine).
            let mut machine = Machine::boot_with(Config::default());
            let time = machine.boot_time();
            machine.run_to_exit("poweroff");
            time
        })
        .collect();
    times.sort();
    println!(
        "boot to prompt (TCG, {BOOTS} boots): min {:?}, median {:?}, max {:?}",
        times[0],
        times[BOOTS / 2],
        times[BOOTS - 1]
    );
}
