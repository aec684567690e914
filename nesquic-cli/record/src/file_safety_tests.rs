//! The run directory's files as a hostile tree would have them: links, devices, foreign owners
//! (files, recorder and stacks together, so it sits beside them rather than inside one).

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

use crate::files::*;
use crate::stacks::{self, StackFile};
use nesquic_protocol::Role;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[test]
fn a_run_root_another_user_controls_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("nesquic-runs");
    std::fs::create_dir(&root).expect("mkdir");
    // Writable by everyone, not sticky: anyone may swap a run directory for a link.
    chmod(&root, 0o777);
    let e = crate::recorder::out_dir_under(&root, "quinn").expect_err("world-writable root").to_string();
    assert!(e.contains("writable by group or others") && e.contains("0777") && e.contains("--out"), "{e}");
    // Sticky (like /tmp): nobody may rename what another user made.
    chmod(&root, 0o1777);
    crate::recorder::out_dir_under(&root, "quinn").expect("sticky root is fine");
    chmod(&root, 0o755);
    let run = crate::recorder::out_dir_under(&root, "quinn").expect("own root");
    // --out DIR: its parent may be group-writable (umask 002), not writable by others.
    chmod(&root, 0o777);
    let e = crate::recorder::prepare_out_dir(&root.join("out-1")).expect_err("--out in a shared dir").to_string();
    assert!(e.contains("writable by others"), "{e}");
    chmod(&root, 0o775);
    crate::recorder::prepare_out_dir(&root.join("out-2")).expect("--out in a group-writable dir");
    // An existing --out directory that others may write to is refused like a run root.
    std::fs::create_dir(root.join("out-3")).expect("mkdir");
    chmod(&root.join("out-3"), 0o777);
    assert!(crate::recorder::prepare_out_dir(&root.join("out-3")).is_err());
    chmod(&root, 0o755);
    assert_eq!(std::fs::metadata(&run).expect("stat").permissions().mode() & 0o777, 0o755);
    if is_root() {
        // Owned by another user (nobody): refused, naming the owner.
        std::os::unix::fs::chown(&root, Some(65534), Some(65534)).expect("chown");
        let e = crate::recorder::out_dir_under(&root, "quinn").expect_err("foreign root").to_string();
        assert!(e.contains("owned by uid 65534"), "{e}");
        // sudo nesquic run --out DIR in another user's checkout: the parent's owner does not matter.
        crate::recorder::prepare_out_dir(&root.join("mine")).expect("--out under another user's dir");
    }
}

#[test]
fn files_are_never_written_through_links_or_into_devices() {
    let (run, outside) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let victim = outside.path().join("victim");
    std::fs::write(&victim, "precious").expect("write");
    symlink(&victim, run.path().join("report.html")).expect("symlink");
    let e = write(&run.path().join("report.html"), b"page").expect_err("through a link").to_string();
    assert!(e.contains("is a symbolic link"), "{e}");
    // The profile's folded stacks, written by the run, go through the same check.
    symlink(&victim, run.path().join("profile-server.folded")).expect("symlink");
    let process = serde_json::json!({ "cpu_user_s": 0.1, "cpu_system_s": 0.0, "cpu_total_s": 0.1, "wall_s": 1.0,
                                      "cpu_utilisation_pct": 10.0, "max_rss_kib": 1 });
    let mut rep: crate::figures::RepetitionFigures = serde_json::from_value(serde_json::json!({
        "bytes": 1, "payload_verified": true, "goodput_mbps": 1.0, "transfer_s": 1.0, "handshake_ms": 1.0,
        "server": process, "client": process,
        "profile": { "frequency_hz": 250, "roles": [{ "role": "server", "samples": 1, "components": [],
                                                       "top_functions": [] }] }
    }))
    .expect("repetition");
    let role = rep.profile.as_mut().map(|p| &mut p.roles[0]).expect("profiled");
    role.folded = vec![("main;f".into(), 1)];
    assert!(stacks::write(run.path(), &[rep]).is_err());
    // A second hard link: overwriting it would overwrite the other name.
    std::fs::hard_link(&victim, run.path().join("summary.md")).expect("link");
    let e = write(&run.path().join("summary.md"), b"x").expect_err("hard link").to_string();
    assert!(e.contains("hard links"), "{e}");
    assert_eq!(std::fs::read_to_string(&victim).expect("read"), "precious");
    assert!(write(Path::new("/dev/null"), b"x").expect_err("a device").to_string().contains("not a regular file"));
    // An ordinary file is created, and replaced whole.
    let page = run.path().join("page.html");
    write(&page, b"long first text").expect("create");
    write(&page, b"short").expect("replace");
    assert_eq!(std::fs::read_to_string(&page).expect("read"), "short");
}

