//! A body streamed to the engine as a blocking task makes it: a build
//! context as it is written, a shelved image's archive as it is
//! decompressed. Built whole in memory first, a django tree's context took
//! 110 MB of heap (the growing buffer and a copy).

/// Chunks in flight to the engine, at most.
pub const CHUNKS_IN_FLIGHT: usize = 8;
/// Size of one chunk.
const CHUNK: usize = 256 << 10;

/// A `Write` that sends what is written to the engine in chunks (from a
/// blocking task, through a bounded channel); a closed channel (the engine
/// stopped reading) is a broken pipe.
pub struct ChunkSender {
    tx: tokio::sync::mpsc::Sender<std::io::Result<bytes::Bytes>>,
    buf: Vec<u8>,
}

impl ChunkSender {
    pub fn new(tx: tokio::sync::mpsc::Sender<std::io::Result<bytes::Bytes>>) -> ChunkSender {
        ChunkSender {
            tx,
            buf: Vec::new(),
        }
    }

    /// What is left, sent.
    pub fn send(mut self) -> std::io::Result<()> {
        self.flush_chunk()
    }

    fn flush_chunk(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = bytes::Bytes::from(std::mem::take(&mut self.buf));
        self.tx.blocking_send(Ok(chunk)).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the engine stopped reading")
        })
    }
}

impl std::io::Write for ChunkSender {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.flush_chunk()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
