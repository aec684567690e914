//! The profile names a sample from the mapping that was live when it was taken (issue 36: a
//! client with 7.3% `[unknown: no mapping]` leaves): code a process mapped after one read of
//! its maps and unmapped before the last, and code a child ran before its `exec`.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use nesquic_ebpf::profile::{build, Classifier, MapsCache, RawSample, Unresolved};
use nesquic_ebpf::{Catalog, Role};

/// Steps on a line of stdin each: `dlopen(argv[1])` and print `nq_plugin_work`'s address;
/// `dlclose` it; exit.
const PROGRAM: &str = r#"
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    char line[16];
    if (argc < 2 || !fgets(line, sizeof line, stdin)) return 1;
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    printf("%p\n", dlsym(lib, "nq_plugin_work"));
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin)) return 1;
    dlclose(lib);
    printf("closed\n");
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin)) return 1;
    return 0;
}
"#;

const PLUGIN: &str = "int nq_plugin_work(int x) { int s = 0; for (int i = 0; i < x; i++) s += i * x; return s; }\n";

/// Compiles `source` (C) with the system's `cc` and `args` into `dir/name`.
fn cc(dir: &Path, name: &str, source: &str, args: &[&str]) -> std::path::PathBuf {
    let (src, out) = (dir.join(format!("{name}.c")), dir.join(name));
    std::fs::write(&src, source).expect("write source");
    let status = Command::new("cc").args(args).arg("-o").arg(&out).arg(&src).status().expect("run cc");
    assert!(status.success(), "cc {}", src.display());
    out
}

fn classifier() -> Classifier {
    Classifier::new(&Catalog::builtin().expect("builtin catalog").components).expect("catalog rules compile")
}

fn sample(tgid: u32, user: Vec<u64>) -> RawSample {
    RawSample { tgid, role: Role::Server.index(), user, kernel: vec![], sp_word: 0, stack_lost: false, count: 7 }
}

/// [`PROGRAM`] running with [`PLUGIN`], both built in `dir`: its stdin and stdout.
struct Dlopener {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Dlopener {
    fn start(dir: &Path) -> Self {
        let plugin = cc(dir, "libnqplugin.so", PLUGIN, &["-shared", "-fPIC", "-O1"]);
        let program = cc(dir, "dlopener", PROGRAM, &["-O1"]);
        let mut child = Command::new(&program)
            .arg(&plugin)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the program");
        let (stdin, stdout) =
            (child.stdin.take().expect("stdin"), BufReader::new(child.stdout.take().expect("stdout")));
        Dlopener { child, stdin, stdout }
    }
}

/// A library `dlopen`ed a few ms after the first read (the old cache re-read only every 100 ms)
/// and `dlclose`d before the last read (the old cache kept only the last map): its sample was
/// `[unknown: no mapping]`, and is named now.
#[test]
fn a_library_mapped_between_reads_and_unmapped_before_the_last_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Dlopener { mut child, mut stdin, mut stdout } = Dlopener::start(dir.path());
    let pid = child.id();
    let mut step = |what: &str| {
        writeln!(stdin, "go").expect("write a step");
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read the program's line");
        assert!(!line.is_empty(), "the program ended before it {what}");
        line.trim().to_string()
    };

    let mut cache = MapsCache::default();
    cache.refresh([pid]);
    let address = step("opened the library");
    let function = u64::from_str_radix(address.trim_start_matches("0x"), 16).expect("an address");
    // Past the first look's gap (1 ms): the library changed the executable memory's size.
    std::thread::sleep(Duration::from_millis(5));
    cache.refresh([pid]);
    assert_eq!(step("closed the library"), "closed");
    // A look after the library is gone: the size changed again.
    std::thread::sleep(Duration::from_millis(150));
    cache.refresh([pid]);
    writeln!(stdin, "go").expect("let it exit");
    assert!(child.wait().expect("wait").success());

    let maps = std::mem::take(&mut cache.maps);
    let samples = [sample(pid, vec![function + 4])];
    let profile = build(&samples, &maps, &[Role::Server], &classifier(), 999);
    let server = &profile.roles[0];
    assert_eq!(server.samples, 7);
    assert_eq!(server.unknown_leaf_samples(), 0, "unknown leaves: {:?}", server.unknown_leaves);
    assert_eq!(
        server.top_functions.iter().map(|s| (s.name.as_str(), s.samples)).collect::<Vec<_>>(),
        [("nq_plugin_work", 7)]
    );
    // An address no read ever saw mapped stays unknown.
    let samples = [sample(pid, vec![8])];
    let profile = build(&samples, &maps, &[Role::Server], &classifier(), 999);
    let unknown: Vec<_> = profile.roles[0].unknown_leaves.iter().map(|s| (s.name.as_str(), s.samples)).collect();
    assert_eq!(unknown, [(Unresolved::NoMapping.label(), 7)]);
}

