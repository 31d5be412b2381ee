//! HTTP/1.1 message boundaries in a connection's application data (httparse for the heads):
//! requests by their head and Content-Length, responses by their head and Content-Length or
//! chunked transfer coding, or to the end of the stream when neither says where they end.

/// One message: [start, end) in the direction's application data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub start: u64,
    pub end: u64,
    /// The request's method or the response's status.
    pub what: String,
}

const MAX_HEADERS: usize = 100;

fn content_length(headers: &[httparse::Header]) -> Result<Option<u64>, String> {
    match headers.iter().find(|h| h.name.eq_ignore_ascii_case("content-length")) {
        None => Ok(None),
        Some(h) => std::str::from_utf8(h.value)
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .map(Some)
            .ok_or_else(|| format!("Content-Length {:?} is not a number", String::from_utf8_lossy(h.value))),
    }
}

fn chunked(headers: &[httparse::Header]) -> bool {
    headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("transfer-encoding")
            && String::from_utf8_lossy(h.value).to_ascii_lowercase().contains("chunked")
    })
}

/// The requests in `data`; the second value says why the split stopped early (an incomplete
/// or malformed request), if it did.
pub fn requests(data: &[u8]) -> (Vec<Message>, Option<String>) {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        let head = match req.parse(&data[at..]) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return (out, Some(format!("an incomplete request head at offset {at}"))),
            Err(e) => return (out, Some(format!("not an HTTP/1.1 request at offset {at}: {e}"))),
        };
        let body = match content_length(req.headers) {
            Ok(n) => n.unwrap_or(0),
            Err(e) => return (out, Some(e)),
        };
        let end = (at as u64 + head as u64).saturating_add(body);
        if end > data.len() as u64 {
            return (out, Some(format!("a request body cut short at offset {at}")));
        }
        out.push(Message { start: at as u64, end, what: req.method.unwrap_or("?").to_string() });
        at = end as usize;
    }
    (out, None)
}

/// The end of a chunked body starting at `at`, if it is all there.
fn chunked_end(data: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let (skip, size) = match httparse::parse_chunk_size(&data[at..]) {
            Ok(httparse::Status::Complete(x)) => x,
            _ => return None,
        };
        at += skip;
        if size == 0 {
            // Trailers, then an empty line.
            loop {
                let line_end = data[at..].windows(2).position(|w| w == b"\r\n")?;
                at += line_end + 2;
                if line_end == 0 {
                    return Some(at);
                }
            }
        }
        at = at.checked_add(usize::try_from(size).ok()?)?.checked_add(2)?;
        if at > data.len() {
            return None;
        }
    }
}

/// The responses in `data` to requests with `methods` (in order: a HEAD response has no
/// body); the second value says why the split stopped early, if it did.
pub fn responses(data: &[u8], methods: &[String]) -> (Vec<Message>, Option<String>) {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let head = match resp.parse(&data[at..]) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return (out, Some(format!("an incomplete response head at offset {at}"))),
            Err(e) => return (out, Some(format!("not an HTTP/1.1 response at offset {at}: {e}"))),
        };
        let status = resp.code.unwrap_or(0);
        let head_only = methods.get(out.len()).is_some_and(|m| m == "HEAD")
            || (100..200).contains(&status)
            || status == 204
            || status == 304;
        let end = if head_only {
            Some(at + head)
        } else if chunked(resp.headers) {
            chunked_end(data, at + head)
        } else {
            match content_length(resp.headers) {
                Ok(Some(n)) => {
                    usize::try_from(n).ok().and_then(|n| (at + head).checked_add(n)).filter(|e| *e <= data.len())
                }
                // No length: the body runs to the end of the connection.
                Ok(None) => Some(data.len()),
                Err(e) => return (out, Some(e)),
            }
        };
        let Some(end) = end else {
            return (out, Some(format!("a response body cut short at offset {at} (status {status})")));
        };
        if (100..200).contains(&status) {
            // An interim response belongs to the request the next one answers.
            at = end;
            continue;
        }
        out.push(Message { start: at as u64, end: end as u64, what: status.to_string() });
        at = end;
    }
    (out, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_responses_by_length_and_chunks() {
        let reqs = b"GET /4KiB HTTP/1.1\r\nHost: a\r\n\r\nPOST /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET /";
        let (r, stop) = requests(reqs);
        assert_eq!(
            r.iter().map(|m| (m.start, m.end, m.what.as_str())).collect::<Vec<_>>(),
            [(0, 31, "GET"), (31, 73, "POST")]
        );
        assert!(stop.unwrap().contains("incomplete request head at offset 73"));
        let mut resp = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".to_vec();
        resp.extend(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
        resp.extend(b"HTTP/1.1 200 OK\r\n\r\nto the end");
        let (r, stop) = responses(&resp, &["GET".into(), "GET".into(), "GET".into()]);
        assert_eq!(stop, None);
        assert_eq!(r.iter().map(|m| m.end - m.start).collect::<Vec<_>>(), [43, 60, 29]);
        let (r, stop) = responses(&resp[..40], &[]);
        assert!(r.is_empty());
        assert!(stop.unwrap().contains("cut short at offset 0 (status 200)"));
    }
}
