//! What the engine does for a stack's own endpoint (`nesquic_lut_adapters::Endpoint`) within a
//! repetition: its programs print no report lines, so the server counts as listening once its
//! UDP port is bound in its network namespace, and the client's result is its lifetime and the
//! download the recipe says it writes, checked byte for byte.

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use nesquic_lut_adapters::lut::Endpoint;
use nesquic_lut_adapters::report::ClientResult;
use nesquic_lut_adapters::tls::CertFiles;

use crate::EngineError;

/// The address the endpoint's server binds: the recipe's fixed port, else one free now. A
/// fixed port taken by another process is refused: the client would reach that one.
pub(crate) fn listen_addr(
    endpoint: &dyn Endpoint,
    name: &str,
    mut listen: SocketAddr,
) -> Result<SocketAddr, EngineError> {
    let port = match endpoint.fixed_port() {
        Some(port) => {
            if udp_port_bound("self", port) {
                return Err(EngineError::msg(format!(
                    "{name}'s endpoint server binds UDP port {port} whatever it is told, and another process has it bound \
                     (`ss -ulpn 'sport = :{port}'` says which)"
                )));
            }
            port
        }
        // Bound and released: the server binds it a moment later (a race another process could
        // win, when the client would fail to connect and say so).
        None => UdpSocket::bind(listen)
            .and_then(|s| s.local_addr())
            .map_err(EngineError::os("find a free UDP port for the endpoint's server"))?
            .port(),
    };
    listen.set_port(port);
    Ok(listen)
}

/// Whether a UDP socket is bound to `port` in the network namespace of `pid` (`self`: ours).
pub(crate) fn udp_port_bound(pid: &str, port: u16) -> bool {
    let wanted = format!(":{port:04X}");
    ["udp", "udp6"].iter().any(|table| {
        std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).is_ok_and(|text| {
            // `sl local_address rem_address st ...`; the local address ends in `:PORT` (hex).
            text.lines().skip(1).any(|l| l.split_whitespace().nth(1).is_some_and(|a| a.ends_with(&wanted)))
        })
    })
}

/// The client's result once it exited successfully after `lifetime`: the payload it
/// downloaded, checked; whether it was checked.
pub(crate) fn client_result(
    endpoint: &dyn Endpoint,
    certs: &CertFiles,
    size: u64,
    lifetime: Duration,
) -> Result<(ClientResult, bool), EngineError> {
    let collected = endpoint.collect(certs, size)?;
    let result = ClientResult {
        bytes: collected.bytes,
        // The endpoint reports no handshake: its lifetime holds start-up, handshake and transfer.
        handshake_ns: 0,
        transfer_ns: u64::try_from(lifetime.as_nanos()).unwrap_or(u64::MAX),
        elapsed_ns: 0,
        connections: Vec::new(),
    };
    Ok((result, collected.verified))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_port_is_seen_and_a_released_one_is_not() {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let port = socket.local_addr().expect("addr").port();
        assert!(udp_port_bound("self", port));
        drop(socket);
        assert!(!udp_port_bound("self", port));
    }
}
