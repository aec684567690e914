//! Every LUT's settings, accepted and refused, and the command line they become.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use clap::Parser;
use nesquic_protocol::cli::{IoMode, LutCli};
use nesquic_protocol::options::LutOpt;
use nesquic_testcases::Workload;

use crate::launch::{ClientSpec, ServerSpec};
use crate::tls::CertFiles;
use crate::{find_lut, Descriptor};

fn descriptor(name: &str) -> &'static Descriptor {
    find_lut(name).unwrap().descriptor()
}

/// (LUT, I/O path, accepted, refused with a word of the reason).
type Row = (&'static str, IoMode, &'static [&'static str], &'static [(&'static str, &'static str)]);

const TABLE: &[Row] = &[
    (
        "quinn",
        IoMode::Native,
        &["gso=off", "rcvbuf=1000", "sndbuf=1000", "cc=newreno", "cc=bbr", "cipher=chacha20"],
        &[("gro=off", "only with --io nesquic"), ("cc=copa", "cubic|newreno|bbr"), ("pacing=off", "no pacing")],
    ),
    (
        "quinn",
        IoMode::Nesquic,
        &["gso=off", "gro=off", "mmsg=off", "cipher=aes256gcm"],
        &[("profile=low-latency", "no profile")],
    ),
    ("quinn", IoMode::Plain, &["rcvbuf=1", "cc=cubic"], &[("gso=on", "only with --io native, nesquic")]),
    (
        "quiche",
        IoMode::Nesquic,
        &["gso=off", "gro=on", "mmsg=off", "rcvbuf=9", "cc=newreno", "pacing=off"],
        &[("cipher=chacha20", "quiche::Config"), ("cc=bbr3", "cubic|newreno|bbr")],
    ),
    ("quiche", IoMode::Plain, &["pacing=on", "sndbuf=9"], &[("mmsg=on", "only with --io nesquic")]),
    (
        "msquic",
        IoMode::Native,
        &["profile=low-latency", "profile=max-throughput", "cc=bbr", "cipher=aes128gcm"],
        &[("cc=newreno", "no NewReno"), ("rcvbuf=100", "sizes their buffers itself"), ("gso=off", "no gso")],
    ),
    (
        "quic-go",
        IoMode::Native,
        &["gso=off", "rcvbuf=1000000", "cc=cubic"],
        &[("cipher=chacha20", "crypto/tls"), ("cc=bbr", "only Cubic"), ("gro=off", "no gro")],
    ),
    (
        "s2n-quic",
        IoMode::Native,
        &["gso=off", "gro=off", "cc=bbr", "sndbuf=5"],
        &[("cipher=chacha20", "security policies"), ("cc=newreno", "no NewReno"), ("mmsg=off", "no mmsg")],
    ),
    (
        "tquic",
        IoMode::Nesquic,
        &["gso=off", "cc=copa", "cc=bbr3"],
        &[("cipher=chacha20", "no cipher"), ("cc=newreno", "no NewReno"), ("pacing=off", "no pacing")],
    ),
    (
        "tcp-tls",
        IoMode::Native,
        &["cc=bbr", "rcvbuf=100", "cipher=aes256gcm", "ktls=on", "ktls=off"],
        &[("gso=on", "kernel TCP"), ("mmsg=off", "kernel TCP"), ("profile=low-latency", "no profile")],
    ),
    (
        "aioquic",
        IoMode::Native,
        &["cc=cubic", "cc=newreno", "cipher=chacha20", "rcvbuf=1"],
        &[("gso=off", "one datagram per sendto"), ("cc=bbr", "no BBR")],
    ),
    (
        "ngtcp2",
        IoMode::Native,
        &["gso=off", "gro=off", "cc=bbr", "cipher=chacha20"],
        &[("pacing=off", "no pacing"), ("cc=copa", "cubic|newreno|bbr")],
    ),
];

#[test]
fn every_lut_accepts_its_settings_and_refuses_others_naming_itself_and_what_it_accepts() {
    let mut luts: Vec<&str> = TABLE.iter().map(|row| row.0).collect();
    luts.dedup();
    assert_eq!(luts.len(), crate::registry::DESCRIPTORS.len(), "a LUT is missing from the table");
    for (name, io, accepted, refused) in TABLE {
        let d = descriptor(name);
        let texts: Vec<String> = accepted.iter().map(ToString::to_string).collect();
        let parsed = d.parse_options(*io, &texts).unwrap_or_else(|e| panic!("{name}/{io}: {e}"));
        assert_eq!(parsed.iter().map(ToString::to_string).collect::<Vec<_>>(), texts);
        for (text, why) in *refused {
            let err = d.parse_options(*io, &[text.to_string()]).unwrap_err().to_string();
            let head = format!("LUT '{name}' with --io {io} does not understand --lut-opt {text}: ");
            assert!(err.starts_with(&head) && err.contains(why), "{name}/{io} {text}: {err}");
            assert!(err.ends_with(&format!(". {name} accepts: {}", d.accepted(*io))), "{err}");
        }
    }
}

#[test]
fn the_accepted_set_is_listed_by_key_and_values() {
    assert_eq!(
        descriptor("s2n-quic").accepted(IoMode::Native),
        "gso=on|off, gro=on|off, rcvbuf=BYTES, sndbuf=BYTES, cc=cubic|bbr"
    );
    assert_eq!(crate::exec::EXEC.accepted(IoMode::Native), "none");
}

#[test]
fn unknown_and_malformed_settings_are_refused_by_name() {
    let d = descriptor("quinn");
    for (text, why) in [
        ("foo=1", ": unknown option."),
        ("gso", ": not KEY=VALUE."),
        ("cc=vegas", ": cc takes cubic|newreno|bbr|bbr3|copa."),
    ] {
        let err = d.parse_options(IoMode::Native, &[text.into()]).unwrap_err().to_string();
        assert!(err.contains(&format!("--lut-opt {text}{why}")), "{err}");
        assert!(err.contains("quinn accepts: gso=on|off, rcvbuf=BYTES"), "{err}");
    }
}

#[test]
fn the_command_line_built_from_typed_settings_parses_back_to_them() {
    let certs = CertFiles { cert: "/c.der".into(), key: "/k.der".into() };
    let options: Vec<LutOpt> =
        ["gso=off", "rcvbuf=4194304", "cc=bbr", "cipher=chacha20"].iter().map(|t| t.parse().unwrap()).collect();
    let workload = Workload { connections: 3, parallel: 2, streams: 4, size: 1000 };
    let lut = find_lut("quinn").unwrap();
    let qlog = Path::new("/q.sqlog");
    let server = lut.server_args(&ServerSpec {
        listen: "127.0.0.1:0".parse().unwrap(),
        workload,
        certs: &certs,
        io: IoMode::Native,
        qlog: Some(qlog),
        options: &options,
    });
    let client = lut.client_args(&ClientSpec {
        connect: "127.0.0.1:4433".parse().unwrap(),
        certs: &certs,
        workload,
        io: IoMode::Native,
        qlog: None,
        options: &options,
    });
    for (args, size) in [(server, 0), (client, 1000)] {
        let command = LutCli::try_parse_from(std::iter::once("lut".into()).chain(args)).unwrap().command;
        assert_eq!(command.options().unwrap(), options);
        assert_eq!(command.workload(), Workload { size, parallel: command.parallel(), ..workload });
        assert_eq!(command.io(), IoMode::Native);
    }
}

#[test]
fn versions_come_from_lock_files_and_missing_builds_say_how_to_build() {
    for (name, prefix) in [
        ("quinn", "0.11."),
        ("aioquic", "1."),
        ("quic-go", "v"),
        ("s2n-quic", "1."),
        ("tquic", "1."),
        ("tcp-tls", "rustls 0.23."),
    ] {
        let v = find_lut(name).unwrap().version();
        assert!(v.starts_with(prefix) && v.matches('.').count() == 2, "{name}: {v}");
    }
    for (name, hint) in [
        ("aioquic", "python3"),
        ("ngtcp2", "libngtcp2-dev"),
        ("quic-go", "go.mod"),
        ("s2n-quic", "lut-adapters/s2n-quic/Cargo.toml"),
        ("tquic", "lut-adapters/tquic/Cargo.toml"),
        ("quinn", "cargo build --release -p nesquic-lut-bins"),
    ] {
        let missing = find_lut(name).unwrap().binary_path(Path::new("/nonexistent")).unwrap_err().to_string();
        assert!(missing.contains(hint) && missing.contains(&format!("nesquic-lut-{name}")), "{missing}");
    }
}

#[test]
fn io_paths_and_workload_shapes_are_checked() {
    assert!(descriptor("tcp-tls").check_io(IoMode::Nesquic).is_err());
    let err = descriptor("tquic").check_io(IoMode::Native).unwrap_err().to_string();
    assert_eq!(err, "LUT 'tquic' does not support --io native; it supports: nesquic, plain");
    let many = Workload { connections: 2, parallel: 1, streams: 1, size: 1 };
    assert!(descriptor("quiche").check_workload(IoMode::Plain, &many).is_ok());
    assert!(descriptor("tquic").check_workload(IoMode::Nesquic, &many).is_ok());
    let err = crate::exec::EXEC.check_workload(IoMode::Native, &many).unwrap_err().to_string();
    assert!(
        err.contains("2 connection(s) with 1 stream(s)") && err.contains("no connection or stream counts"),
        "{err}"
    );
    assert_eq!(descriptor("tcp-tls").executable_name(), "nesquic-lut-tcp-tls");
}
