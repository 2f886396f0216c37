use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
enum Kind {
    Open,
    Closed,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
struct Cents(i64);

/// Every kind of scalar field a flat struct may have, with serde's usual
/// attributes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Flat {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    a: Option<f64>,
    b: Option<i64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    done: bool,
    small: i8,
    count: u64,
    wide: u128,
    signed: i128,
    name: String,
    letter: char,
    kind: Kind,
    cents: Cents,
    #[serde(rename = "with space ü")]
    renamed: u16,
    nothing: (),
}

/// A small xorshift generator: the tests are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[(self.next() % from.len() as u64) as usize]
    }
}

fn random_flat(rng: &mut Rng) -> Flat {
    let floats = [
        0.0,
        -0.0,
        1.5,
        -2.25e-300,
        1e300,
        0.1,
        f64::MAX,
        f64::MIN_POSITIVE,
    ];
    let ints = [0, 1, -1, i64::MIN, i64::MAX, 42];
    let uints = [0, 1, u64::MAX, 7];
    let names = [
        "",
        "plain",
        "tab\tquote\"back\\slash",
        "ünïcødé ✓",
        "\u{1}\u{7f}",
    ];
    let x = rng.next();
    Flat {
        a: (x & 1 == 0).then(|| rng.pick(&floats)),
        b: (x & 2 == 0).then(|| rng.pick(&ints)),
        done: x & 4 == 0,
        small: rng.pick(&[i8::MIN, 0, i8::MAX]),
        count: rng.pick(&uints),
        wide: u128::from(rng.pick(&uints)),
        signed: i128::from(rng.pick(&ints)),
        name: rng.pick(&names).to_string(),
        letter: rng.pick(&['a', 'ß', '\u{10FFFF}']),
        kind: rng.pick(&[Kind::Open, Kind::Closed]),
        cents: Cents(rng.pick(&ints)),
        renamed: rng.pick(&[0, u16::MAX]),
        nothing: (),
    }
}

fn rows<V: Serialize + ?Sized>(v: &V) -> Vec<u8> {
    let mut out = Vec::new();
    write(v, Values::Rows, &mut out);
    out
}

/// The JSON text of a row value's row, as every reader of rows writes it.
fn row_json(value: &[u8]) -> Vec<u8> {
    let row = row_value(value).expect("a row value");
    let mut out = Vec::new();
    weir_flat::row::write_json(row, &mut out).expect("a well-formed row");
    out
}

#[test]
fn a_flat_struct_is_a_row_whose_json_is_its_json_and_decodes_to_itself() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..5000 {
        let v = random_flat(&mut rng);
        let bytes = rows(&v);
        assert_eq!(bytes[0], ROW_VALUE, "{v:?}");
        let json = serde_json::to_vec(&v).unwrap();
        assert_eq!(
            row_json(&bytes),
            json,
            "{v:?}: the row's JSON is serde_json's"
        );
        let back: Flat = decode("s", &bytes).unwrap();
        assert_eq!(back, v);
        // -0.0 == 0.0: compare the bits too.
        assert_eq!(back.a.map(f64::to_bits), v.a.map(f64::to_bits));
        let from_json: Flat = decode("s", &json).unwrap();
        assert_eq!(
            from_json, back,
            "the JSON text decodes to what the row does"
        );
        let mut plain = Vec::new();
        write(&v, Values::Json, &mut plain);
        assert_eq!(plain, json, "Values::Json writes serde_json's text");
    }
}

#[test]
fn floats_keep_their_bits_in_rows() {
    #[derive(Debug, Serialize, Deserialize)]
    struct F {
        x: f64,
        y: f32,
    }
    for x in [
        f64::NAN,
        -f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0,
        5e-324,
    ] {
        let bytes = rows(&F { x, y: x as f32 });
        let back: F = decode("s", &bytes).unwrap();
        assert_eq!(back.x.to_bits(), x.to_bits());
        assert_eq!(back.y.to_bits(), (x as f32).to_bits());
    }
    let back: F = decode("s", &rows(&F { x: 0.1, y: 0.1 })).unwrap();
    assert_eq!((back.x, back.y), (0.1, 0.1f32));
    // The same NaN as JSON is `null`, which no f64 reads.
    assert!(
        decode::<F>(
            "s",
            &serde_json::to_vec(&F {
                x: f64::NAN,
                y: 0.0
            })
            .unwrap()
        )
        .is_err()
    );
}

