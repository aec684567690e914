//! Nesquic's emulated link, `--link veth`: client and server "hosts" as two network namespaces joined by a veth pair, and
//! the link conditions applied to it. Everything is created per run and removed when the
//! [`Topology`] drops (also on errors and Ctrl-C). Every name carries the creating nesquic's pid,
//! so what a killed nesquic left can be told from a live run's ([`owned_objects`]).
//!
//! Mechanisms (said in the report): rate with `tbf` on both veth ends; loss with `netem` where the
//! kernel has it, else with a tc-bpf program that also counts what it dropped; delay, jitter and
//! reordering with `netem` where the kernel has it, else with Nesquic's userspace relay
//! ([`relay`]) in the client's namespace, which measures what it applied.
//!
//! Must not know LUTs, probes' meaning, runs or how results are printed: it builds the link,
//! applies conditions, and reports what it applied and measured. It loads no eBPF itself: the
//! tc-bpf filters come from whoever creates the topology, through [`FilterAttacher`].

pub mod relay;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

mod error;
pub use error::LinkError;

/// Results of this crate.
pub type Result<T, E = LinkError> = std::result::Result<T, E>;

const PREFIX: &str = "nq";
const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);

/// Which network joins client and server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkKind {
    /// Both on the host's loopback.
    Loopback,
    /// Two network namespaces joined by a veth pair (root).
    Veth,
}

/// Conditions asked for on the link.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Conditions {
    /// tbf rate, as tc spells it (`100mbit`, `1gbit`).
    pub rate: Option<String>,
    /// Random loss, percent, each direction.
    pub loss_pct: Option<f64>,
    /// One-way delay, ms (needs netem).
    pub delay_ms: Option<f64>,
    /// Jitter, ms (needs netem).
    pub jitter_ms: Option<f64>,
    /// Reordering, percent (needs netem).
    pub reorder_pct: Option<f64>,
}

impl Conditions {
    /// The tbf rate in bits per second (`None` without a rate, or one tc's units do not name).
    pub fn rate_bits_per_s(&self) -> Option<u64> {
        self.rate.as_deref().and_then(rate_bits)
    }

