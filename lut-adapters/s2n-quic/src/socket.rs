//! The UDP socket s2n-quic runs on: bound here so the buffer requests are applied and read back
//! exactly, then handed to s2n-quic's tokio platform I/O (GSO and GRO runs, batched with
//! `sendmmsg`/`recvmmsg`). What s2n-quic itself configured (GSO segments, GRO) is learned from its own
//! `platform_feature_configured` events, so the `io` report line says what really runs.

use std::net::{SocketAddr, UdpSocket};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use nesquic_protocol::report::{IoSettings, LutEvent, Transport};
use s2n_quic::provider::event::{events, ConnectionInfo, ConnectionMeta, Subscriber};
use s2n_quic::provider::io::tokio::Provider as TokioIo;

use crate::options::Options;

/// Socket buffers as the kernel granted them (it doubles a request).
#[derive(Debug, Clone, Copy)]
pub struct Granted {
    recv: usize,
    send: usize,
}

/// Binds `addr`, applies `rcvbuf`/`sndbuf`, and builds s2n-quic's I/O on that socket with the
/// `gso`/`gro` options (s2n-quic's defaults: both on where the kernel has them).
pub fn bind(addr: SocketAddr, o: &Options) -> Result<(TokioIo, Granted)> {
    let socket = UdpSocket::bind(addr).with_context(|| format!("bind {addr}"))?;
    let sock = socket2::SockRef::from(&socket);
    if let Some(bytes) = o.rcvbuf {
        sock.set_recv_buffer_size(bytes).context("SO_RCVBUF")?;
    }
    if let Some(bytes) = o.sndbuf {
        sock.set_send_buffer_size(bytes).context("SO_SNDBUF")?;
    }
    let granted = Granted {
        recv: sock.recv_buffer_size().context("read SO_RCVBUF")?,
        send: sock.send_buffer_size().context("read SO_SNDBUF")?,
    };
    let mut builder = TokioIo::builder().with_rx_socket(socket)?;
    if let Some(on) = o.gso {
        builder = builder.with_gso(on)?;
    }
    if let Some(on) = o.gro {
        builder = builder.with_gro(on)?;
    }
    Ok((builder.build()?, granted))
}

const IPV4_UDP_HEADERS: u16 = 20 + 8;

/// GSO segments and GRO as s2n-quic configured them on its socket.
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    gso_max_segments: usize,
    gro: bool,
    /// Largest IP packet s2n-quic will send or accept (bytes, IP and UDP headers included).
    max_mtu: u16,
}

/// An event subscriber that records s2n-quic's platform features; clone it before handing it to
/// the endpoint and call [`PlatformFeatures::report`] once the endpoint started.
#[derive(Debug, Default, Clone)]
pub struct PlatformFeatures(Arc<Mutex<Seen>>);

impl Subscriber for PlatformFeatures {
    type ConnectionContext = ();

    fn create_connection_context(&mut self, _meta: &ConnectionMeta, _info: &ConnectionInfo) {}

    fn on_platform_feature_configured(
        &mut self,
        _meta: &events::EndpointMeta,
        event: &events::PlatformFeatureConfigured,
    ) {
        let Ok(mut seen) = self.0.lock() else { return };
        match event.configuration {
            events::PlatformFeatureConfiguration::Gso { max_segments, .. } => seen.gso_max_segments = max_segments,
            events::PlatformFeatureConfiguration::Gro { enabled, .. } => seen.gro = enabled,
            events::PlatformFeatureConfiguration::MaxMtu { mtu, .. } => seen.max_mtu = mtu,
            _ => {}
        }
    }
}

impl PlatformFeatures {
    /// The `io` report line: s2n-quic's features (published while its endpoint started) and the
    /// socket buffers.
    pub fn report(&self, granted: Granted) {
        let seen = self.0.lock().map(|s| *s).unwrap_or_default();
        LutEvent::Io(IoSettings {
            stack: "s2n-quic platform I/O (tokio)".into(),
            transport: Transport::Udp,
            blocking: false,
            gso_max_segments: seen.gso_max_segments.max(1) as u64,
            // With GRO s2n-quic receives into 64 KiB buffers: as many of its largest datagrams
            // (MTU less the IPv4 and UDP headers) as fit in one.
            gro_segments: match seen.gro {
                true => u64::from(u16::MAX) / u64::from(seen.max_mtu.saturating_sub(IPV4_UDP_HEADERS).max(1)),
                false => 1,
            },
            // s2n-quic's Linux I/O batches messages with sendmmsg/recvmmsg (its build script
            // finds them), each message a GSO or GRO run.
            send_mmsg: true,
            recv_mmsg: true,
            recv_buffer: granted.recv as u64,
            send_buffer: granted.send as u64,
            congestion_control: None,
        })
        .emit();
    }
}
