//! The little HTTP/1.1 `pqtls serve` speaks: `GET /<size>` answers with that many bytes
//! (`/0`, `/1KiB`, `/64KiB`; `/` is `/0`), `GET /stats` with the server's counters as JSON.
//! Requests are parsed by `httparse`; nothing else of HTTP is implemented.

use pqtls_core::units;

/// One parsed request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// The client wants the connection kept open after the response (HTTP/1.1 unless
    /// `Connection: close`; HTTP/1.0 only with `Connection: keep-alive`).
    pub keep_alive: bool,
}

/// What a request asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// A body of this many bytes.
    Bytes(u64),
    Stats,
    /// 404 / 405 / 413 with a short reason.
    Error(u16, String),
}

/// The most bytes one request may ask for.
pub const MAX_RESPONSE_BYTES: u64 = 1 << 30;
/// A request head larger than this is refused (431).
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// A request refused: the status to answer with (400, 431) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    pub status: u16,
    pub message: String,
}

fn refused(status: u16, message: String) -> Refused {
    Refused { status, message }
}

/// Whether a request head may end in `buf` (an empty line, `\n\n` or `\n\r\n`), searching from
/// about `from` (what an earlier call searched): a head that trickles in is parsed once it may
/// be complete, not once per byte.
pub fn head_may_end(buf: &[u8], from: usize) -> bool {
    let start = from.saturating_sub(2).min(buf.len());
    (start..buf.len()).any(|i| {
        buf[i] == b'\n'
            && (buf.get(i + 1) == Some(&b'\n') || (buf.get(i + 1) == Some(&b'\r') && buf.get(i + 2) == Some(&b'\n')))
    })
}

/// An empty chunked body: the last chunk, no trailers.
const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// Parses the first request in `buf`: `Ok(None)` when it is not complete yet, else the request
/// and how many bytes it took. Requests with a body are refused (only GET is served; an empty
/// chunked body is taken with its head). A head
/// longer than [`MAX_HEAD_BYTES`] is refused with 431 however it arrived (only the first
/// `MAX_HEAD_BYTES` are looked at: a head that does not end within them is too long); one of
/// exactly `MAX_HEAD_BYTES` is taken.
pub fn parse(buf: &[u8]) -> Result<Option<(Request, usize)>, Refused> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    let window = &buf[..buf.len().min(MAX_HEAD_BYTES)];
    let n = match req.parse(window) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if window.len() == MAX_HEAD_BYTES => {
            return Err(refused(431, format!("request head over {MAX_HEAD_BYTES} bytes")))
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(refused(431, format!("over {} header fields", headers.len())))
        }
        Err(e) => return Err(refused(400, format!("not an HTTP/1.x request: {e}"))),
    };
    let header = |name: &str| {
        req.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_ascii_lowercase())
    };
    // Request smuggling (RFC 9112 §6.3): a length that is not exactly 0 in any Content-Length
    // field (a second field, or a list), or a length beside Transfer-Encoding, is an
    // unrecoverable framing error: 400, and the connection closes.
    let lengths: Vec<String> = req
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("content-length"))
        .map(|h| String::from_utf8_lossy(h.value).trim().to_string())
        .collect();
    if lengths.len() > 1 || (!lengths.is_empty() && header("transfer-encoding").is_some()) {
        return Err(refused(
            400,
            format!(
                "ambiguous framing: {} Content-Length field(s) ({}){} — RFC 9112 §6.3",
                lengths.len(),
                lengths.join(", "),
                if header("transfer-encoding").is_some() { " beside Transfer-Encoding" } else { "" }
            ),
        ));
    }
    let mut n = n;
    match header("transfer-encoding").as_deref() {
        None => {}
        // An empty chunked body: what a proxy converting an HTTP/3 or HTTP/2 request whose
        // stream ended after its headers (HAProxy) sends. Taken with the head.
        Some("chunked") => {
            let rest = &buf[n..];
            if rest.len() < LAST_CHUNK.len() && LAST_CHUNK.starts_with(rest) {
                return Ok(None);
            }
            if !rest.starts_with(LAST_CHUNK) {
                return Err(refused(400, "requests with a body are not served (only GET)".into()));
            }
            n += LAST_CHUNK.len();
        }
        Some(_) => return Err(refused(400, "requests with a body are not served (only GET)".into())),
    }
    if header("content-length").is_some_and(|v| v != "0") {
        return Err(refused(400, "requests with a body are not served (only GET)".into()));
    }
    let connection = header("connection");
    let keep_alive = match req.version {
        Some(1) => connection.as_deref() != Some("close"),
        _ => connection.as_deref() == Some("keep-alive"),
    };
    Ok(Some((
        Request { method: req.method.unwrap_or("").to_string(), path: req.path.unwrap_or("").to_string(), keep_alive },
        n,
    )))
}