    /// Checks ranges and combinations, whichever mechanism will apply them.
    pub fn validate(&self) -> Result<()> {
        for (what, v) in [("--delay", self.delay_ms), ("--jitter", self.jitter_ms)] {
            if let Some(v) = v.filter(|v| !(0.0..=10_000.0).contains(v)) {
                return Err(LinkError::Condition(format!("{what} {v} ms: expected 0-10000")));
            }
        }
        for (what, v) in [("--loss", self.loss_pct), ("--reorder", self.reorder_pct)] {
            if let Some(v) = v.filter(|v| !(0.0..=100.0).contains(v)) {
                return Err(LinkError::Condition(format!("{what} {v}%: expected 0-100")));
            }
        }
        if self.reorder_pct.is_some_and(|r| r > 0.0) && self.delay_ms.is_none_or(|d| d <= 0.0) {
            return Err(LinkError::Condition(
                "--reorder needs --delay: reordered datagrams are the ones sent without the delay (as with netem)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Whether anything is asked for.
    pub fn any(&self) -> bool {
        self.rate.is_some()
            || self.loss_pct.is_some()
            || self.delay_ms.is_some()
            || self.jitter_ms.is_some()
            || self.reorder_pct.is_some()
    }
}

/// One side of the link.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Host {
    /// Namespace name.
    pub netns: String,
    /// Its veth end.
    pub iface: String,
    /// Its address.
    pub ip: IpAddr,
}

impl Host {
    /// The namespace file processes enter with setns.
    pub fn netns_path(&self) -> PathBuf {
        PathBuf::from("/var/run/netns").join(&self.netns)
    }
}

/// A tc-bpf filter attached to one veth end: it drops a share of the IPv4 datagrams leaving
/// it (a loss filter) or none (a counter), and counts both.
pub trait PacketFilter: Send {
    /// (passed, dropped) IPv4 datagrams so far (a GSO batch counts as its segments).
    fn counts(&self) -> std::result::Result<(u64, u64), BoxError>;
    /// (passed, dropped) IPv4 packets (skbs) so far: a GSO batch is one.
    fn packet_counts(&self) -> std::result::Result<(u64, u64), BoxError>;
}

/// Why a filter could not be attached or read (the loader's error).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Attaches the tc-bpf filters the link needs where netem cannot do the job; the engine gives
/// the eBPF loader's, so this crate does not depend on it.
pub trait FilterAttacher {
    /// A filter dropping `per_million` of the IPv4 packets leaving `iface` in the network
    /// namespace `netns` (a file like /var/run/netns/NAME).
    fn loss(&self, netns: &Path, iface: &str, per_million: u32)
        -> std::result::Result<Box<dyn PacketFilter>, BoxError>;
    /// A filter that drops nothing and counts the IPv4 datagrams crossing `iface` (ingress or
    /// egress).
    fn counter(&self, netns: &Path, iface: &str, ingress: bool)
        -> std::result::Result<Box<dyn PacketFilter>, BoxError>;
}

/// What was applied, by which mechanism, and what was measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Applied {
    /// "tbf rate 100mbit on both veth ends", ...
    pub mechanisms: Vec<String>,
}

/// The two hosts, their link and its impairments; removed on drop.
pub struct Topology {
    /// Server side.
    pub server: Host,
    /// Client side.
    pub client: Host,
    /// What was applied.
    pub applied: Applied,
    loss_filters: Vec<Box<dyn PacketFilter>>,
    /// With netem applying loss: counting filters, (egress, ingress) per end.
    loss_counters: Vec<(Box<dyn PacketFilter>, Box<dyn PacketFilter>)>,
    /// Delay/jitter/reorder without netem.
    relay: Option<relay::Relay>,
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip").args(args).output().map_err(|source| LinkError::Spawn { program: "ip", source })?;
    if !out.status.success() {
        return Err(LinkError::command(&format!("ip {}", args.join(" ")), &out));
    }
    Ok(())
}

fn tc_in(netns: &str, args: &[&str]) -> Result<std::process::Output> {
    Command::new("ip")
        .args(["netns", "exec", netns, "tc"])
        .args(args)
        .output()
        .map_err(|source| LinkError::Spawn { program: "tc", source })
}

/// Whether this kernel has the netem qdisc: tried on the server's veth end (ours, and about to
/// get its qdiscs anyway), then removed. Loads the module first where netem is one (Debian).
fn netem_available(host: &Host) -> bool {
    load_netem_module();
    let probe = tc_in(&host.netns, &["qdisc", "add", "dev", &host.iface, "root", "netem", "delay", "0ms"]);
    let ok = probe.is_ok_and(|o| o.status.success());
    if ok {
        let _ = tc_in(&host.netns, &["qdisc", "del", "dev", &host.iface, "root"]);
    }
    ok
}

/// Best effort: stock kernels build netem as a module, which the kernel may not autoload.
fn load_netem_module() {
    let _ = Command::new("modprobe").args(["-q", "sch_netem"]).output();
}

/// Which qdiscs the link conditions use work here, tried on the loopback of a throwaway
/// namespace (nothing of the host's is touched): `(name, Ok | Err(what tc said))`.
pub fn qdisc_support() -> Vec<(&'static str, std::result::Result<(), String>)> {
    let netns = format!("{PREFIX}-{}-d", std::process::id());
    if let Err(e) = ip(&["netns", "add", &netns]) {
        let why = format!("no network namespace to try in ({})", e.chain());
        return ["netem", "tbf", "clsact"].into_iter().map(|q| (q, Err(why.clone()))).collect();
    }
    load_netem_module();
    let tries: [(&str, &[&str]); 3] = [
        ("netem", &["qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms", "loss", "1%"]),
        ("tbf", &["qdisc", "add", "dev", "lo", "root", "tbf", "rate", "1gbit", "burst", "64kb", "latency", "50ms"]),
        ("clsact", &["qdisc", "add", "dev", "lo", "clsact"]),
    ];
    let mut out = Vec::new();
    for (name, args) in tries {
        let result = match tc_in(&netns, args) {
            Ok(o) if o.status.success() => Ok(()),
            Ok(o) => Err(String::from_utf8_lossy(&o.stderr).trim().to_string()),
            Err(e) => Err(e.chain()),
        };
        // Remove whatever was added before the next try (root and clsact may not coexist).
        let _ = tc_in(&netns, &["qdisc", "del", "dev", "lo", "root"]);
        let _ = tc_in(&netns, &["qdisc", "del", "dev", "lo", "clsact"]);
        out.push((name, result));
    }
    let _ = Command::new("ip").args(["netns", "del", &netns]).output();
    out
}

impl Topology {
    /// Creates the namespaces and the veth pair and applies `conditions`, with `filters`'
    /// tc-bpf programs where loss needs one.
    pub fn create(conditions: &Conditions, filters: &dyn FilterAttacher) -> Result<Self> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(LinkError::NotRoot);
        }
        conditions.validate()?;
        let pid = std::process::id();
        let server =
            Host { netns: format!("{PREFIX}-{pid}-s"), iface: format!("{PREFIX}{pid}s"), ip: SERVER_IP.into() };
        let client =
            Host { netns: format!("{PREFIX}-{pid}-c"), iface: format!("{PREFIX}{pid}c"), ip: CLIENT_IP.into() };
        let mut topology = Self {
            server,
            client,
            applied: Applied::default(),
            loss_filters: Vec::new(),
            loss_counters: Vec::new(),
            relay: None,
        };
        // From here on, Drop removes whatever exists.
        topology.build().map_err(|e| e.during("set up --link veth"))?;
        topology.impair(conditions, filters).map_err(|e| e.during("apply the link conditions"))?;
        Ok(topology)
    }

