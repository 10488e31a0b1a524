//! An engine's output split into lines as bytes, not text: a line that is
//! not UTF-8 is kept with its bad bytes replaced, and a line longer than the
//! cap is kept to the cap and the rest of it skipped. Reading never stops
//! before the pipe ends, since an engine whose pipe is no longer read
//! blocks, or dies of SIGPIPE once it is closed.

use bytes::{Buf, BytesMut};
use tokio_util::codec::Decoder;

/// Splits bytes into lines of at most `cap` bytes (a longer one is cut,
/// with `…` appended). Trailing `\r` is dropped.
pub struct CappedLines {
    cap: usize,
    /// Inside a line already cut: skip to its end.
    skipping: bool,
}

impl CappedLines {
    pub fn new(cap: usize) -> Self {
        CappedLines { cap, skipping: false }
    }

    fn text(bytes: &[u8]) -> String {
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        String::from_utf8_lossy(bytes).into_owned()
    }
}

impl Decoder for CappedLines {
    type Item = String;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<String>, std::io::Error> {
        loop {
            let newline = buf.iter().position(|b| *b == b'\n');
            if self.skipping {
                match newline {
                    Some(at) => {
                        buf.advance(at + 1);
                        self.skipping = false;
                        continue;
                    }
                    None => {
                        buf.clear();
                        return Ok(None);
                    }
                }
            }
            return Ok(match newline {
                Some(at) if at <= self.cap => {
                    let line = buf.split_to(at + 1);
                    Some(Self::text(&line[..at]))
                }
                // Too long: keep the cap's worth, skip the rest of the line.
                _ if buf.len() > self.cap || newline.is_some() => {
                    let head = buf.split_to(self.cap);
                    self.skipping = true;
                    let mut text = Self::text(&head);
                    text.push('…');
                    Some(text)
                }
                _ => None,
            });
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<String>, std::io::Error> {
        if let Some(line) = self.decode(buf)? {
            return Ok(Some(line));
        }
        // The last line, without its newline.
        if buf.is_empty() || self.skipping {
            buf.clear();
            return Ok(None);
        }
        let rest = buf.split();
        Ok(Some(Self::text(&rest)))
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use tokio_util::codec::FramedRead;

    use super::CappedLines;

    async fn lines(input: &[u8], cap: usize) -> Vec<String> {
        FramedRead::new(input, CappedLines::new(cap)).map(|l| l.unwrap()).collect().await
    }

    #[tokio::test]
    async fn bad_bytes_and_long_lines_do_not_stop_the_reading() {
        let mut input = b"ready\r\n".to_vec();
        input.extend(b"bad \xff\xfe bytes\n");
        input.extend(vec![b'x'; 100]);
        input.extend(b"\nafter\nlast without newline");
        let got = lines(&input, 10).await;
        assert_eq!(
            got,
            ["ready", "bad \u{fffd}\u{fffd} byt…", "xxxxxxxxxx…", "after", "last witho…"]
        );
    }

    #[tokio::test]
    async fn a_line_longer_than_a_read_is_cut_once() {
        // Read in small chunks: the cut line's rest arrives over many reads.
        let mut input = vec![b'y'; 50_000];
        input.extend(b"\nnext\n");
        let reader = tokio::io::BufReader::with_capacity(64, &input[..]);
        let got: Vec<String> =
            FramedRead::new(reader, CappedLines::new(1000)).map(|l| l.unwrap()).collect().await;
        assert_eq!(got.len(), 2, "{:?}", got.iter().map(String::len).collect::<Vec<_>>());
        assert_eq!(got[0].len(), 1000 + '…'.len_utf8());
        assert_eq!(got[1], "next");
    }
}