/// The most characters of a client's path or method an error answer repeats.
pub const ECHO_CHARS: usize = 64;

/// `s` as an error answer shows it: whole when short, else its first [`ECHO_CHARS`] characters
/// and its length.
fn echo(s: &str) -> String {
    match s.char_indices().nth(ECHO_CHARS) {
        None => format!("{s:?}"),
        Some((cut, _)) => format!("{:?}… ({} bytes)", &s[..cut], s.len()),
    }
}

/// The route of a request. Error answers repeat the client's path or method once, cut to
/// [`ECHO_CHARS`].
pub fn route(req: &Request) -> Route {
    if req.method != "GET" {
        return Route::Error(405, format!("method {} is not served; use GET /<size>", echo(&req.method)));
    }
    let path = req.path.split('?').next().unwrap_or("");
    match path {
        "/" => Route::Bytes(0),
        "/stats" => Route::Stats,
        p => match units::bytes(p.strip_prefix('/').unwrap_or(p)) {
            Ok(n) if n <= MAX_RESPONSE_BYTES => Route::Bytes(n),
            Ok(n) => Route::Error(413, format!("{n} bytes asked; at most {MAX_RESPONSE_BYTES}")),
            Err(_) => Route::Error(
                404,
                format!(
                    "{} is not a size (a number with B, KiB, MiB, GiB, kB or MB); ask for GET /<size>, e.g. /1KiB",
                    echo(p)
                ),
            ),
        },
    }
}

/// A response head.
pub fn head(status: u16, content_length: u64, keep_alive: bool, content_type: &str) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Payload Too Large",
        431 => "Request Header Fields Too Large",
        _ => "Error",
    };
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Length: {content_length}\r\nContent-Type: {content_type}\r\nConnection: {}\r\nServer: pqtls\r\n\r\n",
        if keep_alive { "keep-alive" } else { "close" }
    )
    .into_bytes()
}

