//! Confluent's wire format: a message is the byte 0, the schema's id in
//! the registry (4 bytes, big-endian), then the datum (for Protobuf, first
//! the path of the message type in the schema's file).

use super::varint::{self, VarintError};

/// Appends the header of a message of schema `id` to `out`.
pub fn frame(id: u32, out: &mut Vec<u8>) {
    out.push(0);
    out.extend_from_slice(&id.to_be_bytes());
}

/// The schema id and the datum of `message`; `Err` says why it is not in
/// the wire format.
pub fn split(message: &[u8]) -> Result<(u32, &[u8]), String> {
    match message {
        [0, a, b, c, d, datum @ ..] => Ok((u32::from_be_bytes([*a, *b, *c, *d]), datum)),
        [] => Err("an empty message, not in the schema registry's wire format".into()),
        [first, ..] if *first != 0 => Err(format!(
            "the first byte is {first}, not 0: not in the schema registry's wire format (was it written without the registry?)"
        )),
        _ => Err("shorter than the schema registry's 5-byte header".into()),
    }
}

/// Protobuf's part of the wire format, after the header: which message of
/// the schema's file the datum is, as a path of indexes (Confluent's
/// "message indexes": a count then each index, zigzag varints; `[0]`, the
/// file's first message, as the single byte 0). Returns the path and the
/// message's bytes.
pub fn split_indexes(datum: &[u8]) -> Result<(Vec<i32>, &[u8]), String> {
    let mut rest = datum;
    let count = read_zigzag(&mut rest)?;
    if count == 0 {
        return Ok((vec![0], rest));
    }
    if !(1..=64).contains(&count) {
        return Err(format!("a protobuf message path of {count} indexes"));
    }
    let mut indexes = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let index = read_zigzag(&mut rest)?;
        indexes.push(i32::try_from(index).map_err(|_| format!("a message index of {index}"))?);
    }
    Ok((indexes, rest))
}

/// Appends the message path `indexes` as [`split_indexes`] reads it.
pub fn write_indexes(indexes: &[i32], out: &mut Vec<u8>) {
    if indexes == [0] {
        out.push(0);
        return;
    }
    varint::write_signed(indexes.len() as i64, out);
    for &i in indexes {
        varint::write_signed(i64::from(i), out);
    }
}

fn read_zigzag(input: &mut &[u8]) -> Result<i64, String> {
    match varint::read_signed(input) {
        Ok(Some(value)) => Ok(value),
        Ok(None) | Err(VarintError::Ended) => Err("the protobuf message path ends early".into()),
        Err(_) => Err("a protobuf message path with an overlong varint".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_framed_datum_splits_back() {
        let mut message = Vec::new();
        frame(0x0102_0304, &mut message);
        message.extend_from_slice(b"datum");
        assert_eq!(message[..5], [0, 1, 2, 3, 4]);
        assert_eq!(split(&message), Ok((0x0102_0304, &b"datum"[..])));
        assert!(
            split(b"{\"a\":1}")
                .unwrap_err()
                .contains("the first byte is 123")
        );
        assert!(split(&[0, 1]).unwrap_err().contains("5-byte header"));
        assert!(split(b"").is_err());
    }

    #[test]
    fn message_paths_read_back_and_the_first_message_is_one_byte() {
        for indexes in [vec![0], vec![1], vec![0, 2], vec![3, 1, 70]] {
            let mut out = Vec::new();
            write_indexes(&indexes, &mut out);
            out.extend_from_slice(b"rest");
            assert_eq!(split_indexes(&out), Ok((indexes.clone(), &b"rest"[..])));
        }
        let mut out = Vec::new();
        write_indexes(&[0], &mut out);
        assert_eq!(out, [0]);
        // Confluent's clients: [1, 2] is the count 2 then 1 and 2, zigzag.
        let mut out = Vec::new();
        write_indexes(&[1, 2], &mut out);
        assert_eq!(out, [4, 2, 4]);
        assert!(split_indexes(&[0x80]).is_err());
    }
}
