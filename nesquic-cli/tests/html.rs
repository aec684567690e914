//! The HTML pages in a real browser (Debian's `chromium`, headless; `scripts/setup.sh` installs
//! it): each kind of page (run, report, compare, matrix) loads with no console message, a
//! screenshot is taken, every expected plot draws its data, the flame graphs hold every sample
//! of the profile, and no page names a URL. Needs root (eBPF probes and the sampling profile).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{nesquic, stderr, Role, RunRecord};
use nesquic_render::compare::Report;

/// Every probe (crypto timed, for the duration CDFs) and small sizes: a run takes a few seconds.
const RUN: &[&str] = &["--size", "8MB", "--repeat", "3", "--probe", "io,crypto:time,profile:499", "--interval", "10ms"];

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("html-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn root() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "the HTML tests profile real runs with eBPF: run them as root");
}

/// Two runs of quinn with every probe, each with `--html` and `--markdown` (written into the
/// run directory), shared by the tests of this file.
fn runs() -> &'static (PathBuf, PathBuf) {
    static RUNS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    RUNS.get_or_init(|| {
        root();
        let dir = scratch("runs");
        let run = |name: &str| {
            let out_dir = dir.join(name);
            let out = nesquic()
                .arg("run")
                .args(RUN)
                .arg("--out")
                .arg(&out_dir)
                .args(["--html", "--markdown"])
                .output()
                .expect("run nesquic");
            assert!(out.status.success(), "{}", stderr(&out));
            out_dir
        };
        (run("base"), run("head"))
    })
}

fn summary(dir: &Path) -> RunRecord {
    common::load_record(&dir.join("summary.json"))
}

/// What Chromium saw on a page: `tests/html_probe.js`'s record (errors, plots, flame graphs),
/// in the form that script writes.
#[derive(Debug, serde::Deserialize)]
struct Seen {
    errors: Vec<String>,
    plots: Vec<Plot>,
    flames: Vec<Flame>,
}

/// One plot as drawn: its data values and the coloured elements drawn for them.
#[derive(Debug, serde::Deserialize)]
struct Plot {
    name: String,
    points: u64,
    coloured: u64,
}

/// One flame graph as drawn (`total` is -1 where the frame had no graph).
#[derive(Debug, serde::Deserialize)]
struct Flame {
    name: String,
    total: i64,
    frames: u64,
    zoomed: bool,
    width: f64,
}

impl Seen {
    fn plot(&self, name: &str) -> &Plot {
        self.plots.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("no plot {name} in {:?}", self.plots))
    }

    fn flame(&self, name: &str) -> &Flame {
        self.flames.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("no flame graph {name}"))
    }
}

fn chromium() -> Command {
    let mut c = Command::new("chromium");
    c.args(["--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars", "--enable-logging=stderr", "--v=0"]);
    c.arg("--virtual-time-budget=5000");
    c
}

/// Loads `page` in Chromium: no console message from the page or its frames, no URL in it,
/// a screenshot taken; every plot draws at least one coloured element per data value.
fn load(page: &Path) -> Seen {
    let html = std::fs::read_to_string(page).expect("page");
    assert!(!html.contains("http://") && !html.contains("https://"), "{} names a URL", page.display());
    let probe = include_str!("html_probe.js");
    let instrumented = page.with_extension("probed.html");
    std::fs::write(&instrumented, html.replacen("<head>", &format!("<head>\n<script>{probe}</script>"), 1))
        .expect("write");
    let out = chromium()
        .arg("--dump-dom")
        .arg(format!("file://{}", instrumented.display()))
        .output()
        .expect("chromium (apt install chromium: scripts/setup.sh)");
    assert!(out.status.success(), "chromium: {}", stderr(&out));
    let console: Vec<&str> =
        std::str::from_utf8(&out.stderr).unwrap_or("").lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "{}: console messages: {console:#?}", page.display());
    let dom = String::from_utf8_lossy(&out.stdout);
    let record = dom
        .rsplit_once("<pre id=\"nesquic-test\">")
        .and_then(|(_, rest)| rest.split_once("</pre>"))
        .map(|(json, _)| json.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&"))
        .unwrap_or_else(|| panic!("{}: the probe script did not report", page.display()));
    let seen: Seen = serde_json::from_str(&record).expect("probe json");
    assert!(seen.errors.is_empty(), "{}: {:?}", page.display(), seen.errors);
    for p in &seen.plots {
        assert!(p.points > 0, "plot {} has no data: {p:?}", p.name);
        assert!(p.coloured >= p.points, "plot {} draws less than its data: {p:?}", p.name);
    }
    let shot = page.with_extension("png");
    let out = chromium()
        .arg("--window-size=1300,2400")
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium");
    assert!(out.status.success(), "chromium: {}", stderr(&out));
    let png = std::fs::read(&shot).expect("screenshot");
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "{}: screenshot of {} bytes", shot.display(), png.len());
    seen
}

/// Samples of `role` in the profile of every repetition of a run.
fn profile_samples(summary: &RunRecord, role: Role) -> u64 {
    let roles = summary.repetitions.iter().flat_map(|r| r.profile.iter().flat_map(|p| &p.roles));
    roles.filter(|r| r.role == role).map(|r| r.samples).sum()
}