    fn build(&mut self) -> Result<()> {
        let (s, c) = (self.server.clone(), self.client.clone());
        ip(&["netns", "add", &s.netns])?;
        ip(&["netns", "add", &c.netns])?;
        ip(&["link", "add", &s.iface, "type", "veth", "peer", "name", &c.iface])?;
        for h in [&s, &c] {
            ip(&["link", "set", &h.iface, "netns", &h.netns])?;
            ip(&["-n", &h.netns, "addr", "add", &format!("{}/24", h.ip), "dev", &h.iface])?;
            ip(&["-n", &h.netns, "link", "set", &h.iface, "up"])?;
            ip(&["-n", &h.netns, "link", "set", "lo", "up"])?;
        }
        self.applied.mechanisms.push(format!(
            "veth pair {} ({}) <-> {} ({}), namespaces {} and {}",
            s.iface, s.ip, c.iface, c.ip, s.netns, c.netns
        ));
        Ok(())
    }

    fn impair(&mut self, cond: &Conditions, filters: &dyn FilterAttacher) -> Result<()> {
        let hosts = [self.server.clone(), self.client.clone()];
        let needs_netem = cond.delay_ms.is_some() || cond.jitter_ms.is_some() || cond.reorder_pct.is_some();
        let netem = (needs_netem || cond.loss_pct.is_some()) && netem_available(&self.server);
        if needs_netem && !netem {
            let conditions = relay::RelayConditions {
                delay_ms: cond.delay_ms.unwrap_or(0.0),
                jitter_ms: cond.jitter_ms.unwrap_or(0.0),
                reorder_pct: cond.reorder_pct.unwrap_or(0.0),
            };
            let r = relay::Relay::start(&self.client.netns_path(), SocketAddr::new(self.client.ip, 0), conditions)?;
            self.applied.mechanisms.push(format!(
                "userspace relay (no netem here) in {} on {}: delay {} ms, jitter ±{} ms, reorder {}% (sent without \
                 the delay), each direction; the client connects through it",
                self.client.netns,
                r.route_address(),
                conditions.delay_ms,
                conditions.jitter_ms,
                conditions.reorder_pct
            ));
            self.relay = Some(r);
        }
        if netem {
            let mut args: Vec<String> = Vec::new();
            if let Some(d) = cond.delay_ms {
                args.extend(["delay".into(), format!("{d}ms")]);
                if let Some(j) = cond.jitter_ms {
                    args.push(format!("{j}ms"));
                }
            }
            if let Some(l) = cond.loss_pct {
                args.extend(["loss".into(), format!("{l}%")]);
            }
            if let Some(r) = cond.reorder_pct {
                args.extend(["reorder".into(), format!("{r}%")]);
            }
            if let Some(rate) = &cond.rate {
                args.extend(["rate".into(), rate.clone()]);
            }
            for h in &hosts {
                let mut full = vec!["qdisc", "add", "dev", &h.iface, "root", "netem"];
                full.extend(args.iter().map(String::as_str));
                let out = tc_in(&h.netns, &full)?;
                if !out.status.success() {
                    return Err(LinkError::command(&format!("tc {}", full.join(" ")), &out));
                }
            }
            self.applied.mechanisms.push(format!("netem {} on both veth ends", args.join(" ")));
            if cond.loss_pct.is_some() {
                // netem counts its drops in skbs; these count datagrams offered and received.
                for h in &hosts {
                    let count = |ingress| {
                        filters.counter(&h.netns_path(), &h.iface, ingress).map_err(|source| LinkError::Filter {
                            what: "tc-bpf counting filter",
                            iface: h.iface.clone(),
                            source,
                        })
                    };
                    self.loss_counters.push((count(false)?, count(true)?));
                }
                self.applied.mechanisms.push(
                    "loss measured by tc-bpf counters: datagrams leaving one veth end vs arriving at the other".into(),
                );
            }
            return Ok(());
        }
        if let Some(rate) = &cond.rate {
            // The bucket holds 2 ms at the rate, at least one 64 KB GSO batch: bigger lets the
            // start of a transfer run above the rate; smaller forces tbf to split GSO batches.
            let burst = format!("{}b", rate_bits(rate).map_or(65_536, |b| (b / 8 / 500).max(65_536)));
            for h in &hosts {
                let args =
                    ["qdisc", "add", "dev", &h.iface, "root", "tbf", "rate", rate, "burst", &burst, "latency", "50ms"];
                let out = tc_in(&h.netns, &args)?;
                if !out.status.success() {
                    return Err(LinkError::command(&format!("--rate {rate}: tc {}", args.join(" ")), &out));
                }
            }
            self.applied.mechanisms.push(format!("tbf rate {rate} (burst {burst}, latency 50ms) on both veth ends"));
        }
        if let Some(loss) = cond.loss_pct {
            let per_million = (loss * 10_000.0).round() as u32;
            for h in &hosts {
                let filter = filters.loss(&h.netns_path(), &h.iface, per_million).map_err(|source| {
                    LinkError::Filter { what: "tc-bpf loss filter", iface: h.iface.clone(), source }
                })?;
                self.loss_filters.push(filter);
            }
            self.applied.mechanisms.push(format!(
                "tc-bpf random loss {loss}% of packets on both veth egresses (no netem here; a UDP GSO batch \
                 crosses the veth as one packet and is lost whole)"
            ));
        }
        Ok(())
    }

