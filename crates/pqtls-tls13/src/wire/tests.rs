use super::*;

/// A handshake message of type `code` with a body of `n` bytes of `n as u8`.
fn msg(code: u8, n: usize) -> Vec<u8> {
    encode_message(code, &vec![n as u8; n]).unwrap()
}

/// `data` behind its 16-bit length.
fn v16(data: &[u8]) -> Vec<u8> {
    [&(data.len() as u16).to_be_bytes()[..], data].concat()
}

/// A ClientHello body: random of `random`s, one suite, key shares of (group, bytes).
fn client_hello_body(random: u8, shares: &[(u16, usize)]) -> Vec<u8> {
    let entries: Vec<u8> =
        shares.iter().flat_map(|(g, n)| [&g.to_be_bytes()[..], &v16(&vec![0xab; *n])].concat()).collect();
    let extensions = [&[0, 43, 0, 3, 2, 3, 4][..], &KEY_SHARE.to_be_bytes(), &v16(&v16(&entries))].concat();
    [&[3, 3][..], &[random; 32], &[0], &v16(&[0x13, 0x01]), &[1, 0], &v16(&extensions)].concat()
}

/// A ServerHello body with `random` (HRR_RANDOM: a HelloRetryRequest, whose key share is
/// the group alone) choosing `suite` and a key share of `group`.
fn server_hello_body(random: [u8; 32], suite: u16, group: u16, share_bytes: usize) -> Vec<u8> {
    let share = if random == HRR_RANDOM { vec![] } else { v16(&vec![0xcd; share_bytes]) };
    let extensions = [&KEY_SHARE.to_be_bytes()[..], &v16(&[&group.to_be_bytes()[..], &share].concat())].concat();
    [&[3, 3][..], &random, &[2, 0xaa, 0xbb], &suite.to_be_bytes(), &[0], &v16(&extensions)].concat()
}

/// The handshake messages of a stream's handshake records, record by record: (type, bytes
/// with header), and the content types of the other records in the order they came.
fn reassemble(stream: &[u8]) -> (Vec<(HsType, usize)>, Vec<u8>) {
    let (mut hs, mut msgs, mut others) = (Reassembler::default(), Vec::new(), Vec::new());
    for r in Records::new(stream) {
        match r.content_type() {
            HANDSHAKE => msgs.extend(hs.push(r.payload()).map(|m| (m.kind(), m.len()))),
            other => others.push(other),
        }
    }
    (msgs, others)
}

#[test]
fn a_message_split_across_three_records_is_reassembled() {
    let cert = msg(11, 100);
    // The first record ends inside the message's header.
    let pieces = [&cert[..3], &cert[3..50], &cert[50..]];
    let mut hs = Reassembler::default();
    assert_eq!(hs.push(pieces[0]).count(), 0);
    assert_eq!(hs.pending(), 3);
    assert_eq!(hs.push(pieces[1]).count(), 0);
    assert_eq!(hs.pending(), 50);
    let done: Vec<Message> = hs.push(pieces[2]).collect();
    assert_eq!(done.len(), 1);
    assert_eq!(
        (done[0].kind(), done[0].code(), done[0].len(), done[0].body()),
        (HsType::Certificate, 11, 104, &[100; 100][..])
    );
    assert_eq!(hs.pending(), 0);
    let stream: Vec<u8> = pieces.iter().flat_map(|p| encode_records(HANDSHAKE, p)).collect();
    assert_eq!(handshake_messages(&stream), vec![(11, vec![100; 100])]);
    assert_eq!(reassemble(&stream), (vec![(HsType::Certificate, 104)], vec![]));
}

#[test]
fn two_messages_in_one_record_and_the_start_of_a_third() {
    let (ee, cert, cv) = (msg(8, 2), msg(11, 10), msg(15, 9));
    let first = [&ee[..], &cert, &cv[..2]].concat();
    let mut hs = Reassembler::default();
    let kinds: Vec<(HsType, usize)> = hs.push(&first).map(|m| (m.kind(), m.len())).collect();
    assert_eq!(kinds, vec![(HsType::EncryptedExtensions, 6), (HsType::Certificate, 14)]);
    assert_eq!(hs.pending(), 2);
    let kinds: Vec<(HsType, usize)> = hs.push(&cv[2..]).map(|m| (m.kind(), m.len())).collect();
    assert_eq!(kinds, vec![(HsType::CertificateVerify, 13)]);
    let stream = [encode_records(HANDSHAKE, &first), encode_records(HANDSHAKE, &cv[2..])].concat();
    assert_eq!(
        handshake_messages(&stream).iter().map(|(t, b)| (*t, b.len())).collect::<Vec<_>>(),
        [(8, 2), (11, 10), (15, 9)]
    );
}

