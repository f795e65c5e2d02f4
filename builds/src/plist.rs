//! Property lists as an app bundle's `Info.plist` holds them: XML or binary
//! (`bplist00`), read into [`Value`]. Only reading; dates and data are kept
//! as they are, unread.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    String(String),
    Integer(i128),
    Real(f64),
    Bool(bool),
    Array(Vec<Value>),
    Dict(BTreeMap<String, Value>),
    /// Data, dates and UIDs: present, not read.
    Other,
}

impl Value {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_dict(&self) -> Option<&BTreeMap<String, Value>> {
        match self {
            Value::Dict(d) => Some(d),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// Reads a property list, binary or XML; the error says what is wrong
/// and, for a binary one, at which byte.
pub fn parse(bytes: &[u8]) -> Result<Value, String> {
    if bytes.starts_with(b"bplist00") { Binary::new(bytes)?.top() } else { xml(bytes) }
}

/// The binary format: objects, an offset table and a 32-byte trailer
/// (CoreFoundation's `CFBinaryPList.c` describes it).
struct Binary<'a> {
    bytes: &'a [u8],
    offset_size: usize,
    ref_size: usize,
    objects: usize,
    top: usize,
    table: usize,
}

/// Deeper than any Info.plist nests: a cycle of references ends here.
const MAX_DEPTH: usize = 64;

impl<'a> Binary<'a> {
    fn new(bytes: &'a [u8]) -> Result<Self, String> {
        if bytes.len() < 8 + 32 {
            return Err("a binary property list shorter than its trailer".into());
        }
        let trailer = &bytes[bytes.len() - 32..];
        let offset_size = usize::from(trailer[6]);
        let ref_size = usize::from(trailer[7]);
        let number = |range: std::ops::Range<usize>| be(&trailer[range]) as usize;
        let (objects, top, table) = (number(8..16), number(16..24), number(24..32));
        if !(1..=8).contains(&offset_size) || !(1..=8).contains(&ref_size) || top >= objects {
            return Err("a binary property list whose trailer does not describe it".into());
        }
        if table.checked_add(objects.saturating_mul(offset_size)).is_none_or(|end| end > bytes.len() - 32) {
            return Err("a binary property list whose offset table runs past its end".into());
        }
        Ok(Self { bytes, offset_size, ref_size, objects, top, table })
    }

    fn top(&self) -> Result<Value, String> {
        self.object(self.top, 0)
    }

    fn object(&self, index: usize, depth: usize) -> Result<Value, String> {
        if index >= self.objects || depth > MAX_DEPTH {
            return Err(format!("a binary property list refers to object {index}, which it does not hold"));
        }
        let at = self.table + index * self.offset_size;
        let offset = be(&self.bytes[at..at + self.offset_size]) as usize;
        let marker = *self.bytes.get(offset).ok_or_else(|| format!("object {index} starts past the end"))?;
        let (kind, low) = (marker >> 4, marker & 0x0f);
        match kind {
            0x0 => match low {
                0x8 => Ok(Value::Bool(false)),
                0x9 => Ok(Value::Bool(true)),
                _ => Ok(Value::Other),
            },
            0x1 => {
                let size = 1usize << low;
                let raw = self.slice(offset + 1, size)?;
                // 8-byte integers are signed, 16-byte ones hold a 64-bit value.
                Ok(Value::Integer(if size == 8 { be(raw) as i64 as i128 } else { i128::from(be_tail(raw)) }))
            }
            0x2 => {
                let raw = self.slice(offset + 1, 1usize << low)?;
                Ok(Value::Real(match raw.len() {
                    4 => f64::from(f32::from_be_bytes(raw.try_into().unwrap_or_default())),
                    8 => f64::from_be_bytes(raw.try_into().unwrap_or_default()),
                    n => return Err(format!("a real of {n} bytes at byte {offset}")),
                }))
            }
            0x5 => {
                let (len, start) = self.length(low, offset)?;
                let raw = self.slice(start, len)?;
                Ok(Value::String(raw.iter().map(|&b| char::from(b)).collect()))
            }
            0x6 => {
                let (len, start) = self.length(low, offset)?;
                let raw = self.slice(start, len * 2)?;
                let units: Vec<u16> = raw.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect();
                String::from_utf16(&units).map(Value::String).map_err(|e| format!("a string at byte {offset}: {e}"))
            }
            0xA | 0xC => {
                let (len, start) = self.length(low, offset)?;
                (0..len)
                    .map(|i| self.object(self.reference(start, i)?, depth + 1))
                    .collect::<Result<_, _>>()
                    .map(Value::Array)
            }
            0xD => {
                let (len, start) = self.length(low, offset)?;
                let mut dict = BTreeMap::new();
                for i in 0..len {
                    let key = match self.object(self.reference(start, i)?, depth + 1)? {
                        Value::String(key) => key,
                        other => return Err(format!("a dictionary key at byte {offset} is not a string: {other:?}")),
                    };
                    let value = self.object(self.reference(start, len + i)?, depth + 1)?;
                    dict.insert(key, value);
                }
                Ok(Value::Dict(dict))
            }
            0x3 | 0x4 | 0x8 => Ok(Value::Other),
            _ => Err(format!("an object of unknown kind {marker:#04x} at byte {offset}")),
        }
    }

