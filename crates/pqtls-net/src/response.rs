//! Reading one HTTP/1.1 response as its bytes arrive (the client side of `pqtls load` and of
//! `GET /stats`). The head is parsed by `httparse`; the body's length follows RFC 9112 §6.3:
//!
//! 1. a response to `HEAD`, and every `1xx` (interim: skipped, the final response follows),
//!    `204` and `304` response has no body;
//! 2. `Transfer-Encoding` with `chunked` last: a chunked body (sizes by
//!    `httparse::parse_chunk_size`, extensions ignored, trailers read and dropped); with another
//!    coding last: the body runs to the close;
//! 3. `Transfer-Encoding` together with `Content-Length` is refused (§6.3 ¶3: a possible
//!    smuggling attempt), as is `Transfer-Encoding` in an HTTP/1.0 response;
//! 4. `Content-Length` (repeated or listed values must agree);
//! 5. otherwise the body runs until the server closes the connection (close-delimited).
//!
//! Body bytes are counted, not kept (unless asked, for `/stats`), and bounded: a body over the
//! limit is an error of kind `body`; anything else wrong is of kind `http`. What is buffered is
//! bounded too: a head or trailer section of at most [`MAX_HEAD_BYTES`], a chunk-size line of at
//! most [`MAX_CHUNK_LINE_BYTES`].

pub use crate::http::MAX_HEAD_BYTES;

/// The longest chunk-size line (size and extensions) accepted.
pub const MAX_CHUNK_LINE_BYTES: usize = 4096;
/// Headers per response head (more is an error).
const MAX_HEADERS: usize = 64;

/// Why a response could not be read: `kind` is `http` (not HTTP/1.x, bad framing, cut short)
/// or `body` (a body over the limit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseError {
    pub kind: &'static str,
    pub message: String,
}

fn http(message: impl Into<String>) -> ResponseError {
    ResponseError { kind: "http", message: message.into() }
}

/// What [`ResponseReader::feed`] saw.
#[derive(Debug, PartialEq, Eq)]
pub enum Progress {
    /// Needs more bytes (or, for a close-delimited body, the close: [`ResponseReader::eof`]).
    More,
    /// The response is complete; `extra` bytes of the input were not part of it.
    Done { status: u16, extra: usize },
}

/// How the body's end is known (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (HEAD, 204, 304).
    Empty,
    /// `Content-Length`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the server closes the connection.
    Close,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    Length { left: u64 },
    ChunkSize,
    ChunkData { left: u64 },
    ChunkEnd,
    Trailers,
    Close,
    Done,
}

/// Reads one response; see the module's documentation.
#[derive(Debug)]
pub struct ResponseReader {
    state: State,
    /// Partial head, chunk-size line, chunk CRLF or trailers.
    buf: Vec<u8>,
    status: Option<u16>,
    framing: Option<Framing>,
    limit_bytes: u64,
    head_request: bool,
    keep_body: bool,
    body: Vec<u8>,
    body_bytes: u64,
    closes: bool,
}

impl ResponseReader {
    /// A reader of the response to a `GET`, whose body may have at most `limit_bytes`.
    pub fn new(limit_bytes: u64) -> ResponseReader {
        ResponseReader {
            state: State::Head,
            buf: Vec::new(),
            status: None,
            framing: None,
            limit_bytes,
            head_request: false,
            keep_body: false,
            body: Vec::new(),
            body_bytes: 0,
            closes: false,
        }
    }

    /// The response to a `HEAD` request (no body, whatever the head says).
    pub fn for_head_request(mut self) -> ResponseReader {
        self.head_request = true;
        self
    }

    /// Keep the body's bytes (decoded from chunks), bounded by the limit: [`Self::body`].
    pub fn keeping_body(mut self) -> ResponseReader {
        self.keep_body = true;
        self
    }

    /// The final response's status, once its head is read.
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// How the body ends, once the head is read.
    pub fn framing(&self) -> Option<Framing> {
        self.framing
    }

