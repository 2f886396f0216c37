//! Test fixture (flat state): calls `state` and `flat-state` as each input
//! record says, packing buffers by hand from the layout documented in
//! `wit/flat-state.wit` (not with the SDK's codec), so that the tests check
//! the documented format and that both interfaces share one state.
//!
//! Each record's value is a command; the ones that read emit one record:
//! - `put K V`, `del K`, `get K`, `scan P`: `state.put`, `.delete`, `.get`,
//!   `.scan` (limit 100);
//! - `fput K=V,-K,...`: one `flat-state.put-many` of the entries, `-K` a
//!   deletion;
//! - `fget K,K,...`: one `flat-state.get-many`;
//! - `fscan P`: one `flat-state.scan` (limit 100);
//! - `raw-get HEX`, `raw-put HEX`: `get-many` or `put-many` of the bytes
//!   HEX, as given (to send malformed buffers);
//! - `limits`: `flat-state.limits`, as `memory,key,value,state`.
//!
//! A read emits `K=V` per entry, joined by `,`, with `K?` for an absent key.

use weir_sdk::bindings::weir::operator::{flat_state, state};
use weir_sdk::{Context, Error, OpenContext, Operator, OperatorInfo, Record, Result};

/// The fixture.
pub struct FlatStateProbe;

const ABSENT: u32 = 0xFFFF_FFFF;

fn le(n: usize) -> [u8; 4] {
    u32::try_from(n).expect("short test keys").to_le_bytes()
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn unhex(hex: &str) -> Result<Vec<u8>> {
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&hex[i..i + 2], 16)
                .map_err(|e| Error::Other(format!("bad hex {hex:?}: {e}")))
        })
        .collect()
}

/// `K=V` (or `K?`) for each item, joined by `,`.
fn show<'a>(items: impl IntoIterator<Item = (&'a [u8], Option<&'a [u8]>)>) -> String {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    items
        .into_iter()
        .map(|(k, v)| match v {
            Some(v) => format!("{}={}", text(k), text(v)),
            None => format!("{}?", text(k)),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The entries of a packed entries buffer (key length, value length or
/// absent, key, value), read by hand.
fn unpack_entries(b: &[u8]) -> Vec<(&[u8], Option<&[u8]>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < b.len() {
        let (k, v) = (u32_at(b, at) as usize, u32_at(b, at + 4));
        at += 8;
        let key = &b[at..at + k];
        at += k;
        let value = (v != ABSENT).then(|| {
            let value = &b[at..at + v as usize];
            at += v as usize;
            value
        });
        out.push((key, value));
    }
    out
}

fn run(cmd: &str) -> Result<Option<String>> {
    let (op, arg) = cmd.split_once(' ').unwrap_or((cmd, ""));
    let list = || arg.split(',').filter(|s| !s.is_empty());
    Ok(match op {
        "put" => {
            let (k, v) = arg.split_once(' ').unwrap_or((arg, ""));
            state::put(k.as_bytes(), v.as_bytes());
            None
        }
        "del" => {
            state::delete(arg.as_bytes());
            None
        }
        "get" => {
            let v = state::get(arg.as_bytes());
            Some(show([(arg.as_bytes(), v.as_deref())]))
        }
        "scan" => {
            let entries = state::scan(arg.as_bytes(), None, 100);
            Some(show(
                entries
                    .iter()
                    .map(|e| (e.key.as_slice(), Some(e.value.as_slice()))),
            ))
        }
        "fput" => {
            let mut buf = Vec::new();
            for item in list() {
                match item.strip_prefix('-') {
                    Some(k) => {
                        buf.extend(le(k.len()));
                        buf.extend(ABSENT.to_le_bytes());
                        buf.extend(k.as_bytes());
                    }
                    None => {
                        let (k, v) = item.split_once('=').unwrap_or((item, ""));
                        buf.extend(le(k.len()));
                        buf.extend(le(v.len()));
                        buf.extend(k.as_bytes());
                        buf.extend(v.as_bytes());
                    }
                }
            }
            flat_state::put_many(&buf);
            None
        }
        "fget" => {
            let keys: Vec<&str> = list().collect();
            let mut buf = Vec::new();
            for k in &keys {
                buf.extend(le(k.len()));
                buf.extend(k.as_bytes());
            }
            let reply = flat_state::get_many(&buf);
            let mut at = 0;
            let mut items = Vec::new();
            for k in &keys {
                let n = u32_at(&reply, at);
                at += 4;
                let value = (n != ABSENT).then(|| {
                    let v = &reply[at..at + n as usize];
                    at += n as usize;
                    v
                });
                items.push((k.as_bytes(), value));
            }
            if at != reply.len() {
                return Err(Error::Other(format!(
                    "get-many replied {} bytes, {at} of them for {} keys",
                    reply.len(),
                    keys.len()
                )));
            }
            Some(show(items))
        }
        "fscan" => {
            let reply = flat_state::scan(arg.as_bytes(), None, 100);
            Some(show(unpack_entries(&reply)))
        }
        "raw-get" => {
            let reply = flat_state::get_many(&unhex(arg)?);
            Some(format!("{} bytes", reply.len()))
        }
        "raw-put" => {
            flat_state::put_many(&unhex(arg)?);
            None
        }
        "limits" => {
            let l = flat_state::limits();
            Some(format!(
                "{},{},{},{}",
                l.memory, l.max_key_bytes, l.max_value_bytes, l.max_state_bytes
            ))
        }
        other => return Err(Error::Other(format!("unknown command {other:?}"))),
    })
}

impl Operator for FlatStateProbe {
    fn describe() -> OperatorInfo {
        weir_guests::info("flat-state-probe", "1.0.0")
    }

    fn open(_ctx: &OpenContext) -> Result<Self> {
        Ok(FlatStateProbe)
    }

    fn process(&mut self, ctx: &mut Context, _port: u32, batch: Vec<Record>) -> Result<()> {
        for rec in batch {
            if let Some(out) = run(rec.value_str()?)? {
                ctx.emit(0, Record::new(out));
            }
        }
        Ok(())
    }
}

weir_sdk::export!(FlatStateProbe);
