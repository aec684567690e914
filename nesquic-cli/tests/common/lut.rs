//! Helpers for the end-to-end tests of one LUT executable (`lut_*.rs`): where it is, what a run's
//! summary says about it (payload verified, probe rows per role), certificates the run did not
//! generate, and running it directly through `--lut exec`.

use std::path::{Path, PathBuf};

use super::{
    category_bytes, category_calls, find_syscall, nesquic, role_metrics, stderr, Role, RoleMetrics, RunRecord,
};

/// The directory `nesquic` and the LUT executables are built into.
pub fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_nesquic")).parent().expect("binary has a directory").to_path_buf()
}

/// `nesquic-lut-<name>`, which must have been built (`how` says how).
pub fn lut_binary(name: &str, how: &str) -> PathBuf {
    let path = target_dir().join(format!("nesquic-lut-{name}"));
    assert!(path.exists(), "{} missing: {how}", path.display());
    path
}

/// The first repetition carried `bytes` and its payload was verified.
pub fn verified(report: &RunRecord, bytes: u64) {
    let rep = &report.repetitions[0];
    assert_eq!((rep.bytes, rep.payload_verified), (bytes, true), "{rep:?}");
}

/// One side's probe figures.
pub fn role(report: &RunRecord, role: Role) -> &RoleMetrics {
    role_metrics(report, role)
}

/// Calls counted for a crypto category on one side.
pub fn calls(role: &RoleMetrics, category: &str) -> u64 {
    category_calls(role, category)
}

/// Bytes recorded for a crypto category on one side (where the catalog names a length argument).
pub fn crypto_bytes(role: &RoleMetrics, category: &str) -> u64 {
    category_bytes(role, category)
}

/// (calls, datagrams, messages) of one syscall row.
pub fn syscall(role: &RoleMetrics, name: &str) -> (u64, u64, u64) {
    let s = find_syscall(role, name).unwrap_or_else(|| panic!("no {name} in {role:?}"));
    (s.timing.calls, s.datagrams, s.messages)
}

/// A self-signed DER certificate for `localhost` that the run did not generate.
pub fn foreign_certificate(dir: &Path) -> PathBuf {
    let (key, cert) = (dir.join("key.pem"), dir.join("other.der"));
    let out = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1"])
        .args(["-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost", "-outform", "DER", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl (scripts/setup.sh installs it)");
    assert!(out.status.success(), "{}", stderr(&out));
    cert
}

/// `nesquic run --lut exec` with these two commands (NESQUIC_* variables as docs/protocol.md says).
pub fn exec_run(server: &str, client: &str) -> std::process::Output {
    nesquic()
        .args(["run", "--lut", "exec", "--size", "2MB", "--server-cmd", server, "--client-cmd", client])
        .output()
        .expect("run nesquic")
}

/// The `--server-cmd` that runs `binary` as the server.
pub fn server_cmd(binary: &Path) -> String {
    format!("{} server --listen $NESQUIC_LISTEN --cert $NESQUIC_CERT --key $NESQUIC_KEY", binary.display())
}

/// The `--client-cmd` that runs `binary` as a client trusting `ca`.
pub fn client_cmd(binary: &Path, ca: &str) -> String {
    format!("{} client --connect $NESQUIC_CONNECT --ca {ca} --size $NESQUIC_SIZE", binary.display())
}

/// `binary`'s client refuses a certificate the run did not generate (its error says `why`) and
/// accepts the run's own, with the same commands (`extra` appended to both).
pub fn only_the_runs_certificate_is_trusted(binary: &Path, extra: &str, why: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let other = foreign_certificate(dir.path());
    let server = server_cmd(binary) + extra;
    let out = exec_run(&server, &(client_cmd(binary, &other.display().to_string()) + extra));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("client") && err.contains(why), "{err}");
    let out = exec_run(&server, &(client_cmd(binary, "$NESQUIC_CA") + extra));
    assert!(out.status.success(), "{}", stderr(&out));
}

/// 5 MB over loopback and over veth, payload verified, the LUT's name and a version starting
/// with `version_prefix` in the summary, no namespace left behind.
pub fn bulk_transfers_are_verified_over_loopback_and_veth(lut: &str, version_prefix: &str) {
    for link in ["loopback", "veth"] {
        let report = super::run_record(&["--lut", lut, "--size", "5MB", "--link", link]);
        verified(&report, 5_000_000);
        assert_eq!(report.lut.name, lut, "{:?}", report.lut);
        assert!(report.lut.version.starts_with(version_prefix), "{:?}", report.lut);
    }
    assert!(super::leaked_namespaces().is_empty(), "left {:?}", super::leaked_namespaces());
}

/// quinn's server feeds `binary`'s client and `binary`'s server feeds quinn's client (`extra`
/// appended to `binary`'s commands): the payload protocol is the same on both.
pub fn payloads_agree_with_quinn(binary: &Path, extra: &str) {
    let quinn = target_dir().join("nesquic-lut-quinn");
    let out = exec_run(&server_cmd(&quinn), &(client_cmd(binary, "$NESQUIC_CA") + extra));
    assert!(out.status.success(), "quinn -> {}: {}", binary.display(), stderr(&out));
    let out = exec_run(&(server_cmd(binary) + extra), &client_cmd(&quinn, "$NESQUIC_CA"));
    assert!(out.status.success(), "{} -> quinn: {}", binary.display(), stderr(&out));
}

/// A byte the server flipped is reported at its offset.
pub fn a_corrupted_byte_is_reported_at_its_offset(lut: &str) {
    let out = nesquic()
        .args(["run", "--lut", lut, "--size", "2MB"])
        .env("NESQUIC_FAULT_SERVER_CORRUPT_AT", "1234567")
        .env("NESQUIC_ALLOW_FAULTS", "1")
        .output()
        .expect("run nesquic");
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("payload mismatch at byte offset 1234567"), "{err}");
}

