//! Classifying one sampled stack into a profile component by the catalog's `[[component]]` rules,
//! walking from the leaf toward the root: the first frame a rule names decides, so a `memcpy`
//! under a seal is crypto and a copy under the UDP send path is packet I/O. Knows nothing of how
//! stacks are sampled or symbolised.
//!
//! Three kinds of rule, by name and flag:
//! - a dotted name (`crypto.aead`, `packet_io.kernel`) decides for good;
//! - a top-level name (`crypto`: the AES/GHASH primitives) decides the family, and is refined by
//!   the next frame up that a dotted rule of the same family names (`crypto.header_protection`
//!   when the primitive runs under a header-protection mask); a frame of another family ends the
//!   walk;
//! - a `weak` rule (copies, the allocator) holds only when no other rule names any frame further
//!   up.

use std::cell::RefCell;
use std::collections::HashMap;

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::catalog::ComponentRule;
use crate::EbpfError;

/// No rule named any frame of a sample that has kernel frames.
pub const KERNEL_OTHER: &str = "kernel_other";
/// No rule named any frame and the leaf could not be symbolised.
pub const UNKNOWN: &str = "unknown";
/// No rule named any frame of a user-space sample.
pub const OTHER: &str = "other";

struct CompiledRule {
    name: String,
    family: String,
    weak: bool,
    user: GlobSet,
    kernel: GlobSet,
}

/// Compiled component rules, with a per-name cache of which rule names a frame.
pub struct Classifier {
    rules: Vec<CompiledRule>,
    cache: RefCell<HashMap<(bool, String), Option<usize>>>,
}

/// The top-level component of a component name (`packet_io.kernel` -> `packet_io`).
pub fn family(name: &str) -> &str {
    name.split_once('.').map_or(name, |(f, _)| f)
}

impl Classifier {
    /// From the catalog's rules; a pattern that is not a valid glob is an error.
    pub fn new(rules: &[ComponentRule]) -> Result<Self, EbpfError> {
        let compile = |name: &str, patterns: &[String]| {
            let mut set = GlobSetBuilder::new();
            for p in patterns {
                set.add(Glob::new(p).map_err(|e| EbpfError::Catalog(format!("component {name}: pattern {p}: {e}")))?);
            }
            set.build().map_err(|e| EbpfError::Catalog(format!("component {name}: {e}")))
        };
        let rules = rules
            .iter()
            .map(|r| {
                Ok(CompiledRule {
                    name: r.name.clone(),
                    family: family(&r.name).to_string(),
                    weak: r.weak,
                    user: compile(&r.name, &r.user)?,
                    kernel: compile(&r.name, &r.kernel)?,
                })
            })
            .collect::<Result<Vec<_>, EbpfError>>()?;
        Ok(Self { rules, cache: RefCell::new(HashMap::new()) })
    }

    /// The first rule, in catalog order, that names `frame` (a kernel or a user-space name).
    fn rule_for(&self, frame: &str, kernel: bool) -> Option<usize> {
        let key = (kernel, frame.to_string());
        if let Some(hit) = self.cache.borrow().get(&key) {
            return *hit;
        }
        let hit = self.rules.iter().position(|r| if kernel { &r.kernel } else { &r.user }.is_match(frame));
        self.cache.borrow_mut().insert(key, hit);
        hit
    }

    /// The component of one stack: kernel frames then user frames, each innermost first; `None`
    /// is a frame that could not be symbolised.
    pub fn classify_frames(&self, kernel: &[Option<&str>], user: &[Option<&str>]) -> &str {
        let frames = kernel.iter().map(|f| (true, *f)).chain(user.iter().map(|f| (false, *f)));
        let (mut found, mut weak): (Option<usize>, Option<usize>) = (None, None);
        for (is_kernel, frame) in frames {
            let Some(i) = frame.and_then(|f| self.rule_for(f, is_kernel)) else { continue };
            let rule = &self.rules[i];
            match found {
                None if rule.weak => {
                    weak.get_or_insert(i);
                }
                None => {
                    found = Some(i);
                    if rule.name != rule.family {
                        break;
                    }
                }
                // A top-level match: refined by a dotted rule of its family, ended by another family.
                Some(f) => {
                    if rule.weak {
                        continue;
                    }
                    if rule.family != self.rules[f].family {
                        break;
                    }
                    if rule.name != rule.family {
                        found = Some(i);
                        break;
                    }
                }
            }
        }
        if let Some(i) = found.or(weak) {
            return &self.rules[i].name;
        }
        if kernel.iter().any(Option::is_some) {
            KERNEL_OTHER
        } else if kernel.first().or(user.first()).is_none_or(Option::is_none) {
            UNKNOWN
        } else {
            OTHER
        }
    }

