//! What the kernel counts on a TCP socket (`TCP_INFO`): the one place pqtls reads it.

use std::os::fd::{AsFd, AsRawFd};

/// Segments carrying data that the socket has sent so far (`tcpi_data_segs_out`: no SYN, no
/// pure ACK, retransmissions included). Read when the peer's first bytes arrive, it is the
/// number of segments the first flight took (the ClientHello's, on a client).
pub fn data_segments_out(socket: &impl AsFd) -> std::io::Result<u64> {
    let mut info = std::mem::MaybeUninit::<libc::tcp_info>::zeroed();
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: FFI edge. `info` is a writable tcp_info of `len` bytes that outlives the call, and
    // the kernel writes at most `len` bytes into it (fewer on older kernels: the rest stays zero).
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::getsockopt(
            socket.as_fd().as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: zero-initialised, then (partly) written by the kernel: every field is a plain integer.
    #[allow(unsafe_code)]
    let info = unsafe { info.assume_init() };
    Ok(info.tcpi_data_segs_out as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn counts_the_data_segments_a_socket_sent() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        assert_eq!(data_segments_out(&client).unwrap(), 0, "nothing written yet");
        client.write_all(b"hello").unwrap();
        let mut buf = [0u8; 5];
        server.read_exact(&mut buf).unwrap();
        assert_eq!(data_segments_out(&client).unwrap(), 1);
    }
}
