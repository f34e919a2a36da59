//! A minimal HTTP/1.0 GET over `std::net::TcpStream` for the broker's
//! Prometheus endpoint, so the tests need no HTTP client crate or `curl`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::error::HarnessError;

/// An HTTP response: status code, headers as sent, body bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    /// The status code, e.g. 200.
    pub status: u16,
    /// Header lines after the status line, without CRLF.
    pub headers: Vec<String>,
    /// The body (everything after the blank line, until the server closes).
    pub body: Vec<u8>,
}

/// Sends `GET <path> HTTP/1.0` to `addr` and reads the response until the
/// server closes the connection (HTTP/1.0 without keep-alive).
///
/// # Errors
///
/// [`HarnessError::Io`] for connection failures or a 10 s read timeout, and
/// [`HarnessError::Http`] for a malformed status line.
pub fn http_get(addr: SocketAddr, path: &str) -> Result<HttpResponse, HarnessError> {
    let mut stream = TcpStream::connect(addr)
        .map_err(|e| HarnessError::io(format!("connecting to {addr}"), e))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| HarnessError::io("setting the read timeout", e))?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: text/plain\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .map_err(|e| HarnessError::io("writing the HTTP request", e))?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .map_err(|e| HarnessError::io("reading the HTTP response", e))?;
    parse_response(&raw)
}

fn parse_response(raw: &[u8]) -> Result<HttpResponse, HarnessError> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| HarnessError::Http {
            reason: "no end of headers".into(),
        })?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| HarnessError::Http {
            reason: format!("bad status line {status_line:?}"),
        })?;
    Ok(HttpResponse {
        status,
        headers: lines.map(str::to_owned).collect(),
        body: raw[split + 4..].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_headers_and_body() {
        let response =
            parse_response(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nweir_up 1\n")
                .unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(
            response.headers,
            vec!["content-type: text/plain".to_owned()]
        );
        assert_eq!(response.body, b"weir_up 1\n");
    }

    #[test]
    fn rejects_a_response_without_headers_end() {
        assert!(matches!(
            parse_response(b"HTTP/1.1 200 OK\r\n"),
            Err(HarnessError::Http { .. })
        ));
    }
}