    /// Where a client should send to reach `server`: the relay when there is one.
    pub fn route(&self, server: SocketAddr) -> SocketAddr {
        self.relay.as_ref().map_or(server, |r| r.route(server))
    }

    /// What the relay measured so far (with a relay).
    pub fn relay_stats(&self) -> Option<relay::RelayStats> {
        self.relay.as_ref().map(relay::Relay::stats)
    }

    /// The loss measured by the tc-bpf filters so far: (dropped, seen) IPv4 datagrams, both ways
    /// (GSO batches count as their datagrams).
    pub fn observed_loss(&self) -> Option<(u64, u64)> {
        self.loss_in(|f| f.counts())
    }

    /// The same in packets (skbs): what the loss applies to, one draw per packet. A UDP GSO
    /// batch is one packet, so a dropped batch is a burst of datagrams and the datagram share
    /// varies far more than the packet share (5% loss on ~160 packets gave 0.89% of datagrams).
    pub fn observed_packet_loss(&self) -> Option<(u64, u64)> {
        self.loss_in(|f| f.packet_counts())
    }

    /// (dropped, offered) in the unit `counts` reads: (passed, dropped) of one filter.
    fn loss_in(
        &self,
        counts: impl Fn(&dyn PacketFilter) -> std::result::Result<(u64, u64), BoxError>,
    ) -> Option<(u64, u64)> {
        if !self.loss_counters.is_empty() {
            let (mut offered, mut arrived) = (0, 0);
            for (egress, ingress) in &self.loss_counters {
                offered += counts(egress.as_ref()).ok()?.0;
                arrived += counts(ingress.as_ref()).ok()?.0;
            }
            return Some((offered.saturating_sub(arrived), offered));
        }
        if self.loss_filters.is_empty() {
            return None;
        }
        let mut total = (0, 0);
        for f in &self.loss_filters {
            let (passed, dropped) = counts(f.as_ref()).ok()?;
            total.0 += dropped;
            total.1 += passed + dropped;
        }
        Some(total)
    }