#[test]
fn a_run_page_has_every_plot_and_flame_graphs_with_every_sample() {
    let (base, _) = runs();
    let seen = load(&base.join("report.html"));
    let s = summary(base);
    // quinn's capped GSO batch is a finding, on the page as in summary.json and the Markdown.
    let html = std::fs::read_to_string(base.join("report.html")).expect("page");
    assert!(s.findings.iter().any(|f| common::json_name(&f.rule) == "gso_batch_capped"), "{:?}", s.findings);
    assert!(html.contains("<h2 id=\"findings\">Findings</h2>") && html.contains("datagrams per send message"));
    for plot in [
        "repetitions-goodput",
        "repetitions-handshake",
        "repetitions-server-cpu",
        "repetitions-client-cpu",
        "goodput-over-time",
        "cpu-over-time",
        "components-server",
        "components-client",
        "cost-server",
        "cost-client",
        "syscall-cdf-server",
        "syscall-cdf-client",
        "crypto-calls-server",
        "crypto-calls-client",
        "crypto-cdf-server",
        "crypto-cdf-client",
        "offload",
    ] {
        seen.plot(plot);
    }
    assert_eq!(seen.plot("repetitions-goodput").points, 3);
    // One histogram per syscall each side made.
    for (role, name) in [(Role::Server, "server"), (Role::Client, "client")] {
        let rows: Vec<_> = common::probes(&s, 0).roles.iter().filter(|r| r.role == role).flat_map(|r| &r.io).collect();
        assert!(!rows.is_empty(), "{name} made no syscall");
        for row in rows {
            seen.plot(&format!("syscall-{name}-{}", common::syscall_name(row)));
        }
        // The flame graph holds exactly the profile's samples, and so does the stacks file.
        let samples = profile_samples(&s, role);
        assert!(samples > 0, "{name}: no profile samples");
        assert_eq!(seen.flame(&format!("flame-{name}")).total, samples as i64, "{name}");
        let file = s.profile_stacks.iter().find(|f| f.role == role);
        assert_eq!(file.expect("stacks file").samples, samples);
        let flame = seen.flame(&format!("flame-{name}"));
        // Drawn across the page (an SVG without a width is 300 px wide in an HTML document).
        assert!(flame.frames > 1 && flame.width > 500.0, "{flame:?}");
        // A click zooms (and logs nothing: `load` fails on any console message).
        assert!(flame.zoomed, "{flame:?}");
    }
    // `report RUN --html` draws the same page from the same files.
    let again = base.join("again.html");
    let out = nesquic().arg("report").arg(base).arg("--html").arg(&again).output().expect("report");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read(&again).expect("again"), std::fs::read(base.join("report.html")).expect("report"));
    // --markdown: the summary table with the measured median.
    let md = std::fs::read_to_string(base.join("summary.md")).expect("summary.md");
    let goodput = s.summary.as_ref().expect("a summary").goodput_mbps.median;
    assert!(md.contains(&format!("| goodput (Mbit/s) | {goodput:.1} |")), "{md}");
    assert!(md.contains("| server sendmsg |") || md.contains("| server sendmmsg |"), "{md}");
}

#[test]
fn a_compare_page_shows_verdicts_both_runs_and_differential_flame_graphs() {
    let (base, head) = runs();
    let dir = scratch("compare");
    let page = dir.join("compare.html");
    let out = nesquic()
        .arg("compare")
        .arg(base)
        .arg(head)
        .args(["--format", "json", "--html"])
        .arg(&page)
        .output()
        .expect("compare");
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
    let report: Report = serde_json::from_slice(&out.stdout).expect("json");
    let seen = load(&page);
    for side in ["base", "head"] {
        seen.plot(&format!("{side}-repetitions-goodput"));
        seen.plot(&format!("{side}-components-server"));
    }
    let head_summary = summary(head);
    for (role, name) in [(Role::Server, "server"), (Role::Client, "client")] {
        // Differential: the head's stacks, coloured by change.
        assert_eq!(seen.flame(&format!("diff-{name}")).total, profile_samples(&head_summary, role) as i64, "{name}");
    }
    // Every verdict of `compare` is a row of the page's table.
    let html = std::fs::read_to_string(&page).expect("page");
    for row in report.rows.iter() {
        assert!(html.contains(&format!("<td>{}</td>", row.metric)), "{row:?}");
    }
}

#[test]
fn a_matrix_page_groups_bars_by_lut_and_io_path() {
    root();
    let dir = scratch("matrix");
    let page = dir.join("matrix.html");
    let out = nesquic()
        .args(["matrix", "--lut", "quinn", "--io", "native,nesquic", "--size", "2MB", "--repeat", "1", "--out"])
        .arg(&dir)
        .arg("--html")
        .arg(&page)
        .output()
        .expect("matrix");
    assert!(out.status.success(), "{}", stderr(&out));
    let seen = load(&page);
    assert_eq!(seen.plot("matrix-goodput").points, 2);
    assert_eq!(seen.plot("matrix-cpu").points, 2);
}

#[test]
fn a_link_run_page_shows_the_link_as_applied() {
    root();
    let dir = scratch("link");
    let run = dir.join("run");
    let out = nesquic()
        .args(["run", "--size", "2MB", "--link", "veth", "--rate", "200mbit", "--out"])
        .arg(&run)
        .arg("--html")
        .output()
        .expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    let seen = load(&run.join("report.html"));
    seen.plot("goodput-over-time");
    let html = std::fs::read_to_string(run.join("report.html")).expect("page");
    assert!(html.contains("<h2 id=\"link-as-applied\">"), "no link section");
    // Every mechanism the run recorded, as the page names it.
    for m in &summary(&run).link.expect("link").mechanisms {
        let text = m.replace('<', "&lt;").replace('>', "&gt;");
        assert!(html.contains(&text), "{text}");
    }
}

#[test]
fn html_of_what_is_not_a_run_directory_is_refused_with_what_to_give() {
    let dir = scratch("bad");
    let out = nesquic().arg("report").arg(&dir).arg("--html").output().expect("report");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("is not a run directory (no summary.json)"), "{}", stderr(&out));
    let out = nesquic().arg("report").arg(dir.join("missing")).arg("--html").output().expect("report");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("not a run directory"), "{}", stderr(&out));
}