    /// Body bytes read so far (decoded: without chunk framing).
    pub fn body_bytes(&self) -> u64 {
        self.body_bytes
    }

    /// The body, when kept.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The server closes the connection after this response (`Connection: close`, HTTP/1.0
    /// without keep-alive, or a close-delimited body).
    pub fn closes(&self) -> bool {
        self.closes
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Feeds response bytes.
    pub fn feed(&mut self, data: &[u8]) -> Result<Progress, ResponseError> {
        let mut i = 0;
        loop {
            let rest = &data[i..];
            match self.state {
                State::Done => {
                    return Ok(Progress::Done { status: self.status.unwrap_or(0), extra: rest.len() });
                }
                _ if rest.is_empty() => return Ok(Progress::More),
                State::Head => {
                    let before = self.buf.len();
                    let take = rest.len().min(MAX_HEAD_BYTES.saturating_sub(before)).max(1);
                    self.buf.extend_from_slice(&rest[..take.min(rest.len())]);
                    match self.head()? {
                        Some(n) => {
                            i += n - before;
                            self.buf.clear();
                        }
                        None if self.buf.len() >= MAX_HEAD_BYTES => {
                            return Err(http(format!("a response head over {MAX_HEAD_BYTES} bytes")))
                        }
                        None => i += take.min(rest.len()),
                    }
                }
                State::Length { left } => {
                    let take = (rest.len() as u64).min(left);
                    self.body_data(&rest[..take as usize])?;
                    i += take as usize;
                    self.state = if left == take { State::Done } else { State::Length { left: left - take } };
                }
                State::Close => {
                    self.body_data(rest)?;
                    i = data.len();
                }
                State::ChunkSize => {
                    let Some(line) = self.line(rest, MAX_CHUNK_LINE_BYTES, "chunk-size line")? else {
                        return Ok(Progress::More);
                    };
                    i += line;
                    let size = match httparse::parse_chunk_size(&self.buf) {
                        Ok(httparse::Status::Complete((n, size)))
                            if n == self.buf.len() && self.buf[0].is_ascii_hexdigit() =>
                        {
                            size
                        }
                        _ => return Err(http(format!("a bad chunk size line {:?}", shown(&self.buf)))),
                    };
                    self.buf.clear();
                    if size == 0 {
                        self.state = State::Trailers;
                    } else {
                        if self.body_bytes.saturating_add(size) > self.limit_bytes {
                            return Err(self.over_limit(self.body_bytes.saturating_add(size)));
                        }
                        self.state = State::ChunkData { left: size };
                    }
                }
                State::ChunkData { left } => {
                    let take = (rest.len() as u64).min(left);
                    self.body_data(&rest[..take as usize])?;
                    i += take as usize;
                    self.state = if left == take { State::ChunkEnd } else { State::ChunkData { left: left - take } };
                }
                State::ChunkEnd => {
                    let take = rest.len().min(2 - self.buf.len());
                    self.buf.extend_from_slice(&rest[..take]);
                    i += take;
                    if self.buf.len() == 2 {
                        if self.buf != b"\r\n" {
                            return Err(http(format!(
                                "chunk data not followed by CRLF (got {:?}): the chunk is longer than its size",
                                shown(&self.buf)
                            )));
                        }
                        self.buf.clear();
                        self.state = State::ChunkSize;
                    }
                }
                State::Trailers => {
                    let Some(line) = self.line(rest, MAX_HEAD_BYTES, "trailer section")? else {
                        return Ok(Progress::More);
                    };
                    i += line;
                    if self.buf == b"\r\n" || self.buf.ends_with(b"\r\n\r\n") {
                        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
                        match httparse::parse_headers(&self.buf, &mut headers) {
                            Ok(httparse::Status::Complete((n, _))) if n == self.buf.len() => {}
                            Ok(_) | Err(_) => {
                                return Err(http(format!("a bad trailer section {:?}", shown(&self.buf))))
                            }
                        }
                        self.buf = Vec::new();
                        self.state = State::Done;
                    }
                }
            }
        }
    }

    /// The server closed the connection: the end of a close-delimited body, else a response cut
    /// short (an error saying where).
    pub fn eof(&mut self) -> Result<Progress, ResponseError> {
        match self.state {
            State::Close => {
                self.state = State::Done;
                Ok(Progress::Done { status: self.status.unwrap_or(0), extra: 0 })
            }
            State::Done => Ok(Progress::Done { status: self.status.unwrap_or(0), extra: 0 }),
            State::Head if self.buf.is_empty() && self.status.is_none() => {
                Err(http("the server closed the connection before responding"))
            }
            State::Head => Err(http(format!(
                "the server closed the connection in the middle of a response head ({} bytes)",
                self.buf.len()
            ))),
            State::Length { left } => Err(http(format!(
                "the server closed the connection after {} body bytes, {left} short",
                self.body_bytes
            ))),
            State::ChunkSize | State::ChunkData { .. } | State::ChunkEnd | State::Trailers => Err(http(format!(
                "the server closed the connection in the middle of a chunked body (after {} body bytes)",
                self.body_bytes
            ))),
        }
    }

    /// Counts (and, when asked, keeps) body bytes, within the limit.
    fn body_data(&mut self, data: &[u8]) -> Result<(), ResponseError> {
        let total = self.body_bytes + data.len() as u64;
        if total > self.limit_bytes {
            return Err(self.over_limit(total));
        }
        self.body_bytes = total;
        if self.keep_body {
            self.body.extend_from_slice(data);
        }
        Ok(())
    }

    fn over_limit(&self, bytes: u64) -> ResponseError {
        ResponseError {
            kind: "body",
            message: format!("a response body over the limit of {} bytes ({bytes} bytes or more)", self.limit_bytes),
        }
    }

    /// Adds the bytes of `rest` up to its first LF to the buffer: `Some(bytes used)` when the line
    /// is complete, `None` when all of `rest` was taken and the line goes on.
    fn line(&mut self, rest: &[u8], max: usize, what: &str) -> Result<Option<usize>, ResponseError> {
        let (take, complete) = match rest.iter().position(|&b| b == b'\n') {
            Some(j) => (j + 1, true),
            None => (rest.len(), false),
        };
        if self.buf.len() + take > max {
            return Err(http(format!("a {what} over {max} bytes")));
        }
        self.buf.extend_from_slice(&rest[..take]);
        Ok(complete.then_some(take))
    }

    /// Parses the buffered head: `Some(its length)` when complete (the state then says how the
    /// body is framed), `None` when more is needed.
    fn head(&mut self) -> Result<Option<usize>, ResponseError> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let n = match resp.parse(&self.buf) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => {
                return Err(http(format!("a response head with more than {MAX_HEADERS} headers")))
            }
            Err(e) => {
                return Err(http(format!(
                    "not an HTTP/1.x response ({e}): it starts with {:?}",
                    shown(&self.buf[..self.buf.len().min(40)])
                )))
            }
        };
        let status = resp.code.unwrap_or(0);
        let values = |name: &str| -> Vec<String> {
            resp.headers
                .iter()
                .filter(|h| h.name.eq_ignore_ascii_case(name))
                .flat_map(|h| {
                    String::from_utf8_lossy(h.value)
                        .split(',')
                        .map(|v| v.trim().to_ascii_lowercase())
                        .collect::<Vec<_>>()
                })
                .filter(|v| !v.is_empty())
                .collect()
        };
        if (100..200).contains(&status) {
            if status == 101 {
                return Err(http("101 Switching Protocols: pqtls load did not ask for an upgrade"));
            }
            // Interim: the final response follows.
            return Ok(Some(n));
        }
        let http10 = resp.version == Some(0);
        let connection = values("connection");
        self.closes = if http10 {
            !connection.iter().any(|v| v == "keep-alive")
        } else {
            connection.iter().any(|v| v == "close")
        };
        let codings = values("transfer-encoding");
        let has_te = resp.headers.iter().any(|h| h.name.eq_ignore_ascii_case("transfer-encoding"));
        let lengths: Vec<String> = values("content-length");
        let has_cl = resp.headers.iter().any(|h| h.name.eq_ignore_ascii_case("content-length"));
        let framing = if self.head_request || status == 204 || status == 304 {
            Framing::Empty
        } else if has_te {
            if has_cl {
                return Err(http(
                    "a response with both Transfer-Encoding and Content-Length (RFC 9112 §6.3: a possible \
                     smuggling attempt; refused)",
                ));
            }
            if http10 {
                return Err(http("an HTTP/1.0 response with Transfer-Encoding (RFC 9112 §6.1: faulty framing)"));
            }
            match codings.iter().position(|c| c == "chunked") {
                Some(p) if p + 1 == codings.len() => Framing::Chunked,
                Some(_) => {
                    return Err(http(format!(
                        "Transfer-Encoding {}: chunked must be the last coding",
                        codings.join(", ")
                    )))
                }
                None => Framing::Close,
            }
        } else if has_cl {
            let mut it = lengths.iter();
            let first = it.next().ok_or_else(|| http("an empty Content-Length"))?;
            if it.any(|v| v != first) {
                return Err(http(format!("Content-Length values disagree: {}", lengths.join(", "))));
            }
            if first.is_empty() || !first.bytes().all(|b| b.is_ascii_digit()) {
                return Err(http(format!("Content-Length {first:?} is not a number")));
            }
            Framing::Length(first.parse::<u64>().map_err(|_| http(format!("Content-Length {first} is too large")))?)
        } else {
            Framing::Close
        };
        self.status = Some(status);
        self.framing = Some(framing);
        self.state = match framing {
            Framing::Empty | Framing::Length(0) => State::Done,
            Framing::Length(n) if n > self.limit_bytes => {
                return Err(ResponseError {
                    kind: "body",
                    message: format!(
                        "a response body over the limit of {} bytes (Content-Length {n})",
                        self.limit_bytes
                    ),
                })
            }
            Framing::Length(n) => State::Length { left: n },
            Framing::Chunked => State::ChunkSize,
            Framing::Close => {
                self.closes = true;
                State::Close
            }
        };
        Ok(Some(n))
    }
}

