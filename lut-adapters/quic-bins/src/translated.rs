//! The LUT-process side of a sans-IO stack: parses the common command line's I/O settings, binds
//! Nesquic's I/O layer, runs the translation shim and reports in the protocol's JSON lines.
//! Used by `nesquic-lut-quiche` and by `nesquic-lut-quinn --io nesquic|plain`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use nesquic_io::{IoConfig, IoSwitches, UdpIo};
use nesquic_translation::{Impairment, Stack, StackOptions, Summary};

use nesquic_protocol::report::{IoSettings, LutEvent};
use nesquic_protocol::{IoMode, LutCommand};

/// The I/O layer configuration for `io` with `gso=`, `gro=`, `mmsg=` options applied; other
/// options are returned for the caller. `plain` ignores the switches (it has none).
pub fn io_config(io: IoMode, opts: &[String]) -> Result<(IoConfig, Vec<String>)> {
    let mut config = IoConfig::default();
    if io == IoMode::Plain {
        config.switches = IoSwitches::plain();
    }
    let mut rest = Vec::new();
    for opt in opts {
        let (key, value) = opt.split_once('=').with_context(|| format!("option {opt:?} is not KEY=VALUE"))?;
        match key {
            "rcvbuf" => {
                config.recv_buffer = Some(value.parse().with_context(|| format!("{opt}: bytes expected"))?);
                continue;
            }
            "sndbuf" => {
                config.send_buffer = Some(value.parse().with_context(|| format!("{opt}: bytes expected"))?);
                continue;
            }
            _ => {}
        }
        let on = match value {
            "on" => true,
            "off" => false,
            _ => {
                rest.push(opt.clone());
                continue;
            }
        };
        match key {
            "gso" if io == IoMode::Nesquic => config.switches.gso = on,
            "gro" if io == IoMode::Nesquic => config.switches.gro = on,
            "mmsg" if io == IoMode::Nesquic => config.switches.mmsg = on,
            "gso" | "gro" | "mmsg" if io == IoMode::Plain => {
                bail!("--lut-opt {opt}: --io plain has no {key} switch (it is one sendto/recvfrom per datagram)")
            }
            _ => rest.push(opt.clone()),
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
    match command {
        LutCommand::Server { listen, cert, key, io, qlog, opts, .. } => {
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
        LutCommand::Client { connect, ca, io, qlog, opts, .. } => {
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

fn stack_options<S: Stack>(rest: &[String], qlog: Option<PathBuf>, streams: u32) -> Result<StackOptions> {
    let mut options = StackOptions { pacing: true, max_streams: streams, ..StackOptions::default() };
    for opt in rest {
        // Only quiche exposes pacing as a switch (quinn-proto always paces internally).
        match (S::NAME, opt.as_str()) {
            ("quiche", "pacing=on") => options.pacing = true,
            ("quiche", "pacing=off") => options.pacing = false,
            (_, o) if o.starts_with("cc=") => options.cc = Some(o["cc=".len()..].to_string()),
            ("quinn-proto", o) if o.starts_with("cipher=") => options.cipher = Some(o["cipher=".len()..].to_string()),
            _ => bail!("{} over nesquic-io does not understand option {opt:?}", S::NAME),
        }
    }
    if let Some(path) = qlog {
        // With several connections quinn-proto writes every connection's events into the one
        // file (tagged by connection ID); quiche keeps one trace per connection, so the file
        // holds the first connection's. Both libraries start their qlog clock when the connection is created, which happens
        // right after this; quinn-proto is told this exact instant.
        let (start, wall) = (Instant::now(), std::time::SystemTime::now());
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
