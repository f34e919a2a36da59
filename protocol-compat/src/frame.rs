//! Size-prefix framing of Kafka requests and responses.
//!
//! Every Kafka request and response on a connection is preceded by a 4-byte
//! big-endian signed size giving the length of what follows (protocol guide,
//! "Common Request and Response Structure"). This module only splits frames
//! off a read buffer; it knows nothing about headers, sockets or tokio.

use bytes::{Buf, BytesMut};

/// Byte length of the size prefix that precedes every frame.
pub const SIZE_PREFIX_BYTES: usize = 4;

/// Default upper bound on one request frame, in bytes (excluding the 4-byte
/// size prefix): Kafka's `socket.request.max.bytes` default of 100 MiB.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 104_857_600;

/// A size prefix that no valid frame can have; the connection must be closed
/// (Kafka's `InvalidReceiveException`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The size prefix announces more bytes than the configured limit.
    #[error("frame of {size} bytes exceeds the limit of {max} bytes (socket.request.max.bytes)")]
    TooLarge {
        /// Announced frame size in bytes, without the prefix.
        size: usize,
        /// Configured maximum in bytes.
        max: usize,
    },
    /// The size prefix is negative.
    #[error("frame size prefix is negative ({size})")]
    NegativeSize {
        /// The raw prefix value.
        size: i32,
    },
}

/// Splits one complete frame off the front of `buf`.
///
/// Returns the frame's content (without its 4-byte size prefix) and advances
/// `buf` past it, or `Ok(None)` when `buf` does not yet hold a complete
/// frame (in which case `buf` is left untouched). Nothing is reserved from
/// the size prefix: the caller's buffer grows as bytes arrive, so a prefix
/// announcing a large frame costs nothing until its bytes are sent (as
/// Kafka's `NetworkReceive` allocates only once the size is read and the
/// memory pool grants it). A frame of size 0 is returned as an empty
/// buffer; the decoder rejects it as truncated.
///
/// `max_frame_bytes` bounds the frame size without the prefix, as Kafka's
/// `socket.request.max.bytes` does; [`DEFAULT_MAX_REQUEST_BYTES`] is the
/// default.
///
/// # Errors
///
/// [`FrameError::NegativeSize`] if the prefix is negative and
/// [`FrameError::TooLarge`] if it exceeds `max_frame_bytes`; both are checked
/// as soon as the 4 prefix bytes are present, before the body arrives. The
/// caller closes the connection in both cases.
pub fn decode_frame(
    buf: &mut BytesMut,
    max_frame_bytes: usize,
) -> Result<Option<BytesMut>, FrameError> {
    let Some(prefix) = buf.get(..SIZE_PREFIX_BYTES) else {
        return Ok(None);
    };
    let size = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    let Ok(size_bytes) = usize::try_from(size) else {
        return Err(FrameError::NegativeSize { size });
    };
    if size_bytes > max_frame_bytes {
        return Err(FrameError::TooLarge {
            size: size_bytes,
            max: max_frame_bytes,
        });
    }
    if buf.len() < SIZE_PREFIX_BYTES + size_bytes {
        return Ok(None);
    }
    buf.advance(SIZE_PREFIX_BYTES);
    Ok(Some(buf.split_to(size_bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(body: &[u8]) -> Vec<u8> {
        let mut out = (body.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn incomplete_prefix_and_body_wait_for_more_bytes() {
        let whole = framed(b"hello");
        for cut in 0..whole.len() {
            let mut buf = BytesMut::from(&whole[..cut]);
            assert_eq!(decode_frame(&mut buf, 100), Ok(None), "cut at {cut}");
            assert_eq!(&buf[..], &whole[..cut], "buffer untouched at cut {cut}");
        }
    }

    #[test]
    fn a_large_size_prefix_reserves_nothing() {
        let mut buf = BytesMut::from(&(100_i32 << 20).to_be_bytes()[..]);
        let before = buf.capacity();
        assert_eq!(decode_frame(&mut buf, DEFAULT_MAX_REQUEST_BYTES), Ok(None));
        assert_eq!(buf.capacity(), before, "nothing reserved from the prefix");
    }

    #[test]
    fn exact_frame_is_split_and_buffer_emptied() {
        let mut buf = BytesMut::from(&framed(b"hello")[..]);
        let frame = decode_frame(&mut buf, 100).unwrap().unwrap();
        assert_eq!(&frame[..], b"hello");
        assert!(buf.is_empty());
    }

    #[test]
    fn two_frames_and_a_partial_third_come_out_in_order() {
        let mut bytes = framed(b"first");
        bytes.extend(framed(b""));
        bytes.extend(framed(b"second"));
        bytes.extend(&framed(b"third")[..6]);
        let mut buf = BytesMut::from(&bytes[..]);
        assert_eq!(&decode_frame(&mut buf, 100).unwrap().unwrap()[..], b"first");
        assert_eq!(&decode_frame(&mut buf, 100).unwrap().unwrap()[..], b"");
        assert_eq!(
            &decode_frame(&mut buf, 100).unwrap().unwrap()[..],
            b"second"
        );
        assert_eq!(decode_frame(&mut buf, 100), Ok(None));
        assert_eq!(buf.len(), 6);
    }

    #[test]
    fn too_large_is_rejected_from_the_prefix_alone() {
        let mut buf = BytesMut::from(&101i32.to_be_bytes()[..]);
        assert_eq!(
            decode_frame(&mut buf, 100),
            Err(FrameError::TooLarge {
                size: 101,
                max: 100
            })
        );
        let mut at_limit = BytesMut::from(&framed(&[7u8; 100])[..]);
        assert_eq!(
            decode_frame(&mut at_limit, 100).unwrap().unwrap().len(),
            100
        );
    }

    #[test]
    fn negative_size_is_rejected() {
        let mut buf = BytesMut::from(&(-1i32).to_be_bytes()[..]);
        assert_eq!(
            decode_frame(&mut buf, DEFAULT_MAX_REQUEST_BYTES),
            Err(FrameError::NegativeSize { size: -1 })
        );
        let mut min = BytesMut::from(&i32::MIN.to_be_bytes()[..]);
        assert_eq!(
            decode_frame(&mut min, DEFAULT_MAX_REQUEST_BYTES),
            Err(FrameError::NegativeSize { size: i32::MIN })
        );
    }
}
