//! Compiles `bpf/nesquic.bpf.c` with clang (BPF target, CO-RE) into `$OUT_DIR/nesquic.bpf.o`,
//! which `src/programs.rs` embeds. `vmlinux.h` is generated from the build machine's BTF with
//! bpftool; CO-RE relocations make the object load on other kernels.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=bpf");
    println!("cargo:rerun-if-env-changed=NESQUIC_CLANG");
    println!("cargo:rerun-if-env-changed=NESQUIC_VMLINUX_BTF");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let vmlinux_h = out.join("vmlinux.h");
    generate_vmlinux_h(&vmlinux_h);
    let clang = std::env::var("NESQUIC_CLANG").unwrap_or_else(|_| "clang-19".into());
    let object = out.join("nesquic.bpf.o");
    let status = Command::new(&clang)
        .args(["-O2", "-g", "-target", "bpf", "-D__TARGET_ARCH_x86", "-Wall", "-Werror"])
        .arg("-I")
        .arg(&out)
        .arg("-c")
        .arg("bpf/nesquic.bpf.c")
        .arg("-o")
        .arg(&object)
        .status()
        .unwrap_or_else(|e| fail(&format!("cannot run {clang} ({e}): run ./scripts/setup.sh (installs clang-19)")));
    if !status.success() {
        fail(&format!("{clang} failed to compile bpf/nesquic.bpf.c"));
    }
}

fn generate_vmlinux_h(dest: &Path) {
    let btf = std::env::var("NESQUIC_VMLINUX_BTF").unwrap_or_else(|_| "/sys/kernel/btf/vmlinux".into());
    if !Path::new(&btf).exists() {
        fail(&format!("{btf} not found: the kernel must expose BTF (CONFIG_DEBUG_INFO_BTF=y)"));
    }
    let output = Command::new("bpftool")
        .args(["btf", "dump", "file", &btf, "format", "c"])
        .output()
        .unwrap_or_else(|e| fail(&format!("cannot run bpftool ({e}): run ./scripts/setup.sh")));
    if !output.status.success() {
        fail(&format!("bpftool btf dump failed: {}", String::from_utf8_lossy(&output.stderr)));
    }
    std::fs::write(dest, output.stdout).unwrap_or_else(|e| fail(&format!("write {}: {e}", dest.display())));
}

fn fail(msg: &str) -> ! {
    eprintln!("nesquic-ebpf build: {msg}");
    std::process::exit(1)
}
