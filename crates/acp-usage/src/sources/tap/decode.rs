//! Decoding of a compressed response body, for the copy the tap reads (never for the bytes the
//! agent gets, which pass as the upstream sent them).
//!
//! gzip, deflate and brotli decode as the chunks arrive (flate2's and brotli's write-side
//! decoders); zstd is kept and decoded when the body ends (ruzstd decodes from a reader, and
//! compressed SSE is rare). An encoding the tap cannot decode, or a corrupt body, stops the copy:
//! the call is then reported from whatever was read before.

use std::io::Write;

/// The most compressed bytes kept for a body decoded at its end.
const MAX_HELD: usize = 32 << 20;

/// A body's decoder, chosen from its `content-encoding`.
pub enum Decoder {
    /// Not compressed.
    Identity,
    Gzip(flate2::write::GzDecoder<Vec<u8>>),
    Deflate(flate2::write::ZlibDecoder<Vec<u8>>),
    Brotli(Box<brotli_decompressor::DecompressorWriter<Vec<u8>>>),
    /// zstd: compressed bytes kept until the end.
    Zstd(Vec<u8>),
    /// Unknown encoding, or the body did not decode: nothing more is read.
    Broken,
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            Decoder::Identity => "identity",
            Decoder::Gzip(_) => "gzip",
            Decoder::Deflate(_) => "deflate",
            Decoder::Brotli(_) => "br",
            Decoder::Zstd(_) => "zstd",
            Decoder::Broken => "broken",
        };
        f.write_str(name)
    }
}

impl Decoder {
    /// The decoder for a `content-encoding` header value (`None`: not compressed).
    pub fn for_encoding(encoding: Option<&str>) -> Decoder {
        let Some(enc) = encoding.map(|e| e.trim().to_ascii_lowercase()) else {
            return Decoder::Identity;
        };
        match enc.as_str() {
            "" | "identity" => Decoder::Identity,
            "gzip" | "x-gzip" => Decoder::Gzip(flate2::write::GzDecoder::new(Vec::new())),
            "deflate" => Decoder::Deflate(flate2::write::ZlibDecoder::new(Vec::new())),
            "br" => Decoder::Brotli(Box::new(brotli_decompressor::DecompressorWriter::new(
                Vec::new(),
                4096,
            ))),
            "zstd" => Decoder::Zstd(Vec::new()),
            other => {
                tracing::debug!(encoding = other, "tap: a response encoding it cannot read");
                Decoder::Broken
            }
        }
    }

    /// Decodes `chunk`; returns the bytes decoded so far that were not returned before.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        let result = match self {
            Decoder::Identity => return chunk.to_vec(),
            Decoder::Broken => return Vec::new(),
            Decoder::Gzip(d) => d.write_all(chunk).map(|()| std::mem::take(d.get_mut())),
            Decoder::Deflate(d) => d.write_all(chunk).map(|()| std::mem::take(d.get_mut())),
            Decoder::Brotli(d) => d.write_all(chunk).map(|()| std::mem::take(d.get_mut())),
            Decoder::Zstd(held) => {
                if held.len() + chunk.len() > MAX_HELD {
                    *self = Decoder::Broken;
                    return Vec::new();
                }
                held.extend_from_slice(chunk);
                return Vec::new();
            }
        };
        result.unwrap_or_else(|_| {
            *self = Decoder::Broken;
            Vec::new()
        })
    }

    /// The body ended: whatever is left to decode.
    pub fn finish(&mut self) -> Vec<u8> {
        match std::mem::replace(self, Decoder::Broken) {
            Decoder::Gzip(d) => d.finish().unwrap_or_default(),
            Decoder::Deflate(d) => d.finish().unwrap_or_default(),
            Decoder::Brotli(mut d) => {
                let _ = d.flush();
                std::mem::take(d.get_mut())
            }
            Decoder::Zstd(held) => {
                let mut out = Vec::new();
                let mut source = held.as_slice();
                match ruzstd::decoding::StreamingDecoder::new(&mut source) {
                    Ok(mut dec) => {
                        let _ = std::io::Read::read_to_end(&mut dec, &mut out);
                        out
                    }
                    Err(_) => Vec::new(),
                }
            }
            Decoder::Identity | Decoder::Broken => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(encoding: &str, compressed: &[u8], plain: &[u8]) {
        // Fed in small chunks, the decoded copy is the plain body.
        let mut d = Decoder::for_encoding(Some(encoding));
        let mut out = Vec::new();
        for chunk in compressed.chunks(7) {
            out.extend(d.push(chunk));
        }
        out.extend(d.finish());
        assert_eq!(out, plain, "{encoding}");
    }

    #[test]
    fn gzip_deflate_and_identity_decode_in_chunks() {
        let plain = b"event: message_delta\ndata: {\"usage\":{\"output_tokens\":7}}\n\n".repeat(50);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&plain).unwrap();
        roundtrip("gzip", &gz.finish().unwrap(), &plain);
        let mut zl = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        zl.write_all(&plain).unwrap();
        roundtrip("deflate", &zl.finish().unwrap(), &plain);
        roundtrip("identity", &plain, &plain);
    }

    #[test]
    fn unknown_or_corrupt_encodings_stop_the_copy() {
        let mut d = Decoder::for_encoding(Some("compress"));
        assert!(d.push(b"anything").is_empty());
        let mut d = Decoder::for_encoding(Some("gzip"));
        assert!(d.push(b"this is not gzip at all").is_empty());
        assert!(matches!(d, Decoder::Broken));
    }
}
