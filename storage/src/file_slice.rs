//! [`FileSlice`]: a byte region of a segment file handed to the network layer
//! so that Fetch responses can be sent with `sendfile` (zero copy). The slice
//! holds its own `Arc<File>`, so rolling, deleting or closing the log never
//! invalidates a send in flight. Owns no Kafka protocol knowledge.

use std::fs::File;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;

/// A region `[position, position + len)` of a segment's `.log` file holding
/// whole record batches.
#[derive(Clone)]
pub struct FileSlice {
    file: Arc<File>,
    position: u64,
    len: usize,
}

impl std::fmt::Debug for FileSlice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSlice")
            .field("position", &self.position)
            .field("len", &self.len)
            .finish()
    }
}

impl FileSlice {
    pub(crate) fn new(file: Arc<File>, position: u64, len: usize) -> Self {
        FileSlice {
            file,
            position,
            len,
        }
    }

    /// Length of the region in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Byte position of the region in its file.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Reads the whole region into memory with `pread`.
    ///
    /// # Errors
    /// The `pread` error; `UnexpectedEof` if the file is now shorter than the
    /// region.
    pub fn read_to_bytes(&self) -> std::io::Result<Bytes> {
        self.read_range(0, self.len)
    }

    /// Reads `len` bytes from `start` bytes into the region with `pread`
    /// (TLS connections read a region in parts).
    ///
    /// # Errors
    /// `InvalidInput` when the range leaves the region; the `pread` error;
    /// `UnexpectedEof` if the file is now shorter than the range.
    pub fn read_range(&self, start: usize, len: usize) -> std::io::Result<Bytes> {
        if start.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "range outside the file region",
            ));
        }
        let mut buf = vec![0u8; len];
        self.file
            .read_exact_at(&mut buf, self.position + start as u64)?;
        Ok(Bytes::from(buf))
    }

    /// Sends up to the rest of the region, starting `sent` bytes into it, to
    /// `socket` with `sendfile(2)`. Returns the number of bytes written, which
    /// may be less than asked (partial write) and is 0 once `sent >= len()`.
    ///
    /// # Errors
    /// The `sendfile` error, unchanged: `WouldBlock` on a full non-blocking
    /// socket (wait for writability and call again with the new `sent`).
    pub fn send_to(&self, socket: BorrowedFd<'_>, sent: usize) -> std::io::Result<usize> {
        if sent >= self.len {
            return Ok(0);
        }
        let mut offset = self.position + sent as u64;
        let count = self.len - sent;
        Ok(rustix::fs::sendfile(
            socket,
            &*self.file,
            Some(&mut offset),
            count,
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;

    #[test]
    fn read_and_sendfile_return_exactly_the_region() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let content: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&content)
            .unwrap();
        let file = Arc::new(File::open(&path).unwrap());
        let slice = FileSlice::new(file, 100, 5000);
        assert_eq!(&slice.read_to_bytes().unwrap()[..], &content[100..5100]);

        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut sent = 0;
        let mut received = Vec::new();
        while sent < slice.len() {
            sent += slice.send_to(a.as_fd(), sent).unwrap();
            let mut buf = vec![0u8; 65536];
            let n = b.read(&mut buf).unwrap();
            received.extend_from_slice(&buf[..n]);
        }
        drop(a);
        b.read_to_end(&mut received).unwrap();
        assert_eq!(received, &content[100..5100]);
        assert_eq!(slice.send_to(b.as_fd(), slice.len()).unwrap(), 0);
    }
}