#[test]
fn non_handshake_records_interleaved_are_passed_over_by_the_reassembly() {
    let ch = msg(1, 40);
    let stream = [
        encode_records(HANDSHAKE, &ch[..10]),
        encode_records(CHANGE_CIPHER_SPEC, &[1]),
        encode_records(HANDSHAKE, &ch[10..]),
        encode_records(ALERT, &[1, 0]),
        encode_records(APPLICATION_DATA, &[0; 30]),
        encode_records(HANDSHAKE, &msg(20, 32)),
    ]
    .concat();
    let (msgs, others) = reassemble(&stream);
    assert_eq!(msgs, vec![(HsType::ClientHello, 44), (HsType::Finished, 36)]);
    assert_eq!(others, vec![CHANGE_CIPHER_SPEC, ALERT, APPLICATION_DATA]);
    // The plaintext reader stops at the first record that is not a handshake record: the
    // ClientHello is begun but not whole there.
    assert_eq!(handshake_messages(&stream), vec![]);
    let clear = [
        encode_records(HANDSHAKE, &ch),
        encode_records(CHANGE_CIPHER_SPEC, &[1]),
        encode_records(HANDSHAKE, &msg(2, 3)),
    ]
    .concat();
    assert_eq!(handshake_messages(&clear), vec![(1, vec![40; 40])]);
}

#[test]
fn a_truncated_record_header_stops_the_split_and_says_so() {
    let stream = [encode_records(HANDSHAKE, &[1, 0, 0, 0]), vec![22, 3, 3]].concat();
    let mut split = Records::new(&stream);
    assert_eq!(split.by_ref().count(), 1);
    assert_eq!(split.consumed(), 9);
    let stop = split.stop().unwrap();
    assert_eq!(stop, &Stop::PartialHeader { offset: 9, have: 3 });
    assert!(stop.is_partial());
    assert_eq!(stop.to_string(), "3 bytes of a record header at the end of the stream");
    assert_eq!(Header::parse(&[22, 3, 3, 0]), None);
    // A handshake header cut short gives no message.
    assert_eq!(messages(&[20, 0, 0]).count(), 0);
    assert_eq!(messages(&[20, 0, 0]).rest(), &[20, 0, 0]);
}

#[test]
fn a_length_beyond_the_input_gives_nothing_and_is_said_cut_short() {
    // A record header announcing 300 bytes, 10 there.
    let stream = [&[23, 3, 3, 1, 44][..], &[0; 10]].concat();
    let mut split = Records::checked(&stream);
    assert_eq!(split.next(), None);
    assert_eq!(split.consumed(), 0);
    assert_eq!(split.stop(), Some(&Stop::PartialRecord { offset: 0, have: 15, need: 305 }));
    assert_eq!(split.stop().unwrap().to_string(), "the last record (offset 0) is cut short: 15 of 305 bytes");
    // A handshake message announcing 10 bytes, 3 there; one announcing 2^24 - 1.
    let mut m = messages(&[1, 0, 0, 10, 1, 2, 3]);
    assert_eq!(m.next(), None);
    assert_eq!(m.rest().len(), 7);
    let mut hs = Reassembler::default();
    assert_eq!(hs.push(&[11, 0xff, 0xff, 0xff, 0, 0]).count(), 0);
    assert_eq!(hs.pending(), 6);
    assert_eq!(handshake_messages(&encode_records(HANDSHAKE, &[11, 0xff, 0xff, 0xff, 0, 0])), vec![]);
}

