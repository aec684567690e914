//! Link impairment the kernel cannot do without netem: random loss on an interface's egress by a
//! tc-bpf program (`nq_tc_loss`), which also counts what it passed and dropped, so the applied
//! loss is measured rather than assumed.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use aya::maps::{Array, PerCpuArray};
use aya::programs::{SchedClassifier, TcAttachType};
use aya::Ebpf;

use crate::EbpfError;

/// A loss program attached to one interface (detached when dropped, or with its namespace).
pub struct LossFilter {
    ebpf: Ebpf,
    /// Where it is attached: (network namespace file, interface).
    pub location: (PathBuf, String),
}

impl LossFilter {
    /// Attaches a filter dropping `per_million` of the IPv4 packets leaving `iface` in the
    /// network namespace `netns` (a file like /var/run/netns/NAME).
    pub fn attach(netns: &Path, iface: &str, per_million: u32) -> Result<Self, EbpfError> {
        let (ns, name) = (netns.to_path_buf(), iface.to_string());
        // Namespaces are per thread: enter it on a thread of its own for the netlink calls.
        let ebpf = std::thread::spawn(move || attach_in(&ns, &name, per_million, TcAttachType::Egress))
            .join()
            .map_err(|_| EbpfError::Load("the loss-filter thread panicked".into()))??;
        Ok(Self { ebpf, location: (netns.to_path_buf(), iface.to_string()) })
    }

    /// A filter that drops nothing and counts the IPv4 datagrams crossing `iface` (ingress or
    /// egress): where netem applies the loss, what one end offered minus what the other end
    /// received is the loss it applied, measured.
    pub fn attach_counter(netns: &Path, iface: &str, ingress: bool) -> Result<Self, EbpfError> {
        let (ns, name) = (netns.to_path_buf(), iface.to_string());
        let at = if ingress { TcAttachType::Ingress } else { TcAttachType::Egress };
        let ebpf = std::thread::spawn(move || attach_in(&ns, &name, 0, at))
            .join()
            .map_err(|_| EbpfError::Load("the counting-filter thread panicked".into()))??;
        Ok(Self { ebpf, location: (netns.to_path_buf(), iface.to_string()) })
    }

    /// (passed, dropped) IPv4 datagrams so far (a GSO batch counts as its segments).
    pub fn counts(&self) -> Result<(u64, u64), EbpfError> {
        self.pair(0)
    }

    /// (passed, dropped) packets (skbs) so far: a dropped GSO batch is one.
    pub fn packet_counts(&self) -> Result<(u64, u64), EbpfError> {
        self.pair(2)
    }

    fn pair(&self, base: u32) -> Result<(u64, u64), EbpfError> {
        let map = self.ebpf.map("loss_stats").ok_or_else(|| EbpfError::Map("loss_stats missing".into()))?;
        let stats: PerCpuArray<_, u64> = PerCpuArray::try_from(map).map_err(|e| EbpfError::Map(e.to_string()))?;
        let sum = |i: u32| -> Result<u64, EbpfError> {
            Ok(stats.get(&i, 0).map_err(|e| EbpfError::Map(e.to_string()))?.iter().sum())
        };
        Ok((sum(base)?, sum(base + 1)?))
    }
}

fn attach_in(netns: &Path, iface: &str, per_million: u32, at: TcAttachType) -> Result<Ebpf, EbpfError> {
    let file = std::fs::File::open(netns)
        .map_err(|source| EbpfError::Io { what: format!("open {}", netns.display()), source })?;
    // SAFETY: setns on a valid namespace fd; affects only this thread.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(EbpfError::Io {
            what: format!("enter {}", netns.display()),
            source: std::io::Error::last_os_error(),
        });
    }
    let mut ebpf = Ebpf::load(crate::object::OBJECT).map_err(|e| EbpfError::Load(format!("{e:#}")))?;
    {
        let map = ebpf.map_mut("loss_config").ok_or_else(|| EbpfError::Map("loss_config missing".into()))?;
        let mut config: Array<_, u32> = Array::try_from(map).map_err(|e| EbpfError::Map(e.to_string()))?;
        config.set(0, per_million, 0).map_err(|e| EbpfError::Map(e.to_string()))?;
    }
    let program: &mut SchedClassifier = ebpf
        .program_mut("nq_tc_loss")
        .ok_or_else(|| EbpfError::Load("nq_tc_loss missing".into()))?
        .try_into()
        .map_err(|e: aya::programs::ProgramError| EbpfError::Load(e.to_string()))?;
    program.load().map_err(|e| crate::verifier::load_failed("nq_tc_loss", e))?;
    // Kernels before 6.6 (no TCX) need the clsact qdisc; it may already exist.
    let _ = aya::programs::tc::qdisc_add_clsact(iface);
    program.attach(iface, at).map_err(|e| EbpfError::Attach {
        what: format!("nq_tc_loss on {iface} in {}", netns.display()),
        reason: format!("{e:#}"),
    })?;
    Ok(ebpf)
}
