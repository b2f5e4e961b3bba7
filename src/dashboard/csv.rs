//! CSV (RFC 4180) in and out: a reader for imports (quoted fields, doubled quotes, CRLF or LF,
//! a leading BOM) and the writing of one row for exports.

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
            CsvError::TooManyRows { max } => write!(f, "more than {max} rows"),
        }
    }
}

/// The rows of `text` (blank lines skipped), at most `max_rows`.
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
    if rows.len() == max {
        return Err(CsvError::TooManyRows { max });
    }
    rows.push(row);
    Ok(())
}

/// One CSV line (with its CRLF). Text that a spreadsheet would run as a formula (`=`, `+`,
/// `-`, `@` first) is prefixed with `'`.
pub fn row<'a>(cells: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for (i, cell) in cells.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let guarded = match cell.chars().next() {
            Some('=' | '+' | '-' | '@') if cell.parse::<f64>().is_err() => format!("'{cell}"),
            _ => cell.to_owned(),
        };
        if guarded.contains([',', '"', '\n', '\r']) {
            out.push('"');
            out.push_str(&guarded.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(&guarded);
        }
    }
    out.push_str("\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_fields_doubled_quotes_and_line_breaks_are_read() {
        let text = "\u{feff}email,name\r\na@x.io,\"Doe, Jane\"\n\nb@x.io,\"say \"\"hi\"\"\nthere\"\nc@x.io,";
        let rows = parse(text, 10).unwrap();
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
        assert_eq!(parse("a\nb\nc\n", 2), Err(CsvError::TooManyRows { max: 2 }));
    }

    #[test]
    fn written_rows_read_back_and_formulas_are_defused() {
        let line = row(["a,b", "say \"x\"", "=SUM(A1)", "-5", "plain"]);
        assert_eq!(line, "\"a,b\",\"say \"\"x\"\"\",'=SUM(A1),-5,plain\r\n");
        assert_eq!(parse(&line, 1).unwrap()[0][..2], ["a,b", "say \"x\""]);
    }
}