/// Moved from pqtls-capture (its record split): the checked split stops at bytes that are
/// not TLS, before reading their length.
#[test]
fn records_stop_at_what_is_not_tls() {
    let mut s = encode_records(22, &[1, 0, 0, 0]);
    s.extend(encode_records(23, &[0; 20]));
    let mut split = Records::checked(&s);
    assert_eq!((split.by_ref().count(), split.stop()), (2, None));
    s.extend(b"GET / HTTP/1.1\r\n");
    let mut split = Records::checked(&s);
    assert_eq!(split.by_ref().count(), 2);
    let stop = split.stop().unwrap();
    assert_eq!(stop, &Stop::NotTls { offset: 34, header: *b"GET /" });
    assert!(!stop.is_partial());
    assert!(stop.to_string().contains("offset 34: not a TLS record (bytes [47, 45, 54, 20, 2f])"), "{stop}");
    // Unchecked, the same bytes are a record header announcing 0x202f bytes.
    let mut split = Records::new(&s);
    assert_eq!(split.by_ref().count(), 2);
    assert!(matches!(split.stop(), Some(Stop::PartialRecord { offset: 34, need: 8244, .. })));
    let mut split = Records::checked(&s[..20]);
    assert_eq!(split.by_ref().count(), 1);
    assert!(split.stop().unwrap().to_string().contains("cut short"));
    for bad in [[25, 3, 3, 0, 0], [19, 3, 3, 0, 0], [22, 4, 1, 0, 0], [23, 3, 3, 0x41, 0x01]] {
        assert!(!Header::parse(&bad).unwrap().is_tls(), "{bad:?}");
    }
    assert!(Header::parse(&[23, 3, 3, 0x41, 0x00]).unwrap().is_tls());
    assert!(looks_like_tls(&s) && !looks_like_tls(b"GET /") && !looks_like_tls(&[22, 3]));
}

#[test]
fn record_boundaries_are_followed_across_writes_of_any_size() {
    let stream = [
        encode_records(HANDSHAKE, &[0; 100]),
        encode_records(CHANGE_CIPHER_SPEC, &[1]),
        encode_records(APPLICATION_DATA, &[]),
        encode_records(APPLICATION_DATA, &[7; 3000]),
    ]
    .concat();
    let whole: Vec<Header> = Records::new(&stream).map(|r| r.header).collect();
    assert_eq!(whole.len(), 4);
    for size in [1, 2, 3, 4, 5, 6, 7, 64, stream.len()] {
        let mut b = Boundaries::default();
        let mut seen = Vec::new();
        for piece in stream.chunks(size) {
            b.feed(piece, |h| seen.push(h));
        }
        assert_eq!(seen, whole, "pieces of {size} bytes");
    }
}

#[test]
fn encoding_cuts_records_at_the_plaintext_limit() {
    let stream = encode_records(APPLICATION_DATA, &vec![1; MAX_PLAINTEXT_LEN + 1]);
    let lens: Vec<usize> = Records::checked(&stream).map(|r| r.payload().len()).collect();
    assert_eq!(lens, [MAX_PLAINTEXT_LEN, 1]);
    assert_eq!(encode_records(ALERT, &[]), [ALERT, 3, 3, 0, 0]);
    assert_eq!(encode_message(20, &[9; 3]), Some(vec![20, 0, 0, 3, 9, 9, 9]));
    assert_eq!(encode_message(4, &vec![0; 1 << 24]), None);
}

/// Moved from pqtls-core's trace module.
#[test]
fn hello_retry_request_is_told_apart_by_its_random() {
    let mut m = vec![2, 0, 0, 40, 3, 3];
    m.extend_from_slice(&HRR_RANDOM);
    assert_eq!(HsType::classify(&m), HsType::HelloRetryRequest);
    m[10] ^= 1;
    assert_eq!(HsType::classify(&m), HsType::ServerHello);
    assert_eq!(HsType::classify(&[]), HsType::Other(0));
    assert_eq!(HsType::classify(&m[..37]), HsType::ServerHello);
}

#[test]
fn every_type_has_one_name_that_reads_back() {
    for code in 0..=255u8 {
        let t = HsType::from_code(code);
        assert_eq!(HsType::from_slug(&t.slug()), Some(t), "{code}");
        assert!(!t.rfc_name().is_empty());
    }
    let hrr = HsType::HelloRetryRequest;
    assert_eq!((hrr.slug(), hrr.rfc_name()), ("hello_retry_request".to_string(), "HelloRetryRequest".to_string()));
    assert_eq!(HsType::from_slug("hello_retry_request"), Some(hrr));
    assert_eq!(
        (HsType::from_code(24).slug(), HsType::from_code(24).rfc_name()),
        ("key_update".into(), "KeyUpdate".into())
    );
    assert_eq!((HsType::Other(99).slug(), HsType::Other(99).rfc_name()), ("message_99".into(), "Message99".into()));
    assert_eq!(HsType::from_slug("write_finished"), None);
}

