use super::*;

const ORDER: &str = r#"{
  "type": "record", "name": "Order", "namespace": "shop",
  "fields": [
    {"name": "id", "type": "long"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
    {"name": "rate", "type": {"type": "fixed", "name": "Rate", "size": 8, "logicalType": "decimal", "precision": 10, "scale": 4}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "seen", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "opens", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID"]}},
    {"name": "note", "type": ["null", "string"], "default": null},
    {"name": "tags", "type": {"type": "map", "values": "int"}},
    {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line",
        "fields": [{"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}},
    {"name": "raw", "type": "bytes"},
    {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "score", "type": "double"},
    {"name": "first", "type": ["null", "Line"]}
  ]
}"#;

const ORDER_JSON: &str = r#"{"id":7,"amount":-1234.50,"rate":0.0125,"at":"2024-01-31T12:00:00.250Z","seen":"2024-01-31T12:00:00.250123Z","day":"2024-02-29","opens":"09:30:00.000","state":"PAID","note":"fragile","tags":{"a":1,"b":2},"lines":[{"sku":"x","qty":2}],"raw":"AAH/","ref":"67e55044-10b1-426f-9247-bb680e5fe0c8","score":"NaN","first":{"sku":"x","qty":2}}"#;

/// The datum of JSON record `json` in `schema`.
fn datum_of(schema: &AvroSchema, json: &str) -> Vec<u8> {
    let mut datum = Vec::new();
    AvroWriter::new(schema)
        .unwrap()
        .write(json.as_bytes(), &mut datum)
        .unwrap();
    datum
}

fn round_trip(schema: &str, json: &str) -> String {
    let schema = AvroSchema::parse(schema).unwrap();
    let datum = datum_of(&schema, json);
    let mut out = Vec::new();
    AvroReader::new(&schema, None)
        .unwrap()
        .read(&datum, &mut out)
        .unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn every_type_round_trips_through_json_with_its_own_digits() {
    assert_eq!(round_trip(ORDER, ORDER_JSON), ORDER_JSON);
    let schema = AvroSchema::parse(ORDER).unwrap();
    assert_eq!(schema.full_name().as_deref(), Some("shop.Order"));
    // A union's null, a missing field with a default, times as integers.
    let sparse = ORDER_JSON
        .replace(r#""note":"fragile","#, "")
        .replace(r#""first":{"sku":"x","qty":2}"#, r#""first":null"#)
        .replace(
            r#""at":"2024-01-31T12:00:00.250Z""#,
            r#""at":1706702400250"#,
        );
    let back = round_trip(ORDER, &sparse);
    assert!(back.contains(r#""note":null"#), "{back}");
    assert!(back.contains(r#""first":null"#), "{back}");
    assert!(
        back.contains(r#""at":"2024-01-31T12:00:00.250Z""#),
        "{back}"
    );
}

#[test]
fn a_datum_of_an_older_schema_reads_with_the_new_fields_defaults() {
    let v1 = r#"{"type":"record","name":"P","fields":[{"name":"id","type":"long"}]}"#;
    let v2 = r#"{"type":"record","name":"P","fields":[{"name":"id","type":"long"},
        {"name":"note","type":"string","default":"none"},{"name":"n","type":"int","default":3}]}"#;
    let (v1, v2) = (
        AvroSchema::parse(v1).unwrap(),
        AvroSchema::parse(v2).unwrap(),
    );
    let mut datum = Vec::new();
    AvroWriter::new(&v1)
        .unwrap()
        .write(br#"{"id":5}"#, &mut datum)
        .unwrap();
    let mut out = Vec::new();
    AvroReader::new(&v1, Some(&v2))
        .unwrap()
        .read(&datum, &mut out)
        .unwrap();
    // A decimal written in the fewest bytes (as Java and fastavro write
    // it) resolves too.
    let with_amount = |extra: &str| {
        let text = format!(
            r#"{{"type":"record","name":"Q","fields":[{{"name":"amount","type":{{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}}}}{extra}]}}"#
        );
        AvroSchema::parse(&text).unwrap()
    };
    let (q1, q2) = (
        with_amount(""),
        with_amount(r#",{"name":"n","type":"int","default":1}"#),
    );
    let mut small = Vec::new();
    AvroWriter::new(&q1)
        .unwrap()
        .write(br#"{"amount":-0.05}"#, &mut small)
        .unwrap();
    assert_eq!(small, [2, 0xFB], "one byte of value");
    let mut got = Vec::new();
    AvroReader::new(&q1, Some(&q2))
        .unwrap()
        .read(&small, &mut got)
        .unwrap();
    assert_eq!(
        std::str::from_utf8(&got).unwrap(),
        r#"{"amount":-0.05,"n":1}"#
    );
    assert_eq!(
        std::str::from_utf8(&out).unwrap(),
        r#"{"id":5,"note":"none","n":3}"#
    );
    let string_id = r#"{"type":"record","name":"P","fields":[{"name":"id","type":"string"}]}"#;
    let string_id = AvroSchema::parse(string_id).unwrap();
    let mut out = Vec::new();
    let err = AvroReader::new(&v1, Some(&string_id))
        .and_then(|r| r.read(&datum, &mut out))
        .unwrap_err();
    assert!(!err.is_empty() && out.is_empty(), "{err}");
}

#[test]
fn records_that_do_not_fit_the_schema_say_which_field_and_why() {
    let schema = AvroSchema::parse(ORDER).unwrap();
    let writer = AvroWriter::new(&schema).unwrap();
    for (change, want) in [
        (
            (r#""id":7"#, r#""id":"7""#),
            "field `id`: a 64-bit integer (long), not \"7\"",
        ),
        (
            (r#""amount":-1234.50"#, r#""amount":1.234"#),
            "field `amount`: a decimal number with at most 2 fraction digits, not 1.234",
        ),
        (
            (r#""state":"PAID""#, r#""state":"LOST""#),
            "field `state`: a symbol of enum shop.State (NEW, PAID), not \"LOST\"",
        ),
        (
            (r#""qty":2}]"#, r#""qty":2.5}]"#),
            "field `lines[0].qty`: a 32-bit integer (int), not 2.5",
        ),
        (
            (r#""id":7,"#, r#""id":7,"op":"delete","#),
            "field `op` is not in record shop.Order of the schema",
        ),
        (
            (r#""id":7,"#, ""),
            "no field `id`, which record shop.Order needs",
        ),
    ] {
        let json = ORDER_JSON.replace(change.0, change.1);
        assert_ne!(json, ORDER_JSON, "{change:?}");
        let err = writer.write(json.as_bytes(), &mut Vec::new()).unwrap_err();
        assert!(err.contains(want), "{err}");
    }
    let reader = AvroReader::new(&schema, None).unwrap();
    let err = reader.read(b"\x02", &mut Vec::new()).unwrap_err();
    assert!(err.starts_with("not an Avro datum of its schema"), "{err}");
}

#[test]
fn decimals_scale_exactly() {
    for (text, scale, want) in [
        ("12.5", 2, Some("1250")),
        ("-0.05", 2, Some("-5")),
        ("1e2", 2, Some("10000")),
        ("1.50e-1", 2, Some("15")),
        ("0", 3, Some("0")),
        ("1.234", 2, None),
        ("abc", 2, None),
        (
            "123456789012345678901234567890.01",
            2,
            Some("12345678901234567890123456789001"),
        ),
    ] {
        assert_eq!(from_json::unscaled(text, scale).as_deref(), want, "{text}");
    }
    assert_eq!(to_json::scaled("-5", 2), "-0.05");
    assert_eq!(to_json::scaled("1250", 2), "12.50");
    assert_eq!(to_json::scaled("7", 0), "7");
}

/// A flat record of every scalar type (and unions of them, named types,
/// values that need escapes, floats that are not finite, a resolved older
/// datum) reads as a row whose JSON is byte for byte the JSON `read`
/// gives; a record with a nested record, an array, a map or a duration,
/// or a name over 255 bytes, reads as that JSON.
#[test]
fn a_flat_record_reads_as_a_row_whose_json_is_its_json() {
    const FLAT: &str = r#"{
      "type": "record", "name": "Flat", "namespace": "shop",
      "fields": [
        {"name": "id", "type": "long"},
        {"name": "n", "type": "int"},
        {"name": "ok", "type": "boolean"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "rate", "type": {"type": "fixed", "name": "Rate", "size": 8, "logicalType": "decimal", "precision": 10, "scale": 4}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "seen", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "opens", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "closes", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID"]}},
        {"name": "again", "type": "State"},
        {"name": "note", "type": ["null", "string"], "default": null},
        {"name": "raw", "type": "bytes"},
        {"name": "hash", "type": {"type": "fixed", "name": "H", "size": 2}},
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "score", "type": "double"},
        {"name": "ratio", "type": "float"},
        {"name": "nested", "type": ["null", "long"]}
      ]
    }"#;
    let schema = AvroSchema::parse(FLAT).unwrap();
    let reader = AvroReader::new(&schema, None).unwrap();
    let base = r#"{"id":-9007199254740993,"n":-7,"ok":true,"amount":-1234.50,"rate":0.0125,"at":"2024-01-31T12:00:00.250Z","seen":"2024-01-31T12:00:00.250123Z","local":"2024-01-31T12:00:00.250","day":"2024-02-29","opens":"09:30:00.000","closes":"23:59:59.999999","state":"PAID","again":"NEW","note":"a \"quoted\"\n\u0001 line é 😀","raw":"AAH/","hash":"AAE=","ref":"67e55044-10b1-426f-9247-bb680e5fe0c8","score":1e300,"ratio":0.1,"nested":5}"#;
    let variants = [
        base.to_owned(),
        base.replace(r#""score":1e300"#, r#""score":"NaN""#)
            .replace(r#""ratio":0.1"#, r#""ratio":"-Infinity""#),
        base.replace(
            r#""note":"a \"quoted\"\n\u0001 line é 😀""#,
            r#""note":null"#,
        )
        .replace(r#""nested":5"#, r#""nested":null"#),
        base.replace(r#""score":1e300"#, r#""score":-0.0"#)
            .replace(r#""amount":-1234.50"#, r#""amount":0.05"#),
    ];
    for json in &variants {
        let datum = datum_of(&schema, json);
        let mut want = Vec::new();
        reader.read(&datum, &mut want).unwrap();
        let mut row = Vec::new();
        assert_eq!(
            reader.read_row_or_json(&datum, &mut row).unwrap(),
            Written::Row
        );
        assert_eq!(
            crate::schemas::row_json(&row),
            String::from_utf8(want).unwrap(),
            "{json}"
        );
    }
    // Resolved from an older writer's schema: the row has the reader's
    // fields, defaults included.
    let v1 =
        AvroSchema::parse(r#"{"type":"record","name":"P","fields":[{"name":"id","type":"long"}]}"#)
            .unwrap();
    let v2 = AvroSchema::parse(r#"{"type":"record","name":"P","fields":[{"name":"id","type":"long"},{"name":"note","type":"string","default":"none"}]}"#).unwrap();
    let datum = datum_of(&v1, r#"{"id":5}"#);
    let mut row = Vec::new();
    let resolving = AvroReader::new(&v1, Some(&v2)).unwrap();
    assert_eq!(
        resolving.read_row_or_json(&datum, &mut row).unwrap(),
        Written::Row
    );
    assert_eq!(crate::schemas::row_json(&row), r#"{"id":5,"note":"none"}"#);
    // Not flat: the same JSON as `read`.
    let long_name = "x".repeat(256);
    let not_flat = [
        (ORDER.to_owned(), ORDER_JSON.to_owned()),
        (
            format!(r#"{{"type":"record","name":"L","fields":[{{"name":"{long_name}","type":"int"}}]}}"#),
            format!(r#"{{"{long_name}":1}}"#),
        ),
        (
            r#"{"type":"record","name":"D","fields":[{"name":"d","type":{"type":"fixed","name":"F","size":12,"logicalType":"duration"}}]}"#.to_owned(),
            r#"{"d":{"months":1,"days":2,"millis":3}}"#.to_owned(),
        ),
        (r#""long""#.to_owned(), "12".to_owned()),
    ];
    for (schema, json) in &not_flat {
        let schema = AvroSchema::parse(schema).unwrap();
        let datum = datum_of(&schema, json);
        let reader = AvroReader::new(&schema, None).unwrap();
        let mut out = Vec::new();
        assert_eq!(
            reader.read_row_or_json(&datum, &mut out).unwrap(),
            Written::Json
        );
        let mut want = Vec::new();
        reader.read(&datum, &mut want).unwrap();
        assert_eq!(out, want, "{json}");
    }
}