#[test]
fn maps_with_string_keys_are_rows_in_their_order() {
    let m: BTreeMap<String, Option<u32>> =
        [("b".to_string(), Some(2)), ("a".to_string(), None)].into();
    let bytes = rows(&m);
    assert_eq!(row_json(&bytes), br#"{"a":null,"b":2}"#);
    assert_eq!(
        decode::<BTreeMap<String, Option<u32>>>("m", &bytes).unwrap(),
        m
    );
    let h: HashMap<char, bool> = [('x', true)].into();
    assert_eq!(decode::<HashMap<char, bool>>("m", &rows(&h)).unwrap(), h);
    assert_eq!(rows(&Some(m.clone())), rows(&m), "Some of a map is the map");
}

#[test]
fn what_is_no_flat_row_is_written_as_its_json_text() {
    #[derive(Serialize)]
    struct Nested {
        inner: Cents,
        list: Vec<u8>,
    }
    #[derive(Serialize)]
    struct WithList {
        list: Vec<u8>,
    }
    #[derive(Serialize)]
    struct WithStruct {
        x: u8,
        inner: WithList,
    }
    #[derive(Serialize)]
    enum Data {
        Some(u8),
    }
    #[derive(Serialize)]
    struct WithData {
        d: Data,
    }
    #[derive(Serialize)]
    struct Big {
        n: u128,
    }
    #[derive(Serialize)]
    struct Unit;
    let long_name: BTreeMap<String, u8> = [("x".repeat(256), 1)].into();
    let int_keys: BTreeMap<u32, u8> = [(1, 1)].into();
    let cases: Vec<(&str, Box<dyn erased::Value>)> = vec![
        ("a u64", Box::new(7u64)),
        ("a string", Box::new("s")),
        ("a list", Box::new(vec![1, 2])),
        ("null", Box::new(None::<Flat>)),
        ("a unit struct", Box::new(Unit)),
        ("a list in a struct", Box::new(WithList { list: vec![1] })),
        (
            "a struct in a struct",
            Box::new(WithStruct {
                x: 1,
                inner: WithList { list: vec![] },
            }),
        ),
        (
            "a newtype struct in one, then a list",
            Box::new(Nested {
                inner: Cents(1),
                list: vec![],
            }),
        ),
        (
            "a variant with data",
            Box::new(WithData { d: Data::Some(1) }),
        ),
        ("an integer beyond 64 bits", Box::new(Big { n: u128::MAX })),
        ("a name over 255 bytes", Box::new(long_name)),
        ("integer map keys", Box::new(int_keys)),
    ];
    for (what, v) in cases {
        let mut out = b"before".to_vec();
        v.write_rows(&mut out);
        assert_eq!(&out[..6], b"before", "{what}: what was there stays");
        assert_eq!(out[6..], v.json(), "{what}: written as JSON text");
    }
    let mut ok = Vec::new();
    write(
        &Big {
            n: u128::from(u64::MAX),
        },
        Values::Rows,
        &mut ok,
    );
    assert_eq!(
        row_json(&ok),
        br#"{"n":18446744073709551615}"#,
        "a u128 that fits is a row"
    );
}

/// Object-safe serializing, for a list of values of different types.
mod erased {
    pub trait Value {
        fn write_rows(&self, out: &mut Vec<u8>);
        fn json(&self) -> Vec<u8>;
    }
    impl<T: serde::Serialize> Value for T {
        fn write_rows(&self, out: &mut Vec<u8>) {
            super::write(self, super::Values::Rows, out)
        }
        fn json(&self) -> Vec<u8> {
            serde_json::to_vec(self).unwrap()
        }
    }
}

#[test]
fn a_row_decodes_as_its_json_would() {
    #[derive(Debug, PartialEq, Deserialize)]
    struct P {
        a: Option<f64>,
        n: u8,
        #[serde(default)]
        s: String,
    }
    let row = |build: &dyn Fn(&mut weir_flat::row::RowWriter<'_>)| {
        let mut out = vec![ROW_VALUE];
        build(&mut weir_flat::row::RowWriter::new(&mut out));
        out
    };
    // Fields in any order, unknown ones skipped, integers and decimals as numbers.
    let v = row(&|r| {
        r.str("other", "x")
            .u64("n", 3)
            .decimal("a", "12.50")
            .null("more");
    });
    assert_eq!(
        decode::<P>("p", &v).unwrap(),
        P {
            a: Some(12.5),
            n: 3,
            s: String::new()
        }
    );
    let v = row(&|r| {
        r.i64("a", -2).decimal("n", "7");
    });
    assert_eq!(
        decode::<P>("p", &v).unwrap(),
        P {
            a: Some(-2.0),
            n: 7,
            s: String::new()
        }
    );
    assert_eq!(
        decode::<P>(
            "p",
            &row(&|r| {
                r.null("a").u64("n", 0);
            })
        )
        .unwrap()
        .a,
        None
    );
    #[derive(Debug, Deserialize)]
    struct Z {
        z: f64,
    }
    for text in [
        "-0",
        "0",
        "-1",
        "1e3",
        "18446744073709551616",
        "-9223372036854775809",
        "0.1",
    ] {
        let z: Z = decode(
            "z",
            &row(&|r| {
                r.decimal("z", text);
            }),
        )
        .unwrap();
        let json: Z = serde_json::from_str(&format!(r#"{{"z":{text}}}"#)).unwrap();
        assert_eq!(
            z.z.to_bits(),
            json.z.to_bits(),
            "{text} as serde_json reads it"
        );
    }
    // Errors say what serde says of the same JSON, named after the state.
    let cases: [(&str, Vec<u8>, &str); 5] = [
        (
            "a missing field",
            row(&|r| {
                r.f64("a", 1.0);
            }),
            "missing field `n`",
        ),
        (
            "out of range",
            row(&|r| {
                r.u64("n", 256);
            }),
            "invalid value: integer `256`",
        ),
        (
            "a wrong type",
            row(&|r| {
                r.str("n", "1");
            }),
            "invalid type: string \"1\"",
        ),
        (
            "a field twice",
            row(&|r| {
                r.u64("n", 1).u64("n", 2);
            }),
            "duplicate field `n`",
        ),
        ("malformed", vec![ROW_VALUE, 9, 1, b'n'], "a malformed row"),
    ];
    for (what, bytes, says) in cases {
        let err = decode::<P>("pending", &bytes).unwrap_err().to_string();
        assert!(
            err.contains("state `pending` holds a value that does not decode")
                && err.contains(says),
            "{what}: {err}"
        );
    }
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Strict {
        #[allow(dead_code)]
        n: u8,
    }
    let err = decode::<Strict>(
        "s",
        &row(&|r| {
            r.u64("n", 1).bool("x", true);
        }),
    )
    .unwrap_err();
    assert!(err.to_string().contains("unknown field `x`"), "{err}");
}

#[test]
fn json_values_decode_as_before() {
    let v: Flat = random_flat(&mut Rng(7));
    let json = serde_json::to_vec(&v).unwrap();
    assert_eq!(decode::<Flat>("s", &json).unwrap(), v);
    assert_eq!(decode::<u64>("s", b"12").unwrap(), 12);
    let err = decode::<u64>("count", b"{").unwrap_err();
    assert!(matches!(err, Error::IncompatibleState(_)), "{err:?}");
}