/// Where this test process's code is: what a child forked from it runs until its `exec`.
#[inline(never)]
fn before_exec_marker(x: u64) -> u64 {
    std::hint::black_box(x).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// A sample taken in a child between its fork and its `exec` (Nesquic holds its LUTs there
/// while it attaches the probes) is in the parent's image: the old cache resolved it against
/// the map after the `exec` (`[unknown: no mapping]`); it is named from the parent's now. A
/// stack the child's own map covers still resolves there.
#[test]
fn a_sample_before_the_exec_is_named_from_the_forked_image() {
    let mut child = Command::new("sleep").arg("5").spawn().expect("start sleep");
    let pid = child.id();
    let mut cache = MapsCache::default();
    cache.refresh([pid]);
    // A read as the exec begins may find the new address space still empty: the next look
    // (1 ms on) reads again.
    std::thread::sleep(Duration::from_millis(5));
    cache.refresh([pid]);
    // The child's first executable mapping (its own code, after the exec).
    let child_maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("the child's maps");
    let _ = child.kill();
    let _ = child.wait();
    let maps = std::mem::take(&mut cache.maps);
    let child_code = child_maps
        .lines()
        .find(|l| l.split_whitespace().nth(1).is_some_and(|p| p.contains('x')))
        .and_then(|l| l.split('-').next())
        .and_then(|s| u64::from_str_radix(s, 16).ok())
        .expect("an executable mapping");

    let marker = before_exec_marker as *const () as usize as u64;
    assert_eq!(before_exec_marker(1), 0x9e37_79b9_7f4a_7c15);
    let samples = [sample(pid, vec![marker + 1])];
    let profile = build(&samples, &maps, &[Role::Server], &classifier(), 999);
    let server = &profile.roles[0];
    assert_eq!(server.unknown_leaf_samples(), 0, "unknown leaves: {:?}", server.unknown_leaves);
    let leaf = &server.top_functions[0].name;
    assert!(leaf.ends_with("before_exec_marker"), "{leaf}");
    // A stack only partly in the parent's image (a JIT's code under it, say) is not named
    // from it.
    let samples = [sample(pid, vec![marker + 1, 9])];
    let profile = build(&samples, &maps, &[Role::Server], &classifier(), 999);
    let unknown: Vec<_> = profile.roles[0].unknown_leaves.iter().map(|s| (s.name.as_str(), s.samples)).collect();
    assert_eq!(unknown, [(Unresolved::NoMapping.label(), 7)]);
    // A stack the child's own map covers is not read in the parent's image.
    let samples = [sample(pid, vec![child_code + 1, marker + 1])];
    let profile = build(&samples, &maps, &[Role::Server], &classifier(), 999);
    let (stack, n) = &profile.roles[0].folded[0];
    assert_eq!(*n, 7);
    assert!(stack.starts_with(Unresolved::NoMapping.label()), "{stack}");
}

/// Refreshes `pid` every millisecond for `ms`.
fn refresh_for(cache: &mut MapsCache, pid: u32, ms: u64) {
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_millis(ms) {
        cache.refresh([pid]);
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A process's maps are read only when its executable memory changes size, not polled every
/// 100 ms (those reads measured 1.009x msquic CPU per GB): none while it holds still, and one
/// that finds the new library when it `dlopen`s one.
#[test]
fn after_start_up_the_maps_are_read_when_code_is_mapped_not_polled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Dlopener { mut child, mut stdin, mut stdout } = Dlopener::start(dir.path());
    let pid = child.id();
    let mut cache = MapsCache::default();
    // First seen: read at once (and this process's own maps, its image until the exec).
    refresh_for(&mut cache, pid, 300);
    let start_up = cache.take_reads();
    assert!(start_up.reads >= 2, "{start_up:?}");
    // Nothing changes: no read (polling every 100 ms would have read 3 times).
    refresh_for(&mut cache, pid, 300);
    let still = cache.take_reads();
    assert_eq!((still.reads, still.code_changes), (0, 0), "{still:?}");
    // A library is mapped: its size change is seen within 50 ms.
    writeln!(stdin, "go").expect("write a step");
    let mut line = String::new();
    stdout.read_line(&mut line).expect("read the library's address");
    let function = u64::from_str_radix(line.trim().trim_start_matches("0x"), 16).expect("an address");
    refresh_for(&mut cache, pid, 120);
    let mapped = cache.take_reads();
    assert_eq!((mapped.reads, mapped.code_changes), (1, 1), "{mapped:?}");
    for _ in 0..2 {
        writeln!(stdin, "go").expect("let it close the library and exit");
    }
    assert!(child.wait().expect("wait").success());
    let maps = std::mem::take(&mut cache.maps);
    let profile = build(&[sample(pid, vec![function + 4])], &maps, &[Role::Server], &classifier(), 999);
    let named: Vec<_> = profile.roles[0].top_functions.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(named, ["nq_plugin_work"]);
}

/// A process that has exited is looked at less and less often, like one whose code holds still:
/// its look left due made `next_read` say 0, and the caller poll every millisecond for the rest
/// of the run.
#[test]
fn a_process_gone_does_not_keep_its_look_due() {
    let mut child = Command::new("true").spawn().expect("start true");
    let pid = child.id();
    child.wait().expect("wait");
    let mut cache = MapsCache::default();
    refresh_for(&mut cache, pid, 200);
    let refreshed = std::time::Instant::now();
    cache.refresh([pid]);
    let left = cache.next_read().expect("a read or look is scheduled");
    // The looks are 50 ms apart by now: only a stall that long between the two calls leaves 0.
    if refreshed.elapsed() < Duration::from_millis(40) {
        assert!(left > Duration::ZERO, "a look due at once for a process gone");
    }
}
