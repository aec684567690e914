//! The LUT-process side of a sans-IO stack: parses the common command line's I/O settings, binds
//! Nesquic's I/O layer, runs the translation shim and reports in the protocol's JSON lines.
//! Used by `nesquic-lut-quiche` and by `nesquic-lut-quinn --io nesquic|plain`.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use nesquic_io::{IoConfig, IoSwitches, UdpIo};
use nesquic_translation::{Impairment, Stack, StackOptions, Summary};

use nesquic_protocol::options::LutOpt;
use nesquic_protocol::report::{IoSettings, LutEvent, Transport};
use nesquic_protocol::{IoMode, LutCommand};

/// The I/O layer configuration for `io` with `gso`, `gro`, `mmsg`, `rcvbuf`, `sndbuf` applied;
/// the other options are returned for the stack. `plain` has no switches and refuses them.
pub fn io_config(io: IoMode, opts: &[LutOpt]) -> Result<(IoConfig, Vec<LutOpt>)> {
    let mut config = IoConfig::default();
    if io == IoMode::Plain {
        config.switches = IoSwitches::plain();
    }
    let mut rest = Vec::new();
    for &opt in opts {
        let bytes = |n: u64| usize::try_from(n).with_context(|| format!("{opt}: too large"));
        match opt {
            LutOpt::RcvBuf(n) => config.recv_buffer = Some(bytes(n)?),
            LutOpt::SndBuf(n) => config.send_buffer = Some(bytes(n)?),
            LutOpt::Gso(_) | LutOpt::Gro(_) | LutOpt::Mmsg(_) if io == IoMode::Plain => bail!(
                "--lut-opt {opt}: --io plain has no {} switch (it is one sendto/recvfrom per datagram)",
                opt.kind().key()
            ),
            LutOpt::Gso(on) => config.switches.gso = on,
            LutOpt::Gro(on) => config.switches.gro = on,
            LutOpt::Mmsg(on) => config.switches.mmsg = on,
            other => rest.push(other),
        }
    }
    Ok((config, rest))
}

/// Reports the socket's effective settings.
fn report_io(io: &UdpIo) {
    let caps = io.capabilities();
    let buffers = io.granted_buffers();
    let stack = if caps.plain { "nesquic-io (plain sendto/recvfrom)" } else { "nesquic-io" };
    LutEvent::Io(IoSettings {
        stack: stack.into(),
        transport: Transport::Udp,
        blocking: false,
        gso_max_segments: caps.max_gso_segments as u64,
        gro_segments: if caps.gro { nesquic_io::MAX_GSO_SEGMENTS as u64 } else { 1 },
        send_mmsg: caps.mmsg,
        recv_mmsg: caps.mmsg,
        recv_buffer: buffers.recv as u64,
        send_buffer: buffers.send as u64,
        congestion_control: None,
    })
    .emit();
}

/// Runs one role of `stack` over Nesquic's I/O layer. `rest` holds the stack's own options
/// (already checked by the caller).
pub fn run<S: Stack>(command: LutCommand) -> Result<()> {
    let library = S::NAME;
    let impairment = Impairment::from_env()?;
    let shape = command.workload();
    let opts = command.options().with_context(|| format!("{library} over nesquic-io: --opt"))?;
    match command {
        LutCommand::Server { listen, cert, key, io, qlog, .. } => {
            let (config, rest) = io_config(io, &opts)?;
            let options = stack_options::<S>(&rest, qlog, shape.streams)?;
            let socket = nesquic_translation::bind(listen, &config)?;
            report_io(&socket);
            LutEvent::Listening { addr: socket.local_addr()? }.emit();
            let summary =
                nesquic_translation::serve::<S>(&socket, &cert, &key, shape.connections, &options, &impairment)
                    .with_context(|| format!("{library} server"))?;
            report_summary(&summary, &impairment);
        }
        LutCommand::Client { connect, ca, io, qlog, .. } => {
            let (config, rest) = io_config(io, &opts)?;
            let options = stack_options::<S>(&rest, qlog, shape.streams)?;
            let any = if connect.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
            let socket = nesquic_translation::bind(any.parse()?, &config)?;
            report_io(&socket);
            let mut progress = |bytes| LutEvent::Progress { bytes }.emit();
            let summary =
                nesquic_translation::download::<S>(&socket, connect, &ca, shape, &options, &impairment, &mut progress)
                    .with_context(|| format!("{library} client"))?;
            report_summary(&summary, &impairment);
            if let Some(done) = summary.report {
                LutEvent::Done(done).emit();
            }
        }
    }
    Ok(())
}

fn stack_options<S: Stack>(rest: &[LutOpt], qlog: Option<PathBuf>, streams: u32) -> Result<StackOptions> {
    let mut options = StackOptions { pacing: true, max_streams: streams, ..StackOptions::default() };
    for &opt in rest {
        // Only quiche exposes pacing as a switch (quinn-proto always paces internally).
        match (S::NAME, opt) {
            ("quiche", LutOpt::Pacing(on)) => options.pacing = on,
            (_, LutOpt::Cc(cc)) => options.cc = Some(cc),
            ("quinn-proto", LutOpt::Cipher(cipher)) => options.cipher = Some(cipher),
            _ => bail!("{} over nesquic-io does not understand option {opt}", S::NAME),
        }
    }
    #[cfg(not(feature = "qlog"))]
    if qlog.is_some() {
        // A release without a qlog API (quinn before 0.11.9): the run goes on without it.
        eprintln!("{}: built without qlog (this release of the library has none): no library qlog", S::NAME);
    }
    #[cfg(feature = "qlog")]
    if let Some(path) = qlog {
        // With several connections quinn-proto writes every connection's events into the one
        // file (tagged by connection ID); quiche keeps one trace per connection, so the file
        // holds the first connection's. Both libraries start their qlog clock when the connection is created, which happens
        // right after this; quinn-proto is told this exact instant.
        let (start, wall) = (std::time::Instant::now(), std::time::SystemTime::now());
        options.qlog_start = Some(start);
        let start_unix_ns = wall.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
        LutEvent::Qlog { path: path.clone(), start_unix_ns }.emit();
        options.qlog = Some(path);
    }
    Ok(options)
}

fn report_summary(summary: &Summary, impairment: &Impairment) {
    LutEvent::IoCounters(summary.io).emit();
    if impairment != &Impairment::default() {
        eprintln!(
            "fault injection: dropped {} and reordered {} received datagrams",
            summary.stats.dropped, summary.stats.reordered
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn opts(texts: &[&str]) -> Vec<LutOpt> {
        texts.iter().map(|t| t.parse().unwrap()).collect()
    }

    #[test]
    fn io_config_takes_the_io_settings_and_leaves_the_stacks() {
        let (config, rest) =
            io_config(IoMode::Nesquic, &opts(&["gso=off", "mmsg=off", "sndbuf=9000", "cc=bbr"])).unwrap();
        assert!(!config.switches.gso && !config.switches.mmsg && config.switches.gro);
        assert_eq!((config.recv_buffer, config.send_buffer), (IoConfig::default().recv_buffer, Some(9000)));
        assert_eq!(rest, opts(&["cc=bbr"]));
        let err = io_config(IoMode::Plain, &opts(&["gro=on"])).unwrap_err().to_string();
        assert!(err.contains("--io plain has no gro switch"), "{err}");
    }
}