/// A `GET` request as the load generator sends it.
pub fn get(path: &str, host: &str, keep_alive: bool) -> Vec<u8> {
    format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: pqtls-load\r\nConnection: {}\r\n\r\n",
        if keep_alive { "keep-alive" } else { "close" }
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_and_route() {
        let (r, n) = parse(b"GET /64KiB HTTP/1.1\r\nHost: x\r\n\r\nGET").unwrap().unwrap();
        assert_eq!((r.path.as_str(), r.keep_alive, n), ("/64KiB", true, 32));
        assert_eq!(route(&r), Route::Bytes(65536));
        let (r, _) = parse(b"GET /0 HTTP/1.1\r\nConnection: close\r\n\r\n").unwrap().unwrap();
        assert!(!r.keep_alive);
        let (r, _) = parse(b"GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert!(!r.keep_alive && route(&r) == Route::Bytes(0));
        assert_eq!(parse(b"GET /1KiB HTTP/1.1\r\nHo").unwrap(), None);
        assert!(parse(b"\x16\x03\x01\x02\x00").is_err(), "a TLS record is not HTTP");
        assert!(parse(b"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc").is_err());
        // Issue 39: CL.CL smuggling — a first length of 0 does not hide a second one.
        for head in [
            &b"GET / HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 29\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n",
            b"GET / HTTP/1.1\r\nContent-Length: 0, 29\r\n\r\n",
            b"GET / HTTP/1.1\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        ] {
            let e = parse(head).unwrap_err();
            assert_eq!(e.status, 400, "{}", String::from_utf8_lossy(head));
        }
        // An empty chunked body (HAProxy forwarding an HTTP/3 GET) is taken with the head,
        // waited for while it is incomplete; a chunk with data is refused.
        let head = b"GET /1KiB HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
        let whole = [&head[..], b"0\r\n\r\nGET"].concat();
        assert_eq!(parse(&whole).unwrap().unwrap().1, head.len() + 5);
        assert!(parse(&[&head[..], b"0\r\n"].concat()).unwrap().is_none());
        assert!(parse(head).unwrap().is_none());
        assert_eq!(parse(&[&head[..], b"3\r\nabc\r\n0\r\n\r\n"].concat()).unwrap_err().status, 400);
        assert_eq!(parse(b"GET / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n").unwrap_err().status, 400);
        let bad = |p: &str| route(&Request { method: "GET".into(), path: p.into(), keep_alive: true });
        assert!(matches!(bad("/lots"), Route::Error(404, _)));
        assert!(matches!(bad("/2GiB"), Route::Error(413, _)));
        assert_eq!(bad("/stats"), Route::Stats);
        assert_eq!(parse(b"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc").unwrap_err().status, 400);
    }

    /// A head of `len` bytes: `GET / HTTP/1.1`, one padding header, the empty line.
    fn head_of(len: usize) -> Vec<u8> {
        let fixed = "GET / HTTP/1.1\r\nX-Pad: \r\n\r\n".len();
        format!("GET / HTTP/1.1\r\nX-Pad: {}\r\n\r\n", "a".repeat(len - fixed)).into_bytes()
    }

    #[test]
    fn the_head_limit_does_not_depend_on_how_the_bytes_arrive() {
        let at = head_of(MAX_HEAD_BYTES);
        assert_eq!(at.len(), MAX_HEAD_BYTES);
        assert_eq!(parse(&at).unwrap().unwrap().1, MAX_HEAD_BYTES, "a head exactly at the limit is taken");
        let over = head_of(MAX_HEAD_BYTES + 1);
        assert_eq!(parse(&over).unwrap_err().status, 431, "in one piece");
        // Byte by byte: incomplete until the limit, then refused (never taken).
        for n in 1..over.len() {
            match parse(&over[..n]) {
                Ok(None) => assert!(n < MAX_HEAD_BYTES, "{n}"),
                Err(e) => assert!(n >= MAX_HEAD_BYTES && e.status == 431, "{n}: {e:?}"),
                Ok(Some(_)) => panic!("a head over the limit was taken at {n} bytes"),
            }
        }
        // Followed by more (a pipelined request): the same.
        let mut two = at.clone();
        two.extend_from_slice(b"GET /1 HTTP/1.1\r\n\r\n");
        assert_eq!(parse(&two).unwrap().unwrap().1, MAX_HEAD_BYTES);
        assert!(head_may_end(&at, 0) && !head_may_end(b"GET / HTTP/1.1\r\nA: b\r\n", 0));
        assert!(head_may_end(b"GET / HTTP/1.1\r\n\r\n", 15), "found across the previous search's end");
    }

    #[test]
    fn error_answers_repeat_a_long_path_once_cut_short() {
        let path = format!("/{}", "z".repeat(100_000));
        let Route::Error(404, why) = route(&Request { method: "GET".into(), path, keep_alive: true }) else {
            panic!("not a 404")
        };
        assert!(why.len() < 300, "{} bytes: {why}", why.len());
        let cut = "z".repeat(ECHO_CHARS - 1);
        assert!(why.matches(&cut).count() == 1 && !why.contains(&format!("{cut}z")), "the path once, cut short: {why}");
        assert!(why.contains("(100001 bytes)") && why.contains("/<size>"), "{why}");
        let Route::Error(404, why) = route(&Request { method: "GET".into(), path: "/lots".into(), keep_alive: true })
        else {
            panic!("not a 404")
        };
        assert_eq!(why.matches("lots").count(), 1, "{why}");
    }

    #[test]
    fn the_load_request_parses() {
        let req = get("/1KiB", "h", false);
        let (r, n) = parse(&req).unwrap().unwrap();
        assert_eq!((r.path.as_str(), r.keep_alive, n), ("/1KiB", false, req.len()));
    }
}
