//! CSV (RFC 4180) in and out, the one module for both: a reader for imports (quoted fields,
//! doubled quotes, CRLF or LF, a leading BOM) and the writing of one row for every export, with
//! formula cells defused.

/// Why a CSV text could not be read.
#[derive(Debug, PartialEq)]
pub enum CsvError {
    /// A quoted field that never ends (1-based line of its start).
    Unterminated {
        line: usize,
    },
    TooManyRows {
        max: usize,
    },
}

impl std::fmt::Display for CsvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CsvError::Unterminated { line } => {
                write!(f, "a quoted field opened on line {line} never closes")
            }
            CsvError::TooManyRows { max } => {
                write!(f, "more than {max} rows after the heading line")
            }
        }
    }
}

/// The rows of `text` (blank lines skipped): its heading line and at most `max_rows` more.
pub fn parse(text: &str, max_rows: usize) -> Result<Vec<Vec<String>>, CsvError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut rows = Vec::new();
    let mut row: Vec<String> = Vec::new();
    let mut cell = String::new();
    let (mut quoted, mut line, mut opened_at) = (false, 1, 1);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                cell.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => {
                if c == '\n' {
                    line += 1;
                }
                cell.push(c);
            }
            (false, '"') if cell.is_empty() => {
                quoted = true;
                opened_at = line;
            }
            (false, ',') => row.push(std::mem::take(&mut cell)),
            (false, '\r') if chars.peek() == Some(&'\n') => {}
            (false, '\n' | '\r') => {
                line += 1;
                row.push(std::mem::take(&mut cell));
                end_row(&mut rows, std::mem::take(&mut row), max_rows)?;
            }
            (false, c) => cell.push(c),
        }
    }
    if quoted {
        return Err(CsvError::Unterminated { line: opened_at });
    }
    if !cell.is_empty() || !row.is_empty() {
        row.push(cell);
        end_row(&mut rows, row, max_rows)?;
    }
    Ok(rows)
}

fn end_row(rows: &mut Vec<Vec<String>>, row: Vec<String>, max: usize) -> Result<(), CsvError> {
    if row.len() == 1 && row[0].trim().is_empty() {
        return Ok(());
    }
    if rows.len() > max {
        return Err(CsvError::TooManyRows { max });
    }
    rows.push(row);
    Ok(())
}

/// One CSV line (RFC 4180, with its CRLF): a cell holding a comma, a quote or a line break is
/// quoted, its quotes doubled; every cell passes through [`defuse`]. Every CSV the service
/// writes (contacts, survey responses, from the API or the dashboard) is made of these rows.
pub fn row<S: AsRef<str>>(cells: impl IntoIterator<Item = S>) -> String {
    let mut out = String::new();
    for (i, cell) in cells.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let cell = defuse(cell.as_ref());
        if cell.contains([',', '"', '\n', '\r']) {
            out.push('"');
            out.push_str(&cell.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(&cell);
        }
    }
    out.push_str("\r\n");
    out
}

/// A cell a spreadsheet would not run as a formula (OWASP's CSV injection rule): text starting
/// with `=`, `+`, `-`, `@`, a tab or a carriage return gets a leading `'`. A number (`-5`,
/// `+1.5`, `-2e3`) is left as it is, so a negative score stays a number: a spreadsheet reads
/// it as one, never as a formula.
pub fn defuse(cell: &str) -> std::borrow::Cow<'_, str> {
    match cell.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r') if !is_number(cell) => format!("'{cell}").into(),
        _ => cell.into(),
    }
}

/// A decimal number: a sign, digits with at most one `.`, an optional exponent. (Not
/// `f64::from_str`, which also takes `-inf` and `+NaN`.)
fn is_number(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (mantissa, exponent) = match s.split_once(['e', 'E']) {
        Some((m, e)) => (m, Some(e.strip_prefix(['+', '-']).unwrap_or(e))),
        None => (s, None),
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some((whole, frac)) => {
            (whole.is_empty() || digits(whole))
                && (frac.is_empty() || digits(frac))
                && mantissa.len() > 1
        }
        None => digits(mantissa),
    };
    mantissa_ok && exponent.is_none_or(digits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_fields_doubled_quotes_and_line_breaks_are_read() {
        let text = "\u{feff}email,name\r\na@x.io,\"Doe, Jane\"\n\nb@x.io,\"say \"\"hi\"\"\nthere\"\nc@x.io,";
        let rows = parse(text, 3).unwrap();
        assert_eq!(rows.len(), 4);
        assert_eq!(rows[0], ["email", "name"]);
        assert_eq!(rows[1], ["a@x.io", "Doe, Jane"]);
        assert_eq!(rows[2], ["b@x.io", "say \"hi\"\nthere"]);
        assert_eq!(rows[3], ["c@x.io", ""]);
    }

    #[test]
    fn an_open_quote_and_too_many_rows_are_errors() {
        assert_eq!(
            parse("a\n\"b,c\nd", 10),
            Err(CsvError::Unterminated { line: 2 })
        );
        assert_eq!(parse("head\nb\nc\n", 2).unwrap().len(), 3);
        let too_many = parse("head\nb\nc\nd\n", 2).unwrap_err();
        assert_eq!(too_many, CsvError::TooManyRows { max: 2 });
        assert_eq!(
            too_many.to_string(),
            "more than 2 rows after the heading line"
        );
    }

    #[test]
    fn written_rows_read_back_and_formulas_are_defused() {
        let line = row(["a,b", "say \"x\"", "=SUM(A1)", "-5", "plain"]);
        assert_eq!(line, "\"a,b\",\"say \"\"x\"\"\",'=SUM(A1),-5,plain\r\n");
        assert_eq!(parse(&line, 0).unwrap()[0][..2], ["a,b", "say \"x\""]);
    }

    #[test]
    fn every_formula_start_gets_a_quote_and_numbers_stay_numbers() {
        let cases = [
            (
                "=HYPERLINK(\"http://evil\")",
                "'=HYPERLINK(\"http://evil\")",
            ),
            ("=1+2", "'=1+2"),
            ("+1+2", "'+1+2"),
            ("-1+2", "'-1+2"),
            ("@SUM(A1)", "'@SUM(A1)"),
            ("\tcmd", "'\tcmd"),
            ("\rcmd", "'\rcmd"),
            ("-", "'-"),
            ("-inf", "'-inf"),
            ("+NaN", "'+NaN"),
            ("-.", "'-."),
            ("-5", "-5"),
            ("+7", "+7"),
            ("-1.5", "-1.5"),
            ("-.5", "-.5"),
            ("-2e3", "-2e3"),
            ("-2E-3", "-2E-3"),
            ("plain", "plain"),
            ("a=b", "a=b"),
            ("", ""),
        ];
        for (cell, written) in cases {
            assert_eq!(defuse(cell), written, "{cell:?}");
        }
    }
}
