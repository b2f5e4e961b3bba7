//! Number literals a 64-bit float cannot hold, clamped before a second parse (JSON allows
//! `1e400`; simd-json refuses it).

/// The body with every number literal that a 64-bit float cannot hold replaced by the nearest
/// float; everything else (strings included) byte for byte.
pub fn clamp_numbers(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len());
    let (mut i, mut in_string) = (0, false);
    while i < body.len() {
        let b = body[i];
        if in_string {
            out.push(b);
            match b {
                b'\\' if i + 1 < body.len() => {
                    out.push(body[i + 1]);
                    i += 1;
                }
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        if b == b'-' || b.is_ascii_digit() {
            let end = body[i..]
                .iter()
                .position(|c| !matches!(c, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
                .map_or(body.len(), |n| i + n);
            out.extend_from_slice(clamped(&body[i..end]).as_bytes());
            i = end;
            continue;
        }
        in_string = b == b'"';
        out.push(b);
        i += 1;
    }
    out
}

/// One number token, clamped to the range of a 64-bit float when it is outside it.
fn clamped(token: &[u8]) -> std::borrow::Cow<'_, str> {
    let text = String::from_utf8_lossy(token);
    let Ok(v) = text.parse::<f64>() else {
        return text;
    };
    let mantissa = text.split(['e', 'E']).next().unwrap_or("");
    let written_zero = !mantissa.bytes().any(|c| matches!(c, b'1'..=b'9'));
    if v.is_infinite() {
        format!("{:e}", f64::MAX.copysign(v)).into()
    } else if v == 0.0 && !written_zero {
        // An underflow such as 1e-400.
        "0.0".into()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamping_numbers_leaves_strings_and_ordinary_numbers_alone() {
        let body = br#"{"a": "9e999 \" -1e400", "b": [1e400, -2E+999, 0e-999, 0.5, 12, -0]}"#;
        let out = String::from_utf8(clamp_numbers(body)).unwrap();
        assert_eq!(
            out,
            r#"{"a": "9e999 \" -1e400", "b": [1.7976931348623157e308, -1.7976931348623157e308, 0e-999, 0.5, 12, -0]}"#
        );
    }
}
