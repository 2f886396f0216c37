//! Confluent's wire format: a message is the byte 0, the schema's id in
//! the registry (4 bytes, big-endian), then the datum.

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
}
