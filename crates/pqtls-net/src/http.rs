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

/// Parses the first request in `buf`: `Ok(None)` when it is not complete yet, else the request
/// and how many bytes it took. Requests with a body are refused (only GET is served).
pub fn parse(buf: &[u8]) -> Result<Option<(Request, usize)>, String> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    let n = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD_BYTES => {
            return Err(format!("request head over {MAX_HEAD_BYTES} bytes"))
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(format!("not an HTTP/1.x request: {e}")),
    };
    let header = |name: &str| {
        req.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_ascii_lowercase())
    };
    if header("content-length").is_some_and(|v| v != "0") || header("transfer-encoding").is_some() {
        return Err("requests with a body are not served (only GET)".into());
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

/// The route of a request.
pub fn route(req: &Request) -> Route {
    if req.method != "GET" {
        return Route::Error(405, format!("method {} is not served; use GET /<size>", req.method));
    }
    let path = req.path.split('?').next().unwrap_or("");
    match path {
        "/" => Route::Bytes(0),
        "/stats" => Route::Stats,
        p => match units::bytes(&p[1..]) {
            Ok(n) if n <= MAX_RESPONSE_BYTES => Route::Bytes(n),
            Ok(n) => Route::Error(413, format!("{n} bytes asked; at most {MAX_RESPONSE_BYTES}")),
            Err(e) => Route::Error(404, format!("{p}: {e}; ask for GET /<size>, e.g. /1KiB")),
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
        let bad = |p: &str| route(&Request { method: "GET".into(), path: p.into(), keep_alive: true });
        assert!(matches!(bad("/lots"), Route::Error(404, _)));
        assert!(matches!(bad("/2GiB"), Route::Error(413, _)));
        assert_eq!(bad("/stats"), Route::Stats);
    }

    #[test]
    fn the_load_request_parses() {
        let req = get("/1KiB", "h", false);
        let (r, n) = parse(&req).unwrap().unwrap();
        assert_eq!((r.path.as_str(), r.keep_alive, n), ("/1KiB", false, req.len()));
    }
}
