//! The per-stream loops every callback- or poll-driven shim runs, whatever the library: read a
//! stream until the library has nothing more, and offer a server stream its payload until the
//! library's window pushes back. Each shim supplies only its library's read and write call.

use nesquic_protocol::stream::{PayloadChunk, ServerStream};

use crate::TranslationError;

/// What one read from a library's stream gave: `(bytes, fin)`, or `None` when nothing more is
/// there now (the library's "done").
pub type Read = Option<(usize, bool)>;

/// Reads a stream into `scratch` until `recv` has nothing more or the fin arrived, handing each
/// piece (and whether it ends the stream) to `sink`.
pub fn drain_stream(
    scratch: &mut [u8],
    mut recv: impl FnMut(&mut [u8]) -> Result<Read, TranslationError>,
    mut sink: impl FnMut(&[u8], bool) -> Result<(), TranslationError>,
) -> Result<(), TranslationError> {
    while let Some((n, fin)) = recv(scratch)? {
        sink(&scratch[..n], fin)?;
        if fin {
            break;
        }
    }
    Ok(())
}

/// Offers `stream` its payload, chunk by chunk, until the library takes less than a whole chunk
/// (its stream or connection window is full). `send` answers how many bytes it took, or `None`
/// when it takes none now.
pub fn offer_payload(
    stream: &mut ServerStream,
    mut send: impl FnMut(PayloadChunk, bool) -> Result<Option<usize>, TranslationError>,
) -> Result<(), TranslationError> {
    while let Some((chunk, last)) = stream.pending_shared() {
        let len = chunk.as_slice().len();
        let Some(n) = send(chunk, last)? else { break };
        stream.accepted(n, last && n == len);
        if n < len {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use nesquic_protocol::payload::encode_request;

    use super::*;

    #[test]
    fn a_window_of_1000_bytes_per_call_gets_the_whole_payload_and_one_fin() {
        let mut server = ServerStream::new();
        server.on_request(&encode_request(150_000), true).unwrap();
        let (mut wire, mut fins, mut calls) = (Vec::new(), 0, 0);
        // The library takes at most 1000 bytes per call, as a flow-controlled stack would.
        while !server.is_complete() {
            offer_payload(&mut server, |chunk, last| {
                calls += 1;
                let n = chunk.as_slice().len().min(1000);
                wire.extend_from_slice(&chunk.as_slice()[..n]);
                fins += usize::from(last && n == chunk.as_slice().len());
                Ok(Some(n))
            })
            .unwrap();
        }
        assert_eq!((wire.len(), fins), (150_000, 1));
        assert_eq!(calls, 150, "one partial take ends each turn's offers");
    }

    #[test]
    fn draining_stops_at_the_fin_and_at_done() {
        let mut pieces = vec![Some((3, false)), Some((2, true)), Some((9, false))].into_iter();
        let mut seen = Vec::new();
        drain_stream(
            &mut [7u8; 16],
            |_| Ok(pieces.next().flatten()),
            |d, fin| {
                seen.push((d.len(), fin));
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(seen, [(3, false), (2, true)], "nothing is read after the fin");
        let mut once = Some((4, false));
        let mut n = 0;
        drain_stream(
            &mut [0u8; 16],
            |_| Ok(once.take()),
            |_, _| {
                n += 1;
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(n, 1, "a `None` read ends the loop");
    }
}
