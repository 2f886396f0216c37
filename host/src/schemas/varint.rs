//! Base-128 varints, as Protobuf and Avro write integers: unsigned
//! (Protobuf's length prefixes) and zigzag-signed (Avro's `int` and
//! `long`, Confluent's message indexes). Least significant group first; a
//! set high bit means another byte follows.

use std::io::{ErrorKind, Read};

/// Why a varint could not be read.
#[derive(Debug)]
pub enum VarintError {
    /// The input ended inside the varint.
    Ended,
    /// More than ten bytes: not a 64-bit varint.
    Overlong,
    /// Reading failed.
    Io(std::io::Error),
}

/// Appends `value` as an unsigned varint.
pub fn write_unsigned(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Appends `value` zigzag-encoded (small magnitudes, either sign, in few
/// bytes).
pub fn write_signed(value: i64, out: &mut Vec<u8>) {
    write_unsigned(((value << 1) ^ (value >> 63)) as u64, out);
}

/// Reads an unsigned varint; `None` when the input ends before its first
/// byte.
pub fn read_unsigned(input: &mut impl Read) -> Result<Option<u64>, VarintError> {
    Ok(read_unsigned_sized(input)?.map(|(value, _)| value))
}

/// [`read_unsigned`], with the bytes the varint took.
pub fn read_unsigned_sized(input: &mut impl Read) -> Result<Option<(u64, u64)>, VarintError> {
    let mut value: u64 = 0;
    for (i, shift) in (0..64).step_by(7).enumerate() {
        let mut byte = [0u8];
        let read = loop {
            match input.read(&mut byte) {
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                read => break read.map_err(VarintError::Io)?,
            }
        };
        if read == 0 {
            return if i == 0 {
                Ok(None)
            } else {
                Err(VarintError::Ended)
            };
        }
        value |= u64::from(byte[0] & 0x7F) << shift;
        if byte[0] & 0x80 == 0 {
            return Ok(Some((value, i as u64 + 1)));
        }
    }
    Err(VarintError::Overlong)
}

/// Reads a zigzag-encoded varint; `None` when the input ends before its
/// first byte.
pub fn read_signed(input: &mut impl Read) -> Result<Option<i64>, VarintError> {
    let value = read_unsigned(input)?;
    Ok(value.map(|v| (v >> 1) as i64 ^ -((v & 1) as i64)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_read_back_and_say_where_they_break() {
        let values = [0i64, 1, -1, 63, -64, 64, 300, i64::MAX, i64::MIN];
        let mut out = Vec::new();
        for v in values {
            write_signed(v, &mut out);
            write_unsigned(v as u64, &mut out);
        }
        let mut input = &out[..];
        for v in values {
            assert_eq!(read_signed(&mut input).unwrap(), Some(v));
            assert_eq!(read_unsigned(&mut input).unwrap(), Some(v as u64));
        }
        assert!(read_unsigned(&mut input).unwrap().is_none());
        // Known encodings: 300 is [0xAC, 0x02]; zigzag -1 is 1.
        let mut out = Vec::new();
        write_unsigned(300, &mut out);
        write_signed(-1, &mut out);
        assert_eq!(out, [0xAC, 0x02, 0x01]);
        assert_eq!(read_unsigned_sized(&mut &out[..]).unwrap(), Some((300, 2)));
        // A padded varint is read whole.
        assert_eq!(
            read_unsigned_sized(&mut &[0x80u8, 0x00][..]).unwrap(),
            Some((0, 2))
        );
        let cut = [0x80u8];
        assert!(matches!(
            read_unsigned(&mut &cut[..]),
            Err(VarintError::Ended)
        ));
        let long = [0xFFu8; 11];
        assert!(matches!(
            read_unsigned(&mut &long[..]),
            Err(VarintError::Overlong)
        ));
    }
}
