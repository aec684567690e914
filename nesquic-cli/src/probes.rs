//! `nesquic probes`: what a probe list resolves to for a binary, without running anything.
//! Resolving a request and opening the session is the engine's (`nesquic_engine::plan`);
//! printing what the probes measured is `nesquic_render`'s.

use std::path::Path;

use anyhow::Result;
use nesquic_ebpf::{Catalog, ObjectSymbols};
pub use nesquic_engine::plan::{classifier, ProbePlan};

/// Prints the profile rules that apply to `binary` (`nesquic probes --probe profile`).
fn list_profile_rules(binary: &Path) -> Result<()> {
    let catalog = Catalog::builtin()?;
    let classifier = nesquic_ebpf::profile::Classifier::new(&catalog.components)?;
    let mut objects = Vec::new();
    for path in nesquic_ebpf::objects::objects_of(binary)? {
        objects.push(ObjectSymbols::load(&path)?);
    }
    println!("profile: component rules for {}, in the order a frame is tried:", binary.display());
    for u in classifier.uses(&objects, &catalog.components) {
        let weak = if u.weak { " (weak)" } else { "" };
        println!(
            "  {:<26}{weak} {} functions here, {} kernel patterns{}",
            u.name,
            u.user_functions,
            u.kernel_patterns,
            if u.examples.is_empty() { String::new() } else { format!("; e.g. {}", u.examples.join(", ")) }
        );
    }
    Ok(())
}

/// `nesquic probes`: what a probe list resolves to for a binary, without running anything.
pub fn list(text: &str, binary: &Path, choice: crate::backend::BackendChoice) -> Result<()> {
    use crate::backend::BackendChoice;
    let plan = ProbePlan::new(text, binary)?;
    if plan.request.profile {
        list_profile_rules(binary)?;
    }
    let crate::backend::WhoMeasures { user, why_kernel, refused } =
        crate::backend::who_measures(&plan, binary, choice)?;
    if plan.request.io {
        let kprobes = if nesquic_ebpf::preflight::kprobes_available() { "available" } else { "not available" };
        if user {
            println!("io: user (libc interposition) of sendmsg, sendmmsg, sendto, send, recvmsg, recvmmsg, recvfrom, recv (and write/read on UDP sockets) in the LUT; no root");
        }
        if !user || choice == BackendChoice::Both {
            println!(
                "io: syscall tracepoints sys_enter_/sys_exit_{{sendmsg,sendmmsg,sendto,recvmsg,recvmmsg,recvfrom}} (root; kprobes on this kernel: {kprobes})"
            );
            if !user {
                println!("    why the kernel: {why_kernel}");
            }
        }
    }
    for f in &plan.resolution.functions {
        let measured_by = match refused.iter().find(|(name, _)| *name == f.name) {
            _ if !user => format!("uprobe (root; {why_kernel})"),
            Some((_, why)) => format!("uprobe (root; the agent cannot hook it: {why})"),
            None => "user (inline hook)".to_string(),
        };
        let bytes = if f.bytes_arg > 0 { format!(" bytes=arg{}", f.bytes_arg) } else { String::new() };
        let site = if f.site.skip > 0 {
            format!("{} after endbr64", f.site.kind.label())
        } else {
            f.site.kind.label().to_string()
        };
        println!(
            "{:<26} {:<18} {:#014x} {}  [{}]{bytes}\n{:<46}{}  probe site: {site}\n{:<46}measured by: {measured_by}",
            f.category,
            f.backend,
            f.address,
            f.name,
            f.object.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            "",
            f.object.display(),
            ""
        );
    }
    let matched: std::collections::HashSet<&str> =
        plan.resolution.functions.iter().map(|f| f.category.as_str()).collect();
    let mut shown_header = false;
    for u in &plan.resolution.unmatched {
        if !shown_header {
            println!("\nmatched nothing (expected for backends this LUT does not use):");
            shown_header = true;
        }
        let note = if matched.contains(u.category.as_str()) { "" } else { "   <- category has no function" };
        println!("  {:<26} {:<38} {}{note}", u.category, u.backend, u.patterns.join(" | "));
    }
    Ok(plan.require_matches()?)
}
