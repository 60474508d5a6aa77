//! The test log under a cap: the first half of the cap and the last half
//! are kept, the middle dropped. The end holds what grading reads (the
//! runner's summary, the end marker, the exit code), so a test that floods
//! the output cannot push the real results out of the log.

use crate::backend::LogCap;

/// A log being read, at most `cap` bytes kept.
pub struct CappedLog {
    cap: usize,
    head: Vec<u8>,
    /// The last bytes seen, as a ring once full (`start` is its oldest).
    tail: Vec<u8>,
    start: usize,
    dropped: u64,
}

impl CappedLog {
    pub fn new(cap: usize) -> CappedLog {
        CappedLog {
            cap,
            head: Vec::new(),
            tail: Vec::new(),
            start: 0,
            dropped: 0,
        }
    }

    fn head_cap(&self) -> usize {
        self.cap / 2
    }

    fn tail_cap(&self) -> usize {
        self.cap - self.head_cap()
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        let room = self.head_cap() - self.head.len();
        if room > 0 {
            let n = room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
        }
        let tail_cap = self.tail_cap();
        if tail_cap == 0 {
            self.dropped += bytes.len() as u64;
            return;
        }
        if bytes.len() >= tail_cap {
            // Everything in the ring, and the front of `bytes`, goes.
            self.dropped += (self.tail.len() + bytes.len() - tail_cap) as u64;
            self.tail.clear();
            self.tail
                .extend_from_slice(&bytes[bytes.len() - tail_cap..]);
            self.start = 0;
            return;
        }
        // Fill the ring, then overwrite its oldest bytes, slice by slice.
        let fill = (tail_cap - self.tail.len()).min(bytes.len());
        self.tail.extend_from_slice(&bytes[..fill]);
        let mut rest = &bytes[fill..];
        while !rest.is_empty() {
            let n = (tail_cap - self.start).min(rest.len());
            self.tail[self.start..self.start + n].copy_from_slice(&rest[..n]);
            self.start = (self.start + n) % tail_cap;
            self.dropped += n as u64;
            rest = &rest[n..];
        }
    }

    /// The log kept (a note where the middle was dropped) and the cap, if
    /// it was reached.
    pub fn finish(self) -> (Vec<u8>, Option<LogCap>) {
        let mut log = self.head;
        if self.dropped > 0 {
            log.extend_from_slice(
                format!(
                    "\n[patchgrade: {} bytes of output dropped here; the log keeps the first and last {} bytes]\n",
                    self.dropped,
                    self.cap / 2
                )
                .as_bytes(),
            );
        }
        log.extend_from_slice(&self.tail[self.start..]);
        log.extend_from_slice(&self.tail[..self.start]);
        let capped = (self.dropped > 0).then_some(LogCap {
            cap: self.cap,
            dropped: self.dropped,
        });
        (log, capped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capped(cap: usize, chunks: &[&[u8]]) -> (String, Option<LogCap>) {
        let mut l = CappedLog::new(cap);
        for c in chunks {
            l.push(c);
        }
        let (log, cap) = l.finish();
        (String::from_utf8(log).unwrap(), cap)
    }

    #[test]
    fn under_the_cap_everything_is_kept() {
        assert_eq!(capped(10, &[b"abc", b"de"]), ("abcde".into(), None));
        assert_eq!(capped(10, &[b"abcdefghij"]), ("abcdefghij".into(), None));
    }

    #[test]
    fn past_the_cap_head_and_tail_are_kept() {
        let whole: Vec<u8> = (0..100u8).map(|i| b'a' + i % 26).collect();
        for split in [1usize, 3, 7, 50, 100] {
            let chunks: Vec<&[u8]> = whole.chunks(split).collect();
            let (log, cap) = capped(10, &chunks);
            assert_eq!(
                cap,
                Some(LogCap {
                    cap: 10,
                    dropped: 90
                }),
                "{split}"
            );
            assert!(log.starts_with("abcde\n[patchgrade: 90 bytes"), "{log}");
            let tail = String::from_utf8(whole[95..].to_vec()).unwrap();
            assert!(log.ends_with(&format!("]\n{tail}")), "{split}: {log}");
        }
    }
}