#[test]
fn a_record_reads_only_plain_files_inside_its_run_directory() {
    let (run, outside) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let secret = outside.path().join("profile-server.folded");
    std::fs::write(&secret, "SECRET=1 5\n").expect("write");
    let up = Path::new("..").join(outside.path().file_name().expect("name")).join("profile-server.folded");
    symlink(&secret, run.path().join("linked.folded")).expect("symlink");
    std::fs::create_dir(run.path().join("sub")).expect("mkdir");
    symlink(outside.path(), run.path().join("sub/dir")).expect("symlink");
    let stack = |file: &Path| StackFile { role: Role::Server, file: file.to_path_buf(), samples: 5 };
    for (named, says) in [
        (secret.clone(), "relative paths inside the run directory"),
        (up, "relative paths inside the run directory"),
        ("linked.folded".into(), "is a symbolic link"),
        ("sub/dir/profile-server.folded".into(), "is a symbolic link"),
        ("/dev/zero".into(), "relative paths inside the run directory"),
    ] {
        let e = stacks::read(run.path(), &stack(&named)).expect_err("outside the run").to_string();
        assert!(e.contains(says), "{}: {e}", named.display());
    }
    std::fs::write(run.path().join("profile-server.folded"), "main;f 5\n").expect("write");
    assert_eq!(stacks::read(run.path(), &stack(Path::new("profile-server.folded"))).expect("inside").len(), 1);
    // A FIFO is refused without waiting for a writer; a file past the bound is refused.
    let fifo = run.path().join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    assert!(read_in(run.path(), Path::new("fifo"), 10).expect_err("fifo").to_string().contains("not a regular"));
    std::fs::write(run.path().join("big"), [b'x'; 11]).expect("write");
    assert!(read_in(run.path(), Path::new("big"), 10).expect_err("too large").to_string().contains("larger than"));
    assert_eq!(read_in(run.path(), Path::new("big"), 11).expect("at the bound").len(), 11);
}

#[test]
fn qlogs_reported_outside_the_run_directory_are_refused() {
    let run = tempfile::tempdir().expect("tempdir");
    std::fs::write(run.path().join("lut-server-1.sqlog"), "").expect("write");
    let inside = run.path().join("lut-server-1.sqlog");
    assert_eq!(relative_to(run.path(), &inside).expect("inside"), Path::new("lut-server-1.sqlog"));
    for path in [Path::new("/etc/shadow").to_path_buf(), run.path().join("../x.sqlog")] {
        let e = relative_to(run.path(), &path).expect_err("outside").to_string();
        assert!(e.contains("refused") || e.contains("relative paths"), "{e}");
    }
}

/// Issue 52: the record is replaced whole or not at all, never through a link, leaving no
/// temporary file behind; a failed write names the file and leaves the old one as it was.
#[test]
fn the_record_is_replaced_whole_and_never_through_a_link() {
    let (run, outside) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let summary = run.path().join("summary.json");
    crate::files::write_atomic(&summary, b"{\"first\": 1}").expect("create");
    crate::files::write_atomic(&summary, b"{}").expect("replace");
    assert_eq!(std::fs::read_to_string(&summary).expect("read"), "{}");
    // A link put in its place is replaced, not written through.
    let victim = outside.path().join("victim");
    std::fs::write(&victim, "precious").expect("write");
    std::fs::remove_file(&summary).expect("remove");
    symlink(&victim, &summary).expect("symlink");
    crate::files::write_atomic(&summary, b"{}").expect("replace the link");
    assert_eq!(std::fs::read_to_string(&victim).expect("read"), "precious");
    assert!(!std::fs::symlink_metadata(&summary).expect("stat").file_type().is_symlink());
    let names: Vec<_> = std::fs::read_dir(run.path()).expect("list").map(|e| e.expect("entry").file_name()).collect();
    assert_eq!(names, ["summary.json"], "no temporary file left");
    // A directory where the file should be: the error names the file, and it stays.
    let taken = run.path().join("taken");
    std::fs::create_dir(&taken).expect("mkdir");
    let e = crate::files::write_atomic(&taken, b"{}").expect_err("a directory");
    assert!(matches!(&e, crate::RecordError::Io { path, .. } if *path == taken), "{e:?}");
    assert!(taken.is_dir());
    assert_eq!(std::fs::read_dir(run.path()).expect("list").count(), 2, "no temporary file left");
}