    /// The component of a stack of symbolised names (innermost first), as `perf script` gives.
    pub fn classify(&self, user: &[String], kernel: &[String]) -> &str {
        fn wrap(v: &[String]) -> Vec<Option<&str>> {
            v.iter().map(|s| Some(s.as_str())).collect()
        }
        self.classify_frames(&wrap(kernel), &wrap(user))
    }
}

/// How a rule applies to one LUT: the functions of its objects it is the first rule to name.
#[derive(Debug, Clone)]
pub struct RuleUse {
    /// Component.
    pub name: String,
    /// A weak rule.
    pub weak: bool,
    /// Functions of the LUT's objects this rule names (and no earlier rule does).
    pub user_functions: usize,
    /// A few of them.
    pub examples: Vec<String>,
    /// Kernel patterns (they apply to every LUT).
    pub kernel_patterns: usize,
}

impl Classifier {
    /// The rules that name a function of `objects` or a kernel function, in catalog order.
    pub fn uses(&self, objects: &[crate::ObjectSymbols], rules: &[ComponentRule]) -> Vec<RuleUse> {
        let mut uses: Vec<RuleUse> = self
            .rules
            .iter()
            .zip(rules)
            .map(|(r, c)| RuleUse {
                name: r.name.clone(),
                weak: r.weak,
                user_functions: 0,
                examples: Vec::new(),
                kernel_patterns: c.kernel.len(),
            })
            .collect();
        for f in objects.iter().flat_map(|o| o.functions.iter()) {
            if let Some(i) = self.rule_for(&f.demangled, false) {
                uses[i].user_functions += 1;
                if uses[i].examples.len() < 3 {
                    uses[i].examples.push(f.demangled.clone());
                }
            }
        }
        uses.retain(|u| u.user_functions > 0 || u.kernel_patterns > 0);
        uses
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(name: &str, weak: bool, user: &[&str], kernel: &[&str]) -> ComponentRule {
        ComponentRule {
            name: name.into(),
            luts: Vec::new(),
            weak,
            user: user.iter().map(|s| s.to_string()).collect(),
            kernel: kernel.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn toy() -> Classifier {
        Classifier::new(&[
            rule("app", false, &["harness::*"], &[]),
            rule("crypto", false, &["aes_hw_*"], &[]),
            rule("crypto.aead", false, &["seal"], &[]),
            rule("crypto.header_protection", false, &["hp_mask"], &[]),
            rule("connection.frames", false, &["conn::poll_transmit"], &[]),
            rule("packet_io.kernel", false, &["sendmsg"], &["udp_sendmsg"]),
            rule("packet_io.copy", false, &[], &["copy_user_*"]),
            rule("memory.copy", true, &["memcpy"], &[]),
        ])
        .expect("valid rules")
    }

    fn s(v: &[&'static str]) -> Vec<Option<&'static str>> {
        v.iter().map(|f| Some(*f)).collect()
    }

    #[test]
    fn a_copy_lands_in_the_component_of_the_function_that_calls_it() {
        let c = toy();
        assert_eq!(c.classify_frames(&[], &s(&["memcpy", "seal", "conn::poll_transmit"])), "crypto.aead");
        assert_eq!(c.classify_frames(&[], &s(&["memcpy", "unnamed", "conn::poll_transmit"])), "connection.frames");
        assert_eq!(c.classify_frames(&[], &s(&["memcpy", "harness::verify"])), "app");
        // Nothing above it is named: the copy is memory.
        assert_eq!(c.classify_frames(&[], &s(&["memcpy", "main"])), "memory.copy");
    }

    #[test]
    fn kernel_frames_come_first_then_user_frames() {
        let c = toy();
        let user = s(&["sendmsg", "conn::poll_transmit"]);
        assert_eq!(c.classify_frames(&s(&["copy_user_generic", "udp_sendmsg"]), &user), "packet_io.copy");
        assert_eq!(c.classify_frames(&s(&["ip_output", "udp_sendmsg"]), &user), "packet_io.kernel");
        assert_eq!(c.classify_frames(&s(&["schedule"]), &s(&["main"])), KERNEL_OTHER);
    }

    #[test]
    fn a_primitive_is_refined_by_the_dotted_rule_of_its_family_above_it() {
        let c = toy();
        assert_eq!(
            c.classify_frames(&[], &s(&["aes_hw_encrypt", "hp_mask", "conn::poll_transmit"])),
            "crypto.header_protection"
        );
        assert_eq!(c.classify_frames(&[], &s(&["aes_hw_ctr32", "seal"])), "crypto.aead");
        // Another family above ends the walk: the primitive stays top-level crypto.
        assert_eq!(c.classify_frames(&[], &s(&["aes_hw_ctr32", "conn::poll_transmit", "seal"])), "crypto");
    }

    #[test]
    fn unnamed_stacks_are_other_or_unknown() {
        let c = toy();
        assert_eq!(c.classify_frames(&[], &s(&["main"])), OTHER);
        assert_eq!(c.classify_frames(&[], &[None, Some("main")]), UNKNOWN);
        assert_eq!(c.classify_frames(&[], &[]), UNKNOWN);
        // An unsymbolised leaf under a named caller belongs to the caller.
        assert_eq!(c.classify_frames(&[], &[None, Some("seal")]), "crypto.aead");
    }

    /// The built-in catalog's rules.
    fn builtin() -> Classifier {
        Classifier::new(&crate::Catalog::builtin().expect("catalog").components).expect("catalog rules compile")
    }

    /// A stack as the folded files print it (outermost first, `;`-separated), innermost first.
    fn folded(stack: &str) -> Vec<Option<&str>> {
        stack.split(';').rev().map(Some).collect()
    }

    // The stacks below are copied from `profile-*.folded` of `nesquic run --lut L --probe
    // profile:999,io --size 500MB` (2026-11-25), the loop's outer frames cut where they decide
    // nothing.

    #[test]
    fn go_runtime_frames_land_in_their_components() {
        let c = builtin();
        let user = |stack| c.classify_frames(&[], &folded(stack)).to_string();
        // The scheduler, in user space: a thread looking for a goroutine to run.
        assert_eq!(user("runtime.mcall;runtime.park_m;runtime.schedule;runtime.findRunnable"), "runtime.goroutines");
        // The GC's mark worker, and the runtime's lock taken by the background sweeper.
        assert_eq!(
            user(
                "runtime.goexit.abi0;runtime.gcBgMarkStartWorkers.gowrap1;runtime.gcBgMarkWorker;runtime.systemstack.abi0;\
                 runtime.gcBgMarkWorker.func2;runtime.gcDrain;runtime.markroot;runtime.markrootSpans;runtime.scanblock;\
                 runtime.tryDeferToSpanScan"
            ),
            "memory.gc"
        );
        assert_eq!(user("runtime.goexit.abi0;runtime.gcenable.gowrap1;runtime.bgsweep;runtime.unlock2"), "memory.gc");
        assert_eq!(
            user(
                "runtime.goexit.abi0;main.runClient.func1;runtime.convT;runtime.mallocgc;runtime.mallocgcSmallScanNoHeader;\
                 runtime.(*mcache).nextFree;runtime.(*mcache).refill;runtime.(*mcentral).cacheSpan"
            ),
            "memory.alloc"
        );
        // epoll_wait from the scheduler's netpoll: the kernel frames name nothing, the runtime does.
        let kernel = folded("entry_SYSCALL_64_after_hwframe;do_syscall_64");
        let netpoll = folded(
            "runtime.mcall;runtime.park_m;runtime.schedule;runtime.findRunnable;runtime.netpoll;\
             internal/runtime/syscall/linux.Syscall6",
        );
        assert_eq!(c.classify_frames(&kernel, &netpoll), "runtime.poll");
        // The client's verifier, inlined into its read loop.
        assert_eq!(user("runtime.goexit.abi0;main.oneConnection.func1;main.oneStream;memeqbody"), "app.harness");
    }

    #[test]
    fn go_crypto_is_split_by_what_calls_it() {
        let c = builtin();
        let user = |stack| c.classify_frames(&[], &folded(stack)).to_string();
        let packer = "github.com/quic-go/quic-go.(*packetPacker).encryptPacket;\
                      github.com/quic-go/quic-go/internal/handshake.(*updatableAEAD).Seal;\
                      github.com/quic-go/quic-go/internal/handshake.(*xorNonceAEAD).Seal;\
                      crypto/internal/fips140/aes/gcm.(*GCM).Seal;crypto/internal/fips140/aes/gcm.(*GCM).sealAfterIndicator;\
                      crypto/internal/fips140/aes/gcm.gcmAesEnc.abi0";
        assert_eq!(user(packer), "crypto.aead");
        assert_eq!(
            user(
                "github.com/quic-go/quic-go.(*packetUnpacker).unpackShortHeader;\
                 github.com/quic-go/quic-go/internal/handshake.(*updatableAEAD).DecryptHeader;\
                 github.com/quic-go/quic-go/internal/handshake.(*aesHeaderProtector).DecryptHeader;\
                 github.com/quic-go/quic-go/internal/handshake.(*aesHeaderProtector).apply;\
                 crypto/internal/fips140/aes.(*Block).Encrypt;crypto/internal/fips140/aes.encryptBlockAsm.abi0"
            ),
            "crypto.header_protection"
        );
    }

    /// AES-GCM's bulk assembly is AEAD by its own name: OpenSSL's and aws-lc's AVX-512 code keeps
    /// no frame pointer, so no caller survives to refine it (leaves as seen in msquic and s2n-quic
    /// 500 MB runs); header protection's AES-ECB stays split by its caller.
    #[test]
    fn aes_gcm_assembly_is_aead_without_a_caller() {
        let c = builtin();
        let leaf = |name| c.classify_frames(&[], &folded(name)).to_string();
        for name in [
            "ossl_aes_gcm_encrypt_avx512",
            "ossl_aes_gcm_decrypt_avx512",
            "ossl_aes_gcm_setiv_avx512",
            "aws_lc_0_47_0_aes_gcm_encrypt_avx512",
            "aws_lc_0_47_0_aes_gcm_decrypt_avx512",
            "aws_lc_0_47_0_gcm_setiv_avx512",
            "aws_lc_0_47_0_gcm_ghash_avx512",
            "ring_core_0_17_14__aes_gcm_dec_update_vaes_avx2",
        ] {
            assert_eq!(leaf(name), "crypto.aead", "{name}");
        }
        assert_eq!(leaf("aws_lc_0_47_0_aes_hw_encrypt"), "crypto");
        assert_eq!(
            leaf("s2n_quic_crypto::header_key::HeaderKey::opening_header_protection_mask;aws_lc_0_47_0_aes_hw_encrypt"),
            "crypto.header_protection"
        );
    }

    /// rustls over TCP (tcp-tls): the record layer's buffers and framing are not the handshake,
    /// and a record's seal and open are AEAD; QUIC's use of rustls (the handshake) stays handshake.
    /// Stacks as seen in a 3 GB tcp-tls run's `profile-*.folded`.
    #[test]
    fn rustls_records_over_tcp_are_streams_frames_and_aead_not_handshake() {
        let c = builtin();
        let user = |stack| c.classify_frames(&[], &folded(stack)).to_string();
        let receive = "nesquic_lut_tcp_tls::tls_io::receive;rustls::conn::ConnectionCore<Data>::process_new_packets;\
                       rustls::common_state::CommonState::process_main_protocol;\
                       <rustls::client::tls13::ExpectTraffic as rustls::common_state::State<rustls::client::client_conn::ClientConnectionData>>::handle";
        let plaintext = format!(
            "{receive};rustls::common_state::CommonState::take_received_plaintext;__memcpy_avx512_unaligned_erms"
        );
        assert_eq!(user(&plaintext), "connection.streams");
        assert_eq!(user(receive), "connection.frames");
        assert_eq!(
            user(
                "nesquic_lut_tcp_tls::tls_io::receive;rustls::msgs::deframer::buffers::DeframerVecBuffer::read;\
                 __memcpy_avx512_unaligned_erms"
            ),
            "connection.frames"
        );
        assert_eq!(
            user(
                "rustls::record_layer::RecordLayer::decrypt_incoming;\
                 <rustls::crypto::ring::tls13::Tls13MessageDecrypter as rustls::crypto::cipher::MessageDecrypter>::decrypt"
            ),
            "crypto.aead"
        );
        assert_eq!(
            user(
                "rustls::common_state::CommonState::send_appdata_encrypt;\
                 rustls::msgs::message::outbound::OutboundChunks::copy_to_vec;__memcpy_avx512_unaligned_erms"
            ),
            "connection.streams"
        );
        // quinn's handshake through rustls: unchanged.
        assert_eq!(
            user(
                "<quinn_proto::crypto::rustls::TlsSession as quinn_proto::crypto::Session>::read_handshake;\
                 rustls::quic::connection::ConnectionCommon<Data>::read_hs;rustls::conn::ConnectionCore<Data>::process_new_packets;\
                 rustls::common_state::CommonState::process_main_protocol;\
                 <rustls::client::hs::ExpectServerHello as rustls::common_state::State<rustls::client::client_conn::ClientConnectionData>>::handle;\
                 __memcpy_avx512_unaligned_erms"
            ),
            "crypto.handshake"
        );
    }

    #[test]
    fn tquic_frames_are_tquic_not_the_loop_that_runs_it() {
        let c = builtin();
        let loop_ = "nesquic_translation::driver::run;\
                     <nesquic_lut_tquic::shim::TquicEndpoint<A> as nesquic_translation::driver::Endpoint>::fill_transmits;\
                     tquic::endpoint::Endpoint::process_connections";
        let under = |rest: &str| {
            let stack = format!("{loop_};{rest}");
            c.classify_frames(&[], &folded(&stack)).to_string()
        };
        assert_eq!(
            under("tquic::connection::Connection::send;tquic::connection::space::PacketNumSpaceMap::get"),
            "connection.recovery"
        );
        assert_eq!(
            under(
                "tquic::connection::Connection::send;tquic::connection::Connection::send_frames;\
                 tquic::connection::Connection::try_write_stream_frames;tquic::connection::stream::SendBuf::read;\
                 __memcpy_avx512_unaligned_erms"
            ),
            "connection.streams"
        );
        // The shim's copy of each packet tquic hands over into the GSO batch.
        assert_eq!(
            under(
                "<nesquic_lut_tquic::shim::Sender as tquic::PacketSendHandler>::on_packets_send;\
                 nesquic_translation::batch::TxBatch::push_with;__memcpy_avx512_unaligned_erms"
            ),
            "packet_io.user"
        );
        // A clock read whose leaf is the vDSO itself (the catalog's `[vdso]` was a character class).
        assert_eq!(
            under(
                "tquic::connection::Connection::send;tquic::connection::Connection::send_frames;\
                 tquic::connection::recovery::Recovery::can_send;[vdso]"
            ),
            "runtime.clock"
        );
        assert_eq!(c.classify_frames(&[], &[Some("[vdso]")]), "runtime.clock");
    }

    #[test]
    fn ngtcp2_and_gnutls_functions_land_in_their_components() {
        let c = builtin();
        let user = |stack: &str| c.classify_frames(&[], &folded(stack)).to_string();
        // GnuTLS's GCM assembly has no frame pointer: the walk ends at its entry.
        assert_eq!(user("aesni_gcm_encrypt;_aesni_ctr32_ghash_6x"), "crypto.aead");
        assert_eq!(user("aesni_gcm_decrypt;_aesni_ctr32_ghash_6x"), "crypto.aead");
        let server = "main;nq_run_server;nq_conn_write;ngtcp2_conn_writev_stream_versioned;ngtcp2_conn_write_vmsg;conn_write_pkt";
        assert_eq!(
            user(&format!(
                "{server};ngtcp2_ppe_final;ngtcp2_crypto_encrypt_cb;ngtcp2_crypto_encrypt;gnutls_aead_cipher_encrypt;\
                 aesni_gcm_aead_encrypt;aes_gcm_auth;gcm_gmult_clmul"
            )),
            "crypto.aead"
        );
        assert_eq!(
            user("main;nq_run_client;nq_conn_read;ngtcp2_conn_read_pkt_versioned;conn_recv_pkt;decrypt_hp;ngtcp2_crypto_hp_mask_cb;\
                  ngtcp2_crypto_hp_mask;gnutls_cipher_encrypt2;aes_encrypt;aesni_cbc_encrypt"),
            "crypto.header_protection"
        );
    }

    #[test]
    fn an_invalid_pattern_is_an_error() {
        assert!(Classifier::new(&[rule("x", false, &["a[b"], &[])]).is_err());
    }
}
