//! Lines of another program's output, each held to a length. `BufRead::lines` keeps reading
//! until a newline: a LUT, or a remote host over SSH, that prints without one would grow
//! nesquic's memory without end.

use std::io::{BufRead, BufReader, Read};

/// Longest line of a remote role (`nesquic remote-role` over SSH): its longest is a remote LUT's
/// whole qlog as one JSON string. Merging a qlog holds ~10x its size as JSON values, so a larger
/// one would not merge on an ordinary machine anyway.
pub const REMOTE_LINE_MAX: usize = 256 << 20;
/// Longest line of a LUT's report or any program's stderr: a report line is under 1 KiB, an
/// error message a few.
pub const LINE_MAX: usize = 1 << 20;

/// The lines of `reader`, without their newline, each at most `max` bytes: a longer line is
/// read to its end but not kept, and stands as a note saying so (which no reader parses as a
/// message). Invalid UTF-8 is replaced, not an end.
pub fn bounded(reader: impl Read, max: usize) -> impl Iterator<Item = String> {
    let mut reader = BufReader::new(reader);
    std::iter::from_fn(move || read_line(&mut reader, max))
}

fn read_line(reader: &mut impl BufRead, max: usize) -> Option<String> {
    let (mut line, mut len, mut ended) = (Vec::new(), 0usize, false);
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        if buf.is_empty() {
            break;
        }
        let (take, newline) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (i, true),
            None => (buf.len(), false),
        };
        if len + take <= max {
            line.extend_from_slice(&buf[..take]);
        }
        len += take;
        reader.consume(take + usize::from(newline));
        if newline {
            ended = true;
            break;
        }
    }
    if !ended && len == 0 {
        return None;
    }
    if len > max {
        return Some(format!("[a line of {len} bytes, longer than the {max} kept: dropped]"));
    }
    Some(String::from_utf8_lossy(&line).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_longer_than_the_bound_is_dropped_and_reading_goes_on() {
        let mut input = b"first\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 100_000));
        input.extend_from_slice(b"\nlast");
        let lines: Vec<String> = bounded(&input[..], 1000).collect();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(lines[0], "first");
        assert_eq!(lines[1], "[a line of 100000 bytes, longer than the 1000 kept: dropped]");
        assert_eq!(lines[2], "last");
        assert_eq!(bounded(&b"a\n\nb\n"[..], 10).collect::<Vec<_>>(), ["a", "", "b"]);
        assert_eq!(bounded(&b"exactly10!\n"[..], 10).collect::<Vec<_>>(), ["exactly10!"]);
    }
}
