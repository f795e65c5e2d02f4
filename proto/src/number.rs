//! Numbers on the wire as JavaScript writes them.
//!
//! The agent is JavaScript: `JSON.stringify` writes a frame of `16` as `16`,
//! never `16.0`. Serde writes every `f64` with a fraction, so the fields
//! the agent sends as plain numbers (frames, points, sizes) go through
//! here; reading accepts either form.

use serde::Serializer;

/// Above this an `f64` no longer holds every integer (2^53), and JavaScript
/// switches to exponent form at 1e21 anyway: leave those to serde.
const EXACT: f64 = 9_007_199_254_740_992.0;

/// Writes an integral `f64` as an integer (`16`, `-3`), anything else as serde does.
pub fn js<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    if value.fract() == 0.0 && value.abs() < EXACT {
        // -0 prints as 0 in JSON.stringify too.
        serializer.serialize_i64(*value as i64)
    } else {
        serializer.serialize_f64(*value)
    }
}

/// [`js`] for an optional number.
pub fn js_opt<S: Serializer>(value: &Option<f64>, serializer: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(v) => js(v, serializer),
        None => serializer.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use crate::wire::{Frame, Point};

    #[test]
    fn integral_numbers_print_without_a_fraction_as_javascript_does() {
        let frame = Frame { x: 16.0, y: -0.0, w: 358.5, h: 1e3 };
        assert_eq!(serde_json::to_string(&frame).unwrap(), r#"{"x":16,"y":0,"w":358.5,"h":1000}"#);
        let point = Point { x: 0.1, y: 1e300 };
        assert_eq!(serde_json::to_string(&point).unwrap(), r#"{"x":0.1,"y":1e+300}"#);
        let back: Frame = serde_json::from_str(r#"{"x":16,"y":0.0,"w":358.5,"h":1000}"#).unwrap();
        assert_eq!(back, Frame { x: 16.0, y: 0.0, w: 358.5, h: 1000.0 });
    }
}