/// With `--lut-qlog`, each side's trace holds more than 10 occurrences of `marker` (the
/// library's own packet_sent events, merged).
pub fn the_library_qlog_is_merged(lut: &str, marker: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().join("run");
    let out = nesquic()
        .args(["run", "--lut", lut, "--size", "2MB", "--lut-qlog", "--out"])
        .arg(&out_dir)
        .output()
        .expect("run nesquic");
    assert!(out.status.success(), "{}", stderr(&out));
    for side in ["server", "client"] {
        let trace = std::fs::read_to_string(out_dir.join(format!("{side}.sqlog"))).expect("trace");
        let sent = trace.matches(marker).count();
        assert!(sent > 10, "{lut} {side}: {sent} of the library's {marker} events merged");
    }
}

/// With `--lut-opt OPTION=off` (gso, gro) `side` moves exactly 1 datagram per message of
/// `syscall` (calls that moved data: a receive that found nothing, EAGAIN, carries no message),
/// with `OPTION=on` at least 3.
pub fn offload_off_is_one_datagram_per_syscall_and_on_batches(lut: &str, option: &str, side: Role, syscall_name: &str) {
    let mut per_call = Vec::new();
    for value in ["off", "on"] {
        let report = super::run_record(&[
            "--lut",
            lut,
            "--size",
            "5MB",
            "--probe",
            "io",
            "--lut-opt",
            &format!("{option}={value}"),
        ]);
        verified(&report, 5_000_000);
        let (_, datagrams, messages) = syscall(role(&report, side), syscall_name);
        per_call.push(datagrams as f64 / messages as f64);
    }
    assert_eq!(per_call[0], 1.0, "{lut} {option}=off: {} datagrams per {syscall_name}", per_call[0]);
    assert!(per_call[1] >= 3.0, "{lut} {option}=on: {} datagrams per {syscall_name}", per_call[1]);
}

/// The server's (calls, datagrams, messages) on `syscall` in a 5 MB `--probe io` run of `lut`
/// with these `--lut-opt` settings.
pub fn server_sends(lut: &str, opts: &[&str], syscall_name: &str) -> (u64, u64, u64) {
    let mut args = vec!["--lut", lut, "--size", "5MB", "--probe", "io"];
    for o in opts {
        args.extend(["--lut-opt", o]);
    }
    let report = super::run_record(&args);
    verified(&report, 5_000_000);
    syscall(role(&report, Role::Server), syscall_name)
}

/// `nesquic run --lut LUT --size 1MB ARGS` fails, saying `why`, for each pair.
pub fn refused_with_the_reason(lut: &str, cases: &[(&[&str], &str)]) {
    for (args, why) in cases {
        let out = nesquic().args(["run", "--lut", lut, "--size", "1MB"]).args(*args).output().expect("run nesquic");
        assert!(!out.status.success(), "{args:?}");
        let err = stderr(&out);
        assert!(err.contains(why), "{args:?}: {err}");
    }
}