    /// What each qdisc on the two veth ends dropped, from `tc -s`, per end and kind (tbf drops
    /// what overflows its queue at the rate; netem also drops for its random loss). A `tc` that
    /// fails is an error, never 0 drops.
    pub fn qdisc_drops(&self) -> Result<Vec<QdiscDrops>> {
        let mut all = qdisc_drops_of(&self.server, "server")?;
        all.extend(qdisc_drops_of(&self.client, "client")?);
        Ok(all)
    }
}

/// What one qdisc on a veth end dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QdiscDrops {
    /// Which end: `server` or `client`.
    pub end: String,
    /// The qdisc, as tc names it (`tbf`, `netem`; `noqueue` where the end has none).
    pub kind: String,
    /// Packets it dropped (a GSO batch is one packet).
    pub dropped: u64,
}

impl QdiscDrops {
    /// Why this kind of qdisc drops.
    pub fn cause(&self) -> &'static str {
        match self.kind.as_str() {
            "tbf" => "tbf queue overflow at the rate",
            "netem" => "netem: its random loss and its queue limit",
            "noqueue" => "no qdisc",
            _ => "queue overflow",
        }
    }
}

/// The qdiscs of `host`'s veth end and their drops, from `tc -s -j qdisc show`.
fn qdisc_drops_of(host: &Host, end: &str) -> Result<Vec<QdiscDrops>> {
    let args = ["-s", "-j", "qdisc", "show", "dev", &host.iface];
    let command = format!("ip netns exec {} tc {}", host.netns, args.join(" "));
    let out = tc_in(&host.netns, &args)?;
    if !out.status.success() {
        return Err(LinkError::command(&command, &out));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let qdiscs = parse_qdisc_stats(&text).map_err(|why| LinkError::Unreadable { command, why })?;
    Ok(qdiscs.into_iter().map(|(kind, dropped)| QdiscDrops { end: end.to_string(), kind, dropped }).collect())
}

/// `(kind, drops)` of each qdisc in `tc -s -j qdisc show` output.
fn parse_qdisc_stats(json: &str) -> std::result::Result<Vec<(String, u64)>, String> {
    #[derive(Deserialize)]
    struct Qdisc {
        kind: String,
        drops: Option<u64>,
    }
    let qdiscs: Vec<Qdisc> = serde_json::from_str(json).map_err(|e| e.to_string())?;
    qdiscs
        .into_iter()
        .map(|q| match q.drops {
            Some(drops) => Ok((q.kind, drops)),
            None => Err(format!("qdisc {} has no drop count (was -s given?)", q.kind)),
        })
        .collect()
}

impl Drop for Topology {
    fn drop(&mut self) {
        self.loss_filters.clear();
        self.loss_counters.clear();
        // The relay's thread lives in the client namespace: stop it before the namespace goes.
        self.relay = None;
        // Deleting a namespace removes its veth end, the peer and every qdisc with them.
        for h in [&self.server, &self.client] {
            let _ = Command::new("ip").args(["netns", "del", &h.netns]).output();
        }
    }
}

/// Bits per second of a tc rate (`100mbit`, `1gbit`, `500kbit`, `1000000bit`).
fn rate_bits(rate: &str) -> Option<u64> {
    let r = rate.trim().to_ascii_lowercase();
    let split = r.find(|c: char| !c.is_ascii_digit() && c != '.')?;
    let (number, unit) = r.split_at(split);
    let n: f64 = number.parse().ok()?;
    let scale = match unit {
        "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        _ => return None,
    };
    Some((n * scale) as u64)
}

/// What kind of network object of nesquic's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    /// A network namespace (`nq-<pid>-s|c`, `nq-<pid>-d` for `nesquic doctor`'s qdisc tries);
    /// its veth end, qdiscs and tc-bpf filters go with it.
    Namespace,
    /// A veth end still in this namespace (`nq<pid>s|c`): made, not yet moved into its
    /// namespace when its run died.
    VethEnd,
}

