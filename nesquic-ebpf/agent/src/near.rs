//! Memory for trampolines within +-2 GiB of the functions they serve (a `jmp rel32` reaches no
//! further). Pools of 64 KiB are mapped at exact hints (`MAP_FIXED_NOREPLACE`, never over an
//! existing mapping), searched outwards from the function in 1 MiB steps. A sealed pool (r-x)
//! is never made writable again: other threads may be running its trampolines.

const POOL_SIZE: usize = 64 * 1024;
/// Each trampoline starts on a cache line: a count-mode fast path (~30-60 bytes with the
/// displaced instructions) then fetches one line per call, not two (at 16-byte alignment most
/// straddled a line boundary), and two trampolines never share a line.
pub const TRAMPOLINE_ALIGN: usize = 64;
const STEP: u64 = 1 << 20;
/// How far a trampoline may be: rel32 reach with a margin for the pool's own size.
const REACH: u64 = (1 << 31) - 2 * POOL_SIZE as u64;

/// A pool: read-write-execute while trampolines are added, read-execute once sealed.
struct Pool {
    base: u64,
    used: usize,
    sealed: bool,
}

/// Every pool mapped so far.
pub struct Pools {
    pools: Vec<Pool>,
}

fn distance(a: u64, b: u64) -> u64 {
    a.abs_diff(b)
}

impl Pools {
    /// No pools yet.
    pub const fn new() -> Pools {
        Pools { pools: Vec::new() }
    }

    /// Reserves `len` bytes within reach of `site`; returns their address (writable until
    /// [`Pools::seal`]). `None` when no memory could be mapped near it.
    pub fn reserve_near(&mut self, site: u64, len: usize) -> Option<u64> {
        let len = len.next_multiple_of(TRAMPOLINE_ALIGN);
        if let Some(p) = self.pools.iter_mut().find(|p| {
            !p.sealed
                && p.used + len <= POOL_SIZE
                && distance(p.base, site) < REACH
                && distance(p.base + POOL_SIZE as u64, site) < REACH
        }) {
            let at = p.base + p.used as u64;
            p.used += len;
            return Some(at);
        }
        let base = map_near(site)?;
        self.pools.push(Pool { base, used: len, sealed: false });
        Some(base)
    }

    /// Makes every pool read + execute (not writable); later trampolines get new pools.
    pub fn seal(&mut self) {
        for p in self.pools.iter_mut().filter(|p| !p.sealed) {
            p.sealed = protect(p.base, libc::PROT_READ | libc::PROT_EXEC);
        }
    }
}

fn protect(base: u64, prot: libc::c_int) -> bool {
    // SAFETY: `base` is a pool this module mapped, POOL_SIZE long.
    unsafe { libc::mprotect(base as *mut libc::c_void, POOL_SIZE, prot) == 0 }
}

fn map_near(site: u64) -> Option<u64> {
    let start = site & !(STEP - 1);
    let mut d = STEP;
    while d < REACH {
        for hint in [start.checked_sub(d), start.checked_add(d)].into_iter().flatten() {
            if !(0x10000..0x7fff_ffff_0000).contains(&hint) {
                continue;
            }
            // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping; a fresh anonymous
            // private mapping has no other owner.
            let p = unsafe {
                libc::mmap(
                    hint as *mut libc::c_void,
                    POOL_SIZE,
                    // Executable from the start: a site is patched before the pool is sealed, and a
                    // system refusing W+X memory fails here, cleanly, as "no memory nearby".
                    libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                continue;
            }
            if p as u64 == hint {
                return Some(hint);
            }
            // An old kernel ignoring the flag placed it elsewhere: give it back.
            // SAFETY: the mapping we just got.
            unsafe { libc::munmap(p, POOL_SIZE) };
        }
        d += STEP;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_trampoline_starts_on_a_cache_line_of_its_own() {
        let site = every_trampoline_starts_on_a_cache_line_of_its_own as *const () as u64;
        let mut pools = Pools::new();
        // Sizes of real trampolines: counted with and without a bytes argument, relocated + slack.
        let sizes = [41usize, 56, 63, 64, 65, 130, 48];
        let at: Vec<u64> = sizes.iter().map(|&len| pools.reserve_near(site, len).expect("memory nearby")).collect();
        for (i, (&a, &len)) in at.iter().zip(&sizes).enumerate() {
            assert_eq!(a % TRAMPOLINE_ALIGN as u64, 0, "trampoline {i} at {a:#x}");
            if let Some(&next) = at.get(i + 1) {
                assert!(next >= a + len as u64, "trampoline {i} overlaps the next");
                assert_eq!(next - a, len.next_multiple_of(64) as u64, "no line wasted beyond the last partial one");
            }
            assert!(distance(a, site) < REACH, "within rel32 reach");
        }
        pools.seal();
    }
}
