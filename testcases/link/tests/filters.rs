//! The link takes its tc-bpf filters from whoever creates it (`FilterAttacher`): with a fake
//! attacher, the filters asked for and the loss read back through them are exact, whichever
//! mechanism (netem with counters, or the tc-bpf loss filter) this kernel offers. Needs root
//! (network namespaces); skipped otherwise.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Mutex;

use nesquic_link::{BoxError, Conditions, FilterAttacher, PacketFilter, Topology};

/// A filter whose counts are fixed: (passed, dropped).
struct Fixed(u64, u64);

impl PacketFilter for Fixed {
    fn counts(&self) -> Result<(u64, u64), BoxError> {
        Ok((self.0, self.1))
    }
    fn packet_counts(&self) -> Result<(u64, u64), BoxError> {
        Ok((self.0, self.1))
    }
}

/// Records what the link asks for; egress counters saw 1,000 datagrams, ingress ones 990, a loss
/// filter passed 990 and dropped 10.
#[derive(Default)]
struct Fake {
    asked: Mutex<Vec<String>>,
}

impl FilterAttacher for Fake {
    fn loss(&self, netns: &Path, iface: &str, per_million: u32) -> Result<Box<dyn PacketFilter>, BoxError> {
        assert!(netns.exists(), "{} exists while the filter attaches", netns.display());
        self.asked.lock().unwrap().push(format!("loss {iface} {per_million}"));
        Ok(Box::new(Fixed(990, 10)))
    }

    fn counter(&self, netns: &Path, iface: &str, ingress: bool) -> Result<Box<dyn PacketFilter>, BoxError> {
        assert!(netns.exists(), "{} exists while the filter attaches", netns.display());
        self.asked.lock().unwrap().push(format!("counter {iface} {}", if ingress { "ingress" } else { "egress" }));
        Ok(Box::new(if ingress { Fixed(990, 0) } else { Fixed(1000, 0) }))
    }
}

#[test]
fn loss_filters_come_from_the_attacher_and_their_counts_are_the_observed_loss() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root for network namespaces");
        return;
    }
    let fake = Fake::default();
    let conditions = Conditions { loss_pct: Some(1.0), ..Conditions::default() };
    let topology = Topology::create(&conditions, &fake).unwrap();
    let (s, c) = (topology.server.iface.clone(), topology.client.iface.clone());
    let asked = fake.asked.lock().unwrap().clone();
    let netem = [
        format!("counter {s} egress"),
        format!("counter {s} ingress"),
        format!("counter {c} egress"),
        format!("counter {c} ingress"),
    ];
    let tc_bpf = [format!("loss {s} 10000"), format!("loss {c} 10000")];
    assert!(asked == netem || asked == tc_bpf, "{asked:?}");
    // Both ways: 2 x 1,000 offered, 2 x 990 arrived (netem) or 2 x 10 of 1,000 dropped (tc-bpf).
    assert_eq!(topology.observed_loss(), Some((20, 2000)));
}
