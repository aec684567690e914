//! `nesquic-translation`: shims that drive sans-IO QUIC state machines (quiche, quinn-proto) over
//! `nesquic-io`. It will own the connection table, timers, batching of outgoing packets into GSO
//! sends, and feeding GRO-coalesced receives back datagram by datagram.
//!
//! It knows each library's public API, never its internals, and it must not open sockets itself:
//! all packet I/O goes through `nesquic-io`. Not built yet (issue: quiche through the translation
//! layer); this crate only reserves the seam.
#![warn(missing_docs)]
