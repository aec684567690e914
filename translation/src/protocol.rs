//! The benchmark protocol (docs/protocol.md): one connection, one bidirectional stream, ALPN
//! `nesquic`. The client sends the payload size as 8 bytes big-endian and finishes its side; the
//! server answers with that many bytes of [`fill_pattern`] and finishes the stream. The client
//! checks length and content.

/// ALPN every LUT negotiates.
pub const ALPN: &[u8] = b"nesquic";
/// TLS server name the certificate is issued for and clients verify.
pub const SERVER_NAME: &str = "localhost";
/// Request length: a big-endian u64.
pub const REQUEST_LEN: usize = 8;

const SEED: u64 = 0x6e65_7371_7569_6321; // "nesquic!"

/// Encodes a request for `size` bytes.
pub fn encode_request(size: u64) -> [u8; REQUEST_LEN] {
    size.to_be_bytes()
}

/// Decodes a request; `None` unless exactly [`REQUEST_LEN`] bytes.
pub fn decode_request(bytes: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.try_into().ok()?))
}

/// splitmix64: a fast, well-mixed function of the block index, so any offset can be generated
/// independently (both sides stream in chunks of any size).
fn block(index: u64) -> [u8; 8] {
    let mut z = index.wrapping_add(SEED).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)).to_le_bytes()
}

/// Fills `buf` with the payload bytes that start at stream offset `offset`.
pub fn fill_pattern(offset: u64, buf: &mut [u8]) {
    let mut pos = 0usize;
    while pos < buf.len() {
        let at = offset + pos as u64;
        let bytes = block(at / 8);
        let skip = (at % 8) as usize;
        let take = (8 - skip).min(buf.len() - pos);
        buf[pos..pos + take].copy_from_slice(&bytes[skip..skip + take]);
        pos += take;
    }
}

/// Checks a received stream chunk by chunk.
#[derive(Debug, Default)]
pub struct Verifier {
    received: u64,
    scratch: Vec<u8>,
}

/// Why a payload failed verification.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VerifyError {
    /// A byte differs from the pattern.
    #[error("payload mismatch at byte offset {offset}")]
    Mismatch {
        /// Stream offset of the first wrong byte.
        offset: u64,
    },
    /// More or fewer bytes than requested.
    #[error("payload length {received} != requested {expected}")]
    Length {
        /// Bytes received.
        received: u64,
        /// Bytes requested.
        expected: u64,
    },
}

impl Verifier {
    /// Checks the next chunk of the stream.
    pub fn update(&mut self, chunk: &[u8]) -> Result<(), VerifyError> {
        self.scratch.resize(chunk.len(), 0);
        fill_pattern(self.received, &mut self.scratch);
        if let Some(i) = chunk.iter().zip(&self.scratch).position(|(a, b)| a != b) {
            return Err(VerifyError::Mismatch { offset: self.received + i as u64 });
        }
        self.received += chunk.len() as u64;
        Ok(())
    }

    /// Bytes verified so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Checks the total length once the stream has finished.
    pub fn finish(&self, expected: u64) -> Result<(), VerifyError> {
        if self.received == expected {
            Ok(())
        } else {
            Err(VerifyError::Length { received: self.received, expected })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_is_independent_of_chunking() {
        let mut whole = vec![0u8; 1000];
        fill_pattern(0, &mut whole);
        let mut pieces = vec![0u8; 1000];
        for (start, end) in [(0, 3), (3, 17), (17, 500), (500, 1000)] {
            fill_pattern(start as u64, &mut pieces[start..end]);
        }
        assert_eq!(whole, pieces);
        assert!(whole.iter().filter(|b| **b == whole[0]).count() < 50, "pattern looks constant");
    }

    #[test]
    fn verifier_catches_a_flipped_byte_and_a_short_stream() {
        let mut data = vec![0u8; 4096];
        fill_pattern(0, &mut data);
        let mut ok = Verifier::default();
        ok.update(&data[..100]).unwrap();
        ok.update(&data[100..]).unwrap();
        ok.finish(4096).unwrap();
        assert_eq!(ok.finish(5000), Err(VerifyError::Length { received: 4096, expected: 5000 }));
        data[1234] ^= 1;
        let mut bad = Verifier::default();
        assert_eq!(bad.update(&data), Err(VerifyError::Mismatch { offset: 1234 }));
    }

    #[test]
    fn request_round_trips() {
        assert_eq!(decode_request(&encode_request(25_000_000)), Some(25_000_000));
        assert_eq!(decode_request(&[1, 2, 3]), None);
    }
}
