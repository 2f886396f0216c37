//! Avro object container files, as Avro's specification lays them out: a
//! header (the magic `Obj\x01`, a metadata map holding `avro.schema` and
//! `avro.codec`, a 16-byte sync marker), then blocks (a record count, the
//! byte size of the datums, the datums compressed with the codec, the
//! marker). Files are written here; apache-avro's reader reads them.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io::Read;

use super::AvroSchema;
use crate::schemas::varint::{self, VarintError};

/// The first bytes of every container file.
const MAGIC: &[u8; 4] = b"Obj\x01";

/// How a file's blocks are compressed (`codec`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AvroCodec {
    /// Not compressed.
    #[default]
    Null,
    /// Deflate (RFC 1951), Avro's one required codec.
    Deflate,
    /// Snappy, each block followed by the CRC-32 of its datums.
    Snappy,
    /// Zstandard.
    Zstandard,
}

impl AvroCodec {
    /// The codec named `name` as the header writes it.
    pub fn parse(name: &str) -> Result<AvroCodec, String> {
        Ok(match name {
            "null" => AvroCodec::Null,
            "deflate" => AvroCodec::Deflate,
            "snappy" => AvroCodec::Snappy,
            "zstandard" => AvroCodec::Zstandard,
            _ => {
                return Err(format!(
                    "Avro codec {name:?}: write \"null\", \"deflate\", \"snappy\" or \"zstandard\""
                ));
            }
        })
    }

    /// Its name in a header.
    pub fn name(self) -> &'static str {
        match self {
            AvroCodec::Null => "null",
            AvroCodec::Deflate => "deflate",
            AvroCodec::Snappy => "snappy",
            AvroCodec::Zstandard => "zstandard",
        }
    }

    fn compress(self, datums: &mut Vec<u8>) -> Result<(), String> {
        let codec = match self {
            AvroCodec::Null => return Ok(()),
            AvroCodec::Deflate => apache_avro::Codec::Deflate(Default::default()),
            AvroCodec::Snappy => apache_avro::Codec::Snappy,
            AvroCodec::Zstandard => apache_avro::Codec::Zstandard(Default::default()),
        };
        codec
            .compress(datums)
            .map_err(|e| format!("compressing an Avro block with {}: {e}", self.name()))
    }
}

/// What a file's header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// `avro.schema`: the writer's schema, as written.
    pub schema: String,
    /// `avro.codec` (`null` when absent).
    pub codec: String,
    /// The marker after every block.
    pub marker: [u8; 16],
    /// The header's length in bytes: where the first block starts.
    pub len: u64,
}

/// What starts a block: its record count and the byte size of its
/// (compressed) datums, which the marker follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHead {
    /// Records in the block.
    pub count: u64,
    /// Bytes of its datums.
    pub size: u64,
}

/// Reads the start of the block at `input`'s position; `None` at the
/// file's end.
pub fn read_block_head(input: &mut impl Read) -> Result<Option<BlockHead>, String> {
    let count = match varint::read_signed(input) {
        Ok(None) => return Ok(None),
        Ok(Some(count)) => count,
        Err(_) => return Err("a block's record count is cut or overlong".into()),
    };
    let size = read_long(input)?;
    match (u64::try_from(count), u64::try_from(size)) {
        (Ok(count), Ok(size)) => Ok(Some(BlockHead { count, size })),
        _ => Err(format!("a block of {count} records in {size} bytes")),
    }
}

/// A reader that counts the bytes read through it.
struct Counted<R>(R, u64);

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.read(buf)?;
        self.1 += n as u64;
        Ok(n)
    }
}

/// A fresh sync marker: random, so that a block of another file is never
/// taken for one of this file.
pub fn new_marker() -> [u8; 16] {
    let half = |salt: u64| {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u64(salt);
        hasher.finish().to_le_bytes()
    };
    let mut marker = [0u8; 16];
    marker[..8].copy_from_slice(&half(std::process::id().into()));
    marker[8..].copy_from_slice(&half(1));
    marker
}

/// Appends the header of a file of records of `schema` in blocks
/// compressed with `codec`, marked with `marker`.
pub fn write_header(schema: &AvroSchema, codec: AvroCodec, marker: &[u8; 16], out: &mut Vec<u8>) {
    out.extend_from_slice(MAGIC);
    varint::write_signed(2, out);
    for (key, value) in [
        ("avro.schema", schema.text().as_bytes()),
        ("avro.codec", codec.name().as_bytes()),
    ] {
        write_bytes(key.as_bytes(), out);
        write_bytes(value, out);
    }
    varint::write_signed(0, out);
    out.extend_from_slice(marker);
}

/// Appends a block of `count` records whose datums are `datums` (emptied),
/// compressed with `codec` and ended by `marker`.
pub fn write_block(
    count: u64,
    datums: &mut Vec<u8>,
    codec: AvroCodec,
    marker: &[u8; 16],
    out: &mut Vec<u8>,
) -> Result<(), String> {
    codec.compress(datums)?;
    varint::write_signed(count as i64, out);
    write_bytes(datums, out);
    out.extend_from_slice(marker);
    datums.clear();
    Ok(())
}

