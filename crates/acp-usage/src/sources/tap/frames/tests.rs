//! Tests of the WebSocket frame reader: masking, fragments, control frames, lengths, deflate.

use flate2::{Compress, Compression, FlushCompress};

use super::*;

/// One frame as a peer writes it.
pub(crate) fn frame(
    fin: bool,
    rsv1: bool,
    opcode: u8,
    payload: &[u8],
    mask: Option<[u8; 4]>,
) -> Vec<u8> {
    let mut out = vec![(u8::from(fin) << 7) | (u8::from(rsv1) << 6) | opcode];
    let mask_bit = if mask.is_some() { 0x80 } else { 0 };
    match payload.len() {
        n if n < 126 => out.push(mask_bit | n as u8),
        n if n <= 0xffff => {
            out.push(mask_bit | 126);
            out.extend((n as u16).to_be_bytes());
        }
        n => {
            out.push(mask_bit | 127);
            out.extend((n as u64).to_be_bytes());
        }
    }
    match mask {
        Some(key) => {
            out.extend(key);
            out.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
        }
        None => out.extend_from_slice(payload),
    }
    out
}

/// A message deflated as RFC 7692 says: sync flush, the trailing `00 00 ff ff` stripped.
pub(crate) fn deflate(compress: &mut Compress, plain: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(plain.len() + 64);
    compress.compress_vec(plain, &mut out, FlushCompress::Sync).unwrap();
    assert!(out.ends_with(&DEFLATE_TAIL));
    out.truncate(out.len() - 4);
    out
}

/// Feeds `bytes` in pieces of `step` bytes.
fn read_all(reader: &mut FrameReader, bytes: &[u8], step: usize) -> Vec<Message> {
    let mut out = Vec::new();
    for piece in bytes.chunks(step) {
        reader.push(piece, &mut out);
    }
    out
}

const KEY: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

#[test]
fn masked_and_unmasked_text_in_any_pieces() {
    let text = br#"{"type":"response.create","model":"gpt-5.2-codex"}"#;
    for step in [1, 3, 7, 1000] {
        let mut reader = FrameReader::new(false, false);
        let mut bytes = frame(true, false, 1, text, Some(KEY));
        bytes.extend(frame(true, false, 2, b"\x01\x02", None));
        let got = read_all(&mut reader, &bytes, step);
        assert_eq!(got, vec![Message::Text(text.to_vec()), Message::Binary(vec![1, 2])]);
    }
}