impl std::fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ObjectKind::Namespace => "netns",
            ObjectKind::VethEnd => "veth",
        })
    }
}

/// A network object some nesquic made, named after that nesquic's pid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedObject {
    /// What it is.
    pub kind: ObjectKind,
    /// Its name (`ip netns` or `ip link`).
    pub name: String,
    /// The pid of the nesquic that made it.
    pub owner: u32,
}

impl OwnedObject {
    /// Deletes it (root); a namespace takes its veth end (and the peer), qdiscs and filters along.
    pub fn remove(&self) -> Result<()> {
        match self.kind {
            ObjectKind::Namespace => ip(&["netns", "del", &self.name]),
            ObjectKind::VethEnd => ip(&["link", "del", &self.name]),
        }
    }

    /// Where it shows in the file system: its inode's change time is when it was made.
    pub fn path(&self) -> std::path::PathBuf {
        match self.kind {
            ObjectKind::Namespace => std::path::Path::new("/var/run/netns").join(&self.name),
            ObjectKind::VethEnd => std::path::Path::new("/sys/class/net").join(&self.name),
        }
    }

    /// The command that removes it by hand.
    pub fn removal_command(&self) -> String {
        match self.kind {
            ObjectKind::Namespace => format!("ip netns del {}", self.name),
            ObjectKind::VethEnd => format!("ip link del {}", self.name),
        }
    }
}

/// Every namespace and veth end on this machine that some nesquic made (any pid, this one's
/// too): what a run that died without its cleanup (`kill -9`) left is among them.
pub fn owned_objects() -> Vec<OwnedObject> {
    let names = |dir: &str| -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
        entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect()
    };
    let namespaces = names("/var/run/netns").into_iter().filter_map(|name| {
        let owner = namespace_owner(&name)?;
        Some(OwnedObject { kind: ObjectKind::Namespace, name, owner })
    });
    let veth_ends = names("/sys/class/net").into_iter().filter_map(|name| {
        let owner = veth_owner(&name)?;
        Some(OwnedObject { kind: ObjectKind::VethEnd, name, owner })
    });
    namespaces.chain(veth_ends).collect()
}

/// The pid in `nq-<pid>-s|c|d`.
fn namespace_owner(name: &str) -> Option<u32> {
    let (pid, role) = name.strip_prefix(&format!("{PREFIX}-"))?.split_once('-')?;
    matches!(role, "s" | "c" | "d").then_some(())?;
    pid.parse().ok()
}