/// Reads the header at the start of `input`; `Err` says why it is none.
pub fn read_header(input: &mut impl Read) -> Result<Header, String> {
    let mut counted = Counted(input, 0);
    let mut header = header_of(&mut counted)?;
    header.len = counted.1;
    Ok(header)
}

fn header_of(input: &mut impl Read) -> Result<Header, String> {
    let mut magic = [0u8; 4];
    input
        .read_exact(&mut magic)
        .map_err(|e| format!("no Avro header: {e}"))?;
    if &magic != MAGIC {
        return Err("not an Avro object container file (no `Obj\\x01` at its start)".into());
    }
    let (mut schema, mut codec) = (None, None);
    loop {
        let count = read_long(input)?;
        if count == 0 {
            break;
        }
        if count < 0 {
            read_long(input)?; // the block's size in bytes
        }
        for _ in 0..count.unsigned_abs() {
            let key = read_bytes(input)?;
            let value = read_bytes(input)?;
            let text = || String::from_utf8(value.clone()).map_err(|e| e.to_string());
            match &key[..] {
                b"avro.schema" => schema = Some(text()?),
                b"avro.codec" => codec = Some(text()?),
                _ => {}
            }
        }
    }
    let mut marker = [0u8; 16];
    input
        .read_exact(&mut marker)
        .map_err(|e| format!("the Avro header ends early: {e}"))?;
    Ok(Header {
        schema: schema.ok_or("the Avro header has no avro.schema")?,
        codec: codec.unwrap_or_else(|| "null".into()),
        marker,
        len: 0,
    })
}

fn write_bytes(bytes: &[u8], out: &mut Vec<u8>) {
    varint::write_signed(bytes.len() as i64, out);
    out.extend_from_slice(bytes);
}

fn read_long(input: &mut impl Read) -> Result<i64, String> {
    match varint::read_signed(input) {
        Ok(Some(value)) => Ok(value),
        Ok(None) | Err(VarintError::Ended) => Err("the Avro header ends early".into()),
        Err(VarintError::Overlong) => Err("the Avro header holds an overlong number".into()),
        Err(VarintError::Io(e)) => Err(format!("reading the Avro header: {e}")),
    }
}

fn read_bytes(input: &mut impl Read) -> Result<Vec<u8>, String> {
    let len = read_long(input)?;
    if !(0..=1 << 24).contains(&len) {
        return Err(format!("the Avro header holds a value of {len} bytes"));
    }
    let mut bytes = vec![0u8; len as usize];
    input
        .read_exact(&mut bytes)
        .map_err(|e| format!("the Avro header ends early: {e}"))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use apache_avro::types::Value as Avro;

    use super::*;
    use crate::schemas::avro::AvroWriter;

    const SCHEMA: &str = r#"{"type": "record", "name": "R", "fields": [
        {"name": "n", "type": "long"}, {"name": "s", "type": "string"}]}"#;

    /// A file written block by block with each codec reads back through
    /// apache-avro's reader, and its header through ours.
    #[test]
    fn files_written_here_read_back_with_every_codec() {
        let schema = AvroSchema::parse(SCHEMA).unwrap();
        let writer = AvroWriter::new(&schema).unwrap();
        for codec in ["null", "deflate", "snappy", "zstandard"] {
            let codec = AvroCodec::parse(codec).unwrap();
            let marker = new_marker();
            let mut file = Vec::new();
            write_header(&schema, codec, &marker, &mut file);
            let mut datums = Vec::new();
            for block in 0..3i64 {
                for n in 0..4 {
                    let json = format!(r#"{{"n":{},"s":"s{n}"}}"#, block * 4 + n);
                    writer.write(json.as_bytes(), &mut datums).unwrap();
                }
                write_block(4, &mut datums, codec, &marker, &mut file).unwrap();
            }
            let mut input = &file[..];
            let header = read_header(&mut input).unwrap();
            assert_eq!(header.schema, SCHEMA);
            assert_eq!(file.len() - input.len(), header.len as usize);
            for _ in 0..3 {
                let head = read_block_head(&mut input).unwrap().unwrap();
                assert_eq!(head.count, 4);
                input = &input[head.size as usize + 16..];
            }
            assert_eq!(read_block_head(&mut input).unwrap(), None);
            assert_eq!(header.codec, codec.name());
            assert_eq!(header.marker, marker);
            let reader = apache_avro::Reader::new(&file[..]).unwrap();
            let ns: Vec<i64> = reader
                .map(|v| match v.unwrap() {
                    Avro::Record(fields) => match fields[0].1 {
                        Avro::Long(n) => n,
                        _ => panic!(),
                    },
                    _ => panic!(),
                })
                .collect();
            assert_eq!(ns, (0..12).collect::<Vec<_>>(), "{codec:?}");
        }
        assert_ne!(new_marker(), new_marker());
        assert!(
            read_header(&mut &b"{\"n\":1}\n"[..])
                .unwrap_err()
                .contains("not an Avro")
        );
        assert!(AvroCodec::parse("lz4").unwrap_err().contains("\"deflate\""));
    }
}