/// The packet crypto of a `--probe io,crypto` run of a stack that seals and opens each packet
/// once: seal, open, header protection and handshake counted on both sides; one header
/// protection per seal or open; one seal per datagram the server sent on `send` (GSO runs, several
/// per message) and one open per datagram the client received on `recv`, give or take the
/// handshake packets that share a datagram. Datagrams a full receive buffer dropped are neither
/// received nor opened, so this holds with loss too.
pub fn one_seal_or_open_per_datagram(report: &RunRecord, send: &str, recv: &str) {
    let (server, client) = (role(report, Role::Server), role(report, Role::Client));
    for (name, r) in [("server", server), ("client", client)] {
        for category in ["crypto.seal", "crypto.open", "crypto.header_protection", "crypto.handshake"] {
            assert!(calls(r, category) > 0, "{name}: no {category}");
        }
        let (seal, open, hp) = (calls(r, "crypto.seal"), calls(r, "crypto.open"), calls(r, "crypto.header_protection"));
        assert!(hp.abs_diff(seal + open) <= 16, "{name}: {hp} header protections for {seal} seals + {open} opens");
    }
    let (_, sent, messages) = syscall(server, send);
    let seals = calls(server, "crypto.seal");
    assert!(seals >= sent && seals <= sent + 16, "server: {seals} seals for {sent} datagrams sent");
    assert!(sent >= 3 * messages, "GSO packs several datagrams per message: {sent} in {messages}");
    let (_, received, _) = syscall(client, recv);
    let opens = calls(client, "crypto.open");
    assert!(opens.abs_diff(received) <= 16, "client: {opens} opens for {received} datagrams received");
}

/// A published release laid out as a checkout of its repository: `krate = "=version"` resolved
/// from crates.io in a throwaway project (`cargo metadata` downloads and unpacks what it needs),
/// then each of `layout`'s (crate, directory) copied from the unpacked registry source to
/// `checkout/directory`. Returns the versions copied, in `layout`'s order.
pub fn registry_release_as_checkout(
    krate: &str,
    version: &str,
    layout: &[(&str, &str)],
    checkout: &Path,
) -> Vec<String> {
    let project = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(project.path().join("src")).expect("src");
    std::fs::write(project.path().join("src/lib.rs"), "").expect("lib.rs");
    std::fs::write(
        project.path().join("Cargo.toml"),
        format!(
            "[package]\nname = \"nesquic-release-fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n\
             [dependencies]\n{krate} = \"={version}\"\n\n[workspace]\n"
        ),
    )
    .expect("Cargo.toml");
    let out = std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(project.path().join("Cargo.toml"))
        .output()
        .expect("cargo metadata");
    assert!(out.status.success(), "cargo metadata ({krate} ={version} from crates.io): {}", stderr(&out));
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    let packages = metadata["packages"].as_array().expect("packages");
    layout
        .iter()
        .map(|(name, dir)| {
            let package = packages
                .iter()
                .find(|p| p["name"] == *name)
                .unwrap_or_else(|| panic!("{krate} {version}'s graph has no {name}"));
            let manifest = Path::new(package["manifest_path"].as_str().expect("manifest_path"));
            let to = checkout.join(dir);
            std::fs::create_dir_all(to.parent().expect("a parent")).expect("mkdir");
            let st = std::process::Command::new("cp")
                .arg("-r")
                .arg(manifest.parent().expect("crate dir"))
                .arg(&to)
                .status()
                .expect("cp");
            assert!(st.success(), "copy {name}");
            package["version"].as_str().expect("version").to_string()
        })
        .collect()
}

/// Makes the function whose signature line is `signature` in `file` append `word` and a newline
/// to `log` when it is called (the first statement of its body): proof that this source ran.
pub fn mark_entry(file: &Path, signature: &str, log: &Path, word: &str) {
    let mut text = std::fs::read_to_string(file).expect("read");
    let at = text.find(signature).unwrap_or_else(|| panic!("{} has no {signature:?}", file.display()));
    let body = at + text[at..].find("{\n").expect("body") + 2;
    let mark = format!(
        "    {{\n        use std::io::Write as _;\n        if let Ok(mut f) = \
         std::fs::OpenOptions::new().create(true).append(true).open({:?}) {{\n            \
         let _ = writeln!(f, \"{word}\");\n        }}\n    }}\n",
        log.to_str().expect("UTF-8 path")
    );
    text.insert_str(body, &mark);
    std::fs::write(file, text).expect("write");
}

/// The words [`mark_entry`]'s marks wrote to `log`, sorted.
pub fn marks(log: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut words: Vec<String> = text.lines().map(String::from).collect();
    words.sort_unstable();
    words
}