/// The pid in `nq<pid>s|c`.
fn veth_owner(name: &str) -> Option<u32> {
    let pid = name.strip_prefix(PREFIX)?.strip_suffix(['s', 'c'])?;
    pid.bytes().all(|b| b.is_ascii_digit()).then_some(())?;
    pid.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `tc -s -j qdisc show dev X` on this machine's iproute2 6.1, after a UDP burst into a
    /// 1 Mbit/s tbf with a 10 KB queue.
    const TBF: &str = r#"[{"kind":"tbf","handle":"8001:","root":true,"refcnt":3,"options":{"rate":125000,"burst":5120,"lat":40960},"bytes":9300,"packets":14,"drops":2989,"overlimits":3003,"requeues":0,"backlog":7210,"qlen":5}]"#;
    /// A veth end without a qdisc.
    const NOQUEUE: &str = r#"[{"kind":"noqueue","handle":"0:","root":true,"refcnt":2,"options":{},"bytes":0,"packets":0,"drops":0,"overlimits":0,"requeues":0,"backlog":0,"qlen":0}]"#;
    /// netem with loss, in the shape iproute2 6.1 prints it (this kernel has no netem to ask).
    const NETEM: &str = r#"[{"kind":"netem","handle":"8001:","root":true,"refcnt":2,"options":{"limit":1000,"loss-random":{"loss":0.05,"correlation":0},"ecn":false,"gap":0},"bytes":4100000,"packets":2900,"drops":151,"overlimits":0,"requeues":0,"backlog":0,"qlen":0}]"#;

    #[test]
    fn qdisc_drops_are_read_per_kind() {
        assert_eq!(parse_qdisc_stats(TBF), Ok(vec![("tbf".to_string(), 2989)]));
        assert_eq!(parse_qdisc_stats(NOQUEUE), Ok(vec![("noqueue".to_string(), 0)]));
        assert_eq!(parse_qdisc_stats(NETEM), Ok(vec![("netem".to_string(), 151)]));
        let netem = QdiscDrops { end: "server".into(), kind: "netem".into(), dropped: 151 };
        assert_eq!(netem.cause(), "netem: its random loss and its queue limit");
        let tbf = QdiscDrops { end: "client".into(), kind: "tbf".into(), dropped: 2989 };
        assert_eq!(tbf.cause(), "tbf queue overflow at the rate");
        // Without -s there is nothing to count: an error, not 0.
        assert!(parse_qdisc_stats(r#"[{"kind":"tbf","handle":"8001:"}]"#).unwrap_err().contains("no drop count"));
        assert!(parse_qdisc_stats("Cannot find device").is_err());
    }

    #[test]
    fn a_failing_tc_is_an_error_not_zero_drops() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return; // `ip netns exec` needs root (tests run as root here and in CI)
        }
        let gone = Host { netns: "nq-no-such-namespace".into(), iface: "nq0x".into(), ip: SERVER_IP.into() };
        let err = qdisc_drops_of(&gone, "server").expect_err("no namespace, no counts").chain();
        assert!(err.contains("tc -s -j qdisc show dev nq0x") && err.contains("nq-no-such-namespace"), "{err}");
    }

    #[test]
    fn owners_are_read_from_our_names_only() {
        assert_eq!(namespace_owner("nq-1234-s"), Some(1234));
        assert_eq!(namespace_owner("nq-1234-d"), Some(1234));
        assert_eq!(namespace_owner("nq-1234-x"), None);
        assert_eq!(namespace_owner("nqssh-1234"), None);
        assert_eq!(namespace_owner("nq-no-such-namespace"), None);
        assert_eq!(veth_owner("nq1234c"), Some(1234));
        assert_eq!(veth_owner("nqssh1234a"), None);
        assert_eq!(veth_owner("nq0x"), None);
        assert_eq!(veth_owner("nqs"), None);
    }

    #[test]
    fn tc_rates_parse() {
        assert_eq!(rate_bits("100mbit"), Some(100_000_000));
        assert_eq!(rate_bits("1.5gbit"), Some(1_500_000_000));
        assert_eq!(rate_bits("fast"), None);
    }
}