#[test]
fn hello_readers_read_what_was_built() {
    let ch = client_hello_body(7, &[(0x11ec, 1216), (0x001d, 32)]);
    assert_eq!(hello_random(&ch), Some([7; 32]));
    assert_eq!(client_key_shares(&ch), Some(vec![(0x11ec, 1216), (0x001d, 32)]));
    let exts: Vec<u16> = hello_extensions(&ch, true).unwrap().iter().map(|e| e.0).collect();
    assert_eq!(exts, [43, KEY_SHARE]);
    assert_eq!(client_key_shares(&client_hello_body(7, &[])), Some(vec![]));

    let sh = server_hello_body([9; 32], 0x1302, 0x11ec, 1120);
    assert_eq!((hello_random(&sh), server_hello_suite(&sh)), (Some([9; 32]), Some(0x1302)));
    assert_eq!(server_key_share(&sh), Some((0x11ec, 1120)));
    let hrr = server_hello_body(HRR_RANDOM, 0x1301, 0x001d, 0);
    assert_eq!((server_key_share(&hrr), server_hello_suite(&hrr)), (Some((0x001d, 0)), Some(0x1301)));
    assert_eq!(HsType::classify(&encode_message(2, &hrr).unwrap()), HsType::HelloRetryRequest);

    // Cut anywhere, a body reads as nothing rather than as something else.
    for cut in 0..sh.len() {
        assert_eq!(server_key_share(&sh[..cut]), None, "{cut}");
    }
    assert_eq!(server_hello_suite(&sh[..38]), None);
    assert_eq!(server_hello_suite(&sh[..39]), Some(0x1302));
    assert_eq!(hello_random(&sh[..33]), None);
}

/// Every prefix of a flight, and the flight with each byte changed: nothing panics, and
/// nothing read is longer than what was given.
#[test]
fn no_input_makes_the_codec_panic_or_read_past_it() {
    let ch = encode_message(1, &client_hello_body(1, &[(0x001d, 32)])).unwrap();
    let sh = encode_message(2, &server_hello_body([2; 32], 0x1301, 0x001d, 32)).unwrap();
    let flight = [
        encode_records(HANDSHAKE, &[&ch[..], &sh[..20]].concat()),
        encode_records(HANDSHAKE, &sh[20..]),
        encode_records(APPLICATION_DATA, &[3; 40]),
    ]
    .concat();
    let check = |input: &[u8]| {
        for mut split in [Records::new(input), Records::checked(input)] {
            let total: usize = split.by_ref().map(|r| r.bytes.len()).sum();
            assert_eq!(total, split.consumed());
            assert!(total <= input.len());
            assert_eq!(split.stop().is_none(), total == input.len());
        }
        let msgs = handshake_messages(input);
        assert!(msgs.iter().map(|(_, b)| b.len() + 4).sum::<usize>() <= input.len());
        for body in msgs.iter().map(|m| &m.1[..]).chain([input]) {
            let _ = (
                hello_random(body),
                server_hello_suite(body),
                hello_extensions(body, true),
                hello_extensions(body, false),
            );
            if let Some(shares) = client_key_shares(body) {
                assert!(shares.iter().map(|(_, l)| l + 4).sum::<usize>() <= body.len());
            }
            if let Some((_, l)) = server_key_share(body) {
                assert!(l <= body.len());
            }
        }
        let mut b = Boundaries::default();
        let mut headers = 0;
        b.feed(input, |_| headers += 1);
        assert!(headers * HEADER_LEN <= input.len());
    };
    for cut in 0..=flight.len() {
        check(&flight[..cut]);
    }
    for at in 0..flight.len() {
        for flip in [0x01, 0x80, 0xff] {
            let mut m = flight.clone();
            m[at] ^= flip;
            check(&m);
        }
    }
}