#[test]
fn fragments_with_control_frames_between_them() {
    let mut bytes = frame(false, false, 1, b"{\"type\":", Some(KEY));
    bytes.extend(frame(true, false, 9, b"ping", Some(KEY)));
    bytes.extend(frame(false, false, 0, b"\"response", Some([1, 2, 3, 4])));
    bytes.extend(frame(true, false, 10, b"", None));
    bytes.extend(frame(true, false, 0, b".create\"}", Some(KEY)));
    bytes.extend(frame(true, false, 8, &[0x03, 0xe8], Some(KEY)));
    for step in [1, 5, 64] {
        let got = read_all(&mut FrameReader::new(false, false), &bytes, step);
        assert_eq!(
            got,
            vec![Message::Text(br#"{"type":"response.create"}"#.to_vec()), Message::Close]
        );
    }
}

#[test]
fn sixteen_and_sixty_four_bit_lengths() {
    for len in [125, 126, 127, 65_535, 65_536, 200_000] {
        let payload: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
        let bytes = frame(true, false, 1, &payload, Some(KEY));
        let got = read_all(&mut FrameReader::new(false, false), &bytes, 4096);
        assert_eq!(got, vec![Message::Text(payload)], "{len}");
    }
}

#[test]
fn oversized_or_malformed_messages_break_the_reader() {
    let mut reader = FrameReader::with_max(false, false, 10);
    let mut out = Vec::new();
    reader.push(&frame(false, false, 1, b"0123456", None), &mut out);
    reader.push(&frame(true, false, 0, b"789ab", None), &mut out);
    assert!(reader.is_broken() && out.is_empty());

    let mut reader = FrameReader::new(false, false);
    reader.push(&frame(true, false, 0, b"stray", None), &mut out);
    assert!(reader.is_broken());
    // RSV1 without permessage-deflate.
    let mut reader = FrameReader::new(false, false);
    reader.push(&frame(true, true, 1, b"x", None), &mut out);
    assert!(reader.is_broken() && out.is_empty());
}

#[test]
fn deflate_with_context_takeover() {
    let messages: Vec<Vec<u8>> = (0..4)
        .map(|n| {
            format!(r#"{{"type":"response.output_text.delta","delta":"same words again {n}"}}"#)
        })
        .map(String::into_bytes)
        .collect();
    let mut compress = Compress::new(Compression::default(), false);
    let mut bytes = Vec::new();
    for (n, plain) in messages.iter().enumerate() {
        let deflated = deflate(&mut compress, plain);
        if n == 2 {
            // A fragmented deflated message: RSV1 on its first frame only.
            let (a, b) = deflated.split_at(deflated.len() / 2);
            bytes.extend(frame(false, true, 1, a, None));
            bytes.extend(frame(true, false, 9, b"", None));
            bytes.extend(frame(true, false, 0, b, None));
        } else {
            bytes.extend(frame(true, true, 1, &deflated, None));
        }
        // An uncompressed message in between, as a sender may send one.
        bytes.extend(frame(true, false, 1, b"{}", None));
    }
    for step in [1, 9, 4096] {
        let got = read_all(&mut FrameReader::new(true, false), &bytes, step);
        let want: Vec<Message> = messages
            .iter()
            .flat_map(|m| [Message::Text(m.clone()), Message::Text(b"{}".to_vec())])
            .collect();
        assert_eq!(got, want, "{step}");
    }
}

#[test]
fn deflate_without_context_takeover() {
    let plain = br#"{"type":"response.completed","response":{"usage":{"input_tokens":10}}}"#;
    let mut bytes = Vec::new();
    for _ in 0..3 {
        // The sender's compressor starts afresh for every message.
        let mut compress = Compress::new(Compression::default(), false);
        bytes.extend(frame(true, true, 1, &deflate(&mut compress, plain), Some(KEY)));
    }
    let got = read_all(&mut FrameReader::new(true, true), &bytes, 5);
    assert_eq!(
        got,
        vec![
            Message::Text(plain.to_vec()),
            Message::Text(plain.to_vec()),
            Message::Text(plain.to_vec())
        ]
    );
}

#[test]
fn a_message_inflating_past_the_cap_breaks_the_reader() {
    let plain = vec![b'a'; 100_000];
    let mut compress = Compress::new(Compression::default(), false);
    let mut reader = FrameReader::with_max(true, false, 50_000);
    let mut out = Vec::new();
    reader.push(&frame(true, true, 1, &deflate(&mut compress, &plain), None), &mut out);
    assert!(reader.is_broken() && out.is_empty());
}

#[test]
fn negotiated_extensions() {
    let none: [&str; 0] = [];
    assert_eq!(Deflate::negotiated(none.into_iter()), Ok(None));
    assert_eq!(
        Deflate::negotiated(["permessage-deflate; client_max_window_bits=15"].into_iter()),
        Ok(Some(Deflate::default()))
    );
    assert_eq!(
        Deflate::negotiated(
            ["permessage-deflate; server_no_context_takeover; client_no_context_takeover"]
                .into_iter()
        ),
        Ok(Some(Deflate { client_no_context_takeover: true, server_no_context_takeover: true }))
    );
    assert!(Deflate::negotiated(["x-webkit-deflate-frame"].into_iter()).is_err());
    assert!(Deflate::negotiated(["permessage-deflate, permessage-deflate"].into_iter()).is_err());
}