    /// A collection's or string's length: in the marker's low nibble, or
    /// (0xF) an integer object after it. The length and where the content starts.
    fn length(&self, low: u8, offset: usize) -> Result<(usize, usize), String> {
        if low != 0x0f {
            return Ok((usize::from(low), offset + 1));
        }
        let marker = *self.bytes.get(offset + 1).ok_or("a length past the end")?;
        if marker >> 4 != 0x1 {
            return Err(format!("a length at byte {} that is not an integer", offset + 1));
        }
        let size = 1usize << (marker & 0x0f);
        let len = be(self.slice(offset + 2, size)?) as usize;
        Ok((len, offset + 2 + size))
    }

    fn reference(&self, start: usize, i: usize) -> Result<usize, String> {
        Ok(be(self.slice(start + i * self.ref_size, self.ref_size)?) as usize)
    }

    fn slice(&self, start: usize, len: usize) -> Result<&'a [u8], String> {
        start
            .checked_add(len)
            .and_then(|end| self.bytes.get(start..end))
            .ok_or_else(|| format!("{len} bytes at byte {start} run past the end"))
    }
}

fn be(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0u64, |n, &b| (n << 8) | u64::from(b))
}

fn be_tail(bytes: &[u8]) -> u64 {
    be(&bytes[bytes.len().saturating_sub(8)..])
}

/// The XML format: `<plist><dict><key>…</key><string>…</string>…`.
fn xml(bytes: &[u8]) -> Result<Value, String> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_reader(bytes);
    reader.config_mut().trim_text(true);
    // Open containers, innermost last; a dictionary's pending key.
    let mut stack: Vec<(Value, Option<String>)> = Vec::new();
    let mut text = String::new();
    let mut top = None;
    let mut buf = Vec::new();
    loop {
        let event =
            reader.read_event_into(&mut buf).map_err(|e| format!("XML at byte {}: {e}", reader.buffer_position()))?;
        match event {
            Event::Start(start) => {
                text.clear();
                match start.name().as_ref() {
                    b"dict" => stack.push((Value::Dict(BTreeMap::new()), None)),
                    b"array" => stack.push((Value::Array(Vec::new()), None)),
                    _ => {}
                }
            }
            Event::Empty(empty) => {
                let value = match empty.name().as_ref() {
                    b"true" => Value::Bool(true),
                    b"false" => Value::Bool(false),
                    b"string" => Value::String(String::new()),
                    b"dict" => Value::Dict(BTreeMap::new()),
                    b"array" => Value::Array(Vec::new()),
                    _ => Value::Other,
                };
                place(&mut stack, &mut top, value)?;
            }
            Event::Text(t) => text.push_str(&t.decode().map_err(|e| format!("XML text: {e}"))?),
            Event::GeneralRef(r) => {
                let name = String::from_utf8_lossy(r.as_ref()).into_owned();
                text.push_str(match name.as_str() {
                    "amp" => "&",
                    "lt" => "<",
                    "gt" => ">",
                    "quot" => "\"",
                    "apos" => "'",
                    other => return Err(format!("XML entity &{other}; unknown")),
                });
            }
            Event::End(end) => {
                let value = match end.name().as_ref() {
                    b"key" => {
                        let Some((Value::Dict(_), key)) = stack.last_mut() else {
                            return Err("a <key> outside a <dict>".into());
                        };
                        *key = Some(std::mem::take(&mut text));
                        continue;
                    }
                    b"string" => Value::String(std::mem::take(&mut text)),
                    b"integer" => Value::Integer(text.trim().parse().map_err(|_| format!("an <integer> {text:?}"))?),
                    b"real" => Value::Real(text.trim().parse().map_err(|_| format!("a <real> {text:?}"))?),
                    b"dict" | b"array" => stack.pop().map(|(v, _)| v).ok_or("a container closed twice")?,
                    b"plist" => continue,
                    _ => Value::Other,
                };
                text.clear();
                place(&mut stack, &mut top, value)?;
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    top.ok_or_else(|| "a property list with no value".into())
}

/// Puts a finished value in its container (under the pending key of a
/// dictionary), or makes it the top value.
fn place(stack: &mut [(Value, Option<String>)], top: &mut Option<Value>, value: Value) -> Result<(), String> {
    match stack.last_mut() {
        Some((Value::Dict(dict), key)) => {
            let key = key.take().ok_or("a dictionary value without its <key>")?;
            dict.insert(key, value);
        }
        Some((Value::Array(array), _)) => array.push(value),
        Some(_) => return Err("a value inside something that is not a container".into()),
        None => *top = Some(value),
    }
    Ok(())
}