/// Bytes as text for a message (at most 40).
fn shown(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[..b.len().min(40)]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` in two pieces split at `at`; then the close, if `close`.
    fn read_split(r: &mut ResponseReader, input: &[u8], at: usize, close: bool) -> Result<Progress, ResponseError> {
        match r.feed(&input[..at])? {
            Progress::Done { status, extra } => return Ok(Progress::Done { status, extra: extra + input.len() - at }),
            Progress::More => {}
        }
        match r.feed(&input[at..])? {
            Progress::More if close => r.eof(),
            p => Ok(p),
        }
    }

    const CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nServer: x\r\n\r\n\
        5;name=value;q=\"a;b\"\r\nhello\r\n1A \t; ext\r\nabcdefghijklmnopqrstuvwxyz\r\n\
        0;last\r\nX-Trailer: 1\r\nOther: two\r\n\r\n";

    #[test]
    fn a_chunked_body_with_extensions_and_trailers_reads_the_same_at_every_split_point() {
        for at in 0..=CHUNKED.len() {
            let mut r = ResponseReader::new(1 << 20).keeping_body();
            let p = read_split(&mut r, CHUNKED, at, false).unwrap_or_else(|e| panic!("split at {at}: {e:?}"));
            assert_eq!(p, Progress::Done { status: 200, extra: 0 }, "split at {at}");
            assert_eq!(r.body(), b"helloabcdefghijklmnopqrstuvwxyz", "split at {at}");
            assert_eq!((r.body_bytes(), r.framing(), r.closes()), (31, Some(Framing::Chunked), false));
        }
        // Byte by byte too.
        let mut r = ResponseReader::new(1 << 20);
        for (k, b) in CHUNKED.iter().enumerate() {
            let p = r.feed(std::slice::from_ref(b)).unwrap();
            assert_eq!(p == Progress::More, k + 1 < CHUNKED.len(), "byte {k}");
        }
        // What follows the response is extra.
        let mut with_more = CHUNKED.to_vec();
        with_more.extend_from_slice(b"HTTP/1.1");
        assert_eq!(ResponseReader::new(1 << 20).feed(&with_more).unwrap(), Progress::Done { status: 200, extra: 8 });
    }

    #[test]
    fn bad_chunks_are_errors_naming_them() {
        let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        for (body, says) in [
            ("zz\r\nab\r\n0\r\n\r\n", "bad chunk size"),
            ("\r\nab\r\n0\r\n\r\n", "bad chunk size"),
            ("-1\r\n", "bad chunk size"),
            ("1ffffffffffffffff\r\n", "bad chunk size"),
            ("3\r\nabcd\r\n0\r\n\r\n", "not followed by CRLF"),
            ("2\r\nab\r\n0\r\nno colon here\r\n\r\n", "bad trailer"),
        ] {
            let input = format!("{head}{body}");
            for at in 0..=input.len() {
                let e = read_split(&mut ResponseReader::new(1 << 20), input.as_bytes(), at, true).unwrap_err();
                assert_eq!(e.kind, "http", "{body:?} at {at}");
                assert!(e.message.contains(says), "{body:?} at {at}: {e:?}");
            }
        }
        let long = format!("{head}1;{}\r\n", "x".repeat(MAX_CHUNK_LINE_BYTES));
        let e = ResponseReader::new(1 << 20).feed(long.as_bytes()).unwrap_err();
        assert!(e.message.contains("chunk-size line over 4096 bytes"), "{e:?}");
        // Cut short.
        let e =
            read_split(&mut ResponseReader::new(1 << 20), format!("{head}5\r\nab").as_bytes(), 3, true).unwrap_err();
        assert!(e.message.contains("middle of a chunked body (after 2 body bytes)"), "{e:?}");
    }

    #[test]
    fn close_delimited_bodies_end_at_the_close() {
        let input = b"HTTP/1.0 200 ok\r\nContent-type: text/html\r\n\r\n<HTML><BODY>s_server -www</BODY></HTML>\r\n";
        for at in 0..=input.len() {
            let mut r = ResponseReader::new(1 << 20).keeping_body();
            assert_eq!(read_split(&mut r, input, at, true).unwrap(), Progress::Done { status: 200, extra: 0 });
            assert!(r.body().starts_with(b"<HTML>") && r.closes() && r.framing() == Some(Framing::Close));
        }
        // HTTP/1.1 without a length, and a Transfer-Encoding without chunked last: to the close.
        for head in ["HTTP/1.1 200 OK\r\n\r\n", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"] {
            let mut r = ResponseReader::new(100);
            assert_eq!(r.feed(format!("{head}abc").as_bytes()).unwrap(), Progress::More);
            assert_eq!(r.eof().unwrap(), Progress::Done { status: 200, extra: 0 });
            assert_eq!(r.body_bytes(), 3);
        }
    }

    #[test]
    fn responses_without_a_body_are_done_at_their_head() {
        for status in ["204 No Content", "304 Not Modified"] {
            let mut r = ResponseReader::new(10);
            let input = format!("HTTP/1.1 {status}\r\nContent-Length: 99\r\n\r\nHTTP");
            let code: u16 = status[..3].parse().unwrap();
            assert_eq!(r.feed(input.as_bytes()).unwrap(), Progress::Done { status: code, extra: 4 });
        }
        let mut r = ResponseReader::new(10).for_head_request();
        assert_eq!(
            r.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n").unwrap(),
            Progress::Done { status: 200, extra: 0 }
        );
        // Interim responses are skipped, whatever the split.
        let input = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        for at in 0..=input.len() {
            let mut r = ResponseReader::new(10);
            assert_eq!(read_split(&mut r, input, at, false).unwrap(), Progress::Done { status: 200, extra: 0 }, "{at}");
        }
        assert!(ResponseReader::new(10).feed(b"HTTP/1.1 101 Switching Protocols\r\n\r\n").is_err());
    }

    #[test]
    fn content_length_is_read_to_its_length_and_checked() {
        let input = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\nConnection: close\r\n\r\nabcdeXY";
        for at in 0..=input.len() {
            let mut r = ResponseReader::new(10);
            assert_eq!(read_split(&mut r, input, at, false).unwrap(), Progress::Done { status: 200, extra: 2 });
            assert!(r.closes() && r.body_bytes() == 5);
        }
        let mut r = ResponseReader::new(100);
        r.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten..").unwrap();
        assert!(r.eof().unwrap_err().message.contains("after 10 body bytes, 90 short"));
        for (head, says) in [
            ("Content-Length: 5\r\nContent-Length: 6", "disagree"),
            ("Content-Length: 5, 6", "disagree"),
            ("Content-Length: -5", "not a number"),
            ("Content-Length: 0x10", "not a number"),
            ("Content-Length: 99999999999999999999999", "too large"),
            ("Content-Length: 5\r\nTransfer-Encoding: chunked", "both Transfer-Encoding and Content-Length"),
            ("Transfer-Encoding: chunked, gzip", "chunked must be the last"),
        ] {
            let input = format!("HTTP/1.1 200 OK\r\n{head}\r\n\r\n");
            let e = ResponseReader::new(100).feed(input.as_bytes()).unwrap_err();
            assert!(e.kind == "http" && e.message.contains(says), "{head}: {e:?}");
        }
        let e = ResponseReader::new(100).feed(b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap_err();
        assert!(e.message.contains("HTTP/1.0"), "{e:?}");
        assert!(ResponseReader::new(100).feed(b"SSH-2.0-OpenSSH\r\n").unwrap_err().message.contains("not an HTTP/1.x"));
        let e = ResponseReader::new(100).feed(&[b'a'; MAX_HEAD_BYTES + 10]).unwrap_err();
        assert!(e.message.contains("not an HTTP/1.x") || e.message.contains("head over"), "{e:?}");
        let mut big = b"HTTP/1.1 200 OK\r\n".to_vec();
        while big.len() <= MAX_HEAD_BYTES {
            big.extend_from_slice(b"X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
        }
        let e = ResponseReader::new(100).feed(&big).unwrap_err();
        assert!(e.message.contains("head over") || e.message.contains("more than 64 headers"), "{e:?}");
    }

    #[test]
    fn a_body_over_the_limit_is_an_error_of_its_own_kind() {
        // Announced.
        let e = ResponseReader::new(1024).feed(b"HTTP/1.1 200 OK\r\nContent-Length: 1025\r\n\r\n").unwrap_err();
        assert_eq!(e.kind, "body");
        assert!(e.message.contains("limit of 1024 bytes"), "{e:?}");
        // Close-delimited: at the byte over.
        let mut r = ResponseReader::new(4);
        assert_eq!(r.feed(b"HTTP/1.1 200 OK\r\n\r\nabcd").unwrap(), Progress::More);
        assert_eq!(r.feed(b"e").unwrap_err().kind, "body");
        // Chunked: at the chunk that would go over, before its data.
        let mut r = ResponseReader::new(4);
        let e = r.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\n").unwrap_err();
        assert_eq!(e.kind, "body");
        // At the limit exactly: fine.
        let mut r = ResponseReader::new(4);
        let p =
            r.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n1\r\nd\r\n0\r\n\r\n").unwrap();
        assert_eq!(p, Progress::Done { status: 200, extra: 0 });
    }
}
