//! `--pin`: each local LUT process on a CPU of its own. On a small machine the scheduler moves
//! the two sides between CPUs and sometimes onto one, which shows up as round-to-round spread;
//! pinned, benchmark rounds scatter less (measured in docs/benchmarks.md).

use std::fmt;

pub use nesquic_record::run::PinnedCpus;

use crate::process::Role;
use crate::EngineError;

/// The CPU `role` runs on under `pins` (none for roles other than server and client).
pub fn cpu_of(pins: &PinnedCpus, role: Role) -> Option<usize> {
    match role {
        Role::Server => Some(pins.server),
        Role::Client => Some(pins.client),
        Role::Process => None,
    }
}

/// Parses `SERVER,CLIENT` (CPU numbers, e.g. `0,1`).
pub fn parse(text: &str) -> Result<PinnedCpus, String> {
    let cpus: Vec<&str> = text.split(',').map(str::trim).collect();
    let [server, client] = cpus[..] else {
        return Err(format!("{text:?}: --pin takes two CPU numbers, the server's then the client's (e.g. 0,1)"));
    };
    let number = |s: &str| s.parse::<usize>().map_err(|_| format!("{s:?} in --pin {text:?} is not a CPU number"));
    Ok(PinnedCpus { server: number(server)?, client: number(client)? })
}

/// Refuses CPUs this process may not run on (offline, or outside its cgroup's or its own
/// affinity mask): the LUT would fail to start on them.
pub fn check(pins: &PinnedCpus) -> Result<(), EngineError> {
    let allowed =
        allowed_cpus().map_err(|e| EngineError::msg(format!("--pin: cannot read this process's CPUs: {e}")))?;
    for (role, cpu) in [("server", pins.server), ("client", pins.client)] {
        if !allowed.contains(&cpu) {
            return Err(EngineError::msg(format!(
                "--pin: the {role}'s CPU {cpu} is not one nesquic may run on (allowed: {})",
                CpuList(&allowed)
            )));
        }
    }
    Ok(())
}

/// Puts `pid` on `cpu` alone; threads it starts later inherit the mask.
pub fn pin(pid: i32, cpu: usize) -> Result<(), EngineError> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set, filled by CPU_SET below.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: writes one bit of `set`; libc bounds-checks the index (a CPU past CPU_SETSIZE
    // panics), and run plans only pass CPUs `check` found in this process's own mask.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: plain syscall on a pid we spawned and have not reaped.
    if unsafe { libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(EngineError::msg(format!("--pin: cannot put process {pid} on CPU {cpu}: {e}")));
    }
    Ok(())
}

fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    // SAFETY: as in `pin`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: plain syscall filling `set` for this process.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: reading bits of an initialised set, within CPU_SETSIZE.
    Ok((0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect())
}

/// "0-1,4" for a sorted CPU list.
struct CpuList<'a>(&'a [usize]);

impl fmt::Display for CpuList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for &c in self.0 {
            match runs.last_mut() {
                Some((_, end)) if *end + 1 == c => *end = c,
                _ => runs.push((c, c)),
            }
        }
        let parts: Vec<String> =
            runs.iter().map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_two_cpus_and_refuses_the_rest() {
        assert_eq!(parse("0,1"), Ok(PinnedCpus { server: 0, client: 1 }));
        assert_eq!(parse(" 3 , 2 "), Ok(PinnedCpus { server: 3, client: 2 }));
        assert!(parse("0").unwrap_err().contains("two CPU numbers"));
        assert!(parse("0,1,2").unwrap_err().contains("two CPU numbers"));
        assert!(parse("0,x").unwrap_err().contains("\"x\""));
    }

    #[test]
    fn names_allowed_cpus_as_ranges() {
        assert_eq!(CpuList(&[0, 1, 2, 5, 7, 8]).to_string(), "0-2,5,7-8");
        assert_eq!(CpuList(&[0]).to_string(), "0");
    }

    #[test]
    fn this_process_may_run_on_its_own_cpus() {
        let allowed = allowed_cpus().expect("affinity");
        assert!(!allowed.is_empty());
        let on = PinnedCpus { server: allowed[0], client: *allowed.last().expect("a cpu") };
        check(&on).expect("allowed cpus pass");
        let err = check(&PinnedCpus { server: allowed[0], client: libc::CPU_SETSIZE as usize - 1 });
        assert!(err.expect_err("cpu 1023").to_string().contains("CPU 1023"));
    }
}
