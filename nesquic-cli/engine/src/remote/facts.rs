//! What a host's report says about it: kernel, CPU (the record's `HostInfo::here`), the NIC on
//! the route to the other host and that NIC's offloads as `ethtool -k` reports them.

use std::net::IpAddr;
use std::process::Command;

use nesquic_record::events::HostInfo;

/// The `ethtool -k` features the report shows (the ones GSO/GRO-capable stacks depend on).
const OFFLOADS: [&str; 5] = [
    "generic-segmentation-offload",
    "generic-receive-offload",
    "tcp-segmentation-offload",
    "tx-udp-segmentation",
    "rx-udp-gro-forwarding",
];

/// This host, with the NIC that routes to `peer` and its offloads.
pub fn here(peer: Option<IpAddr>) -> HostInfo {
    let mut host = HostInfo::here();
    let Some(peer) = peer else { return host };
    match route_to(peer) {
        Ok((dev, _src)) => {
            match offloads(&dev) {
                Ok(list) => host.offloads = list,
                Err(why) => host.nic_note = Some(why),
            }
            host.nic = Some(dev);
        }
        Err(why) => host.nic_note = Some(why),
    }
    host
}

/// The interface and source address the kernel routes `peer` through (`ip route get`).
pub fn route_to(peer: IpAddr) -> Result<(String, Option<IpAddr>), String> {
    let out = Command::new("ip")
        .args(["-o", "route", "get", &peer.to_string()])
        .output()
        .map_err(|e| format!("ip route get {peer}: {e} (is iproute2 installed?)"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("ip route get {peer}: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let words: Vec<&str> = text.split_whitespace().collect();
    let after = |key: &str| words.iter().position(|w| *w == key).and_then(|i| words.get(i + 1)).copied();
    let dev = after("dev").ok_or_else(|| format!("ip route get {peer} names no device: {}", text.trim()))?;
    Ok((dev.to_string(), after("src").and_then(|s| s.parse().ok())))
}

/// The offloads of `dev` that matter for UDP, from `ethtool -k`.
fn offloads(dev: &str) -> Result<Vec<(String, String)>, String> {
    let out = match Command::new("ethtool").args(["-k", dev]).output() {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err("ethtool is not installed on this host (apt install ethtool): offloads unknown".into())
        }
        Err(e) => return Err(format!("ethtool -k {dev}: {e}")),
    };
    if !out.status.success() {
        return Err(format!("ethtool -k {dev}: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text
        .lines()
        .filter_map(|l| l.trim().split_once(':'))
        .filter(|(k, _)| OFFLOADS.contains(k))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect())
}
