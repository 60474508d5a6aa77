//! Plain-text tables: left-aligned columns two spaces apart, for every table
//! patchgrade prints.

/// How a table is laid out.
#[derive(Debug, Clone, Copy, Default)]
pub struct Layout<'a> {
    /// Put before every line.
    pub indent: &'a str,
    /// Least width of each column (columns not named: 0).
    pub min_widths: &'a [usize],
    /// Drop white space at the end of lines (an empty last cell).
    pub trim: bool,
}

/// One line per row. Widths come from the rows with the most cells; a
/// shorter row (a metric not reported, with its reason) runs on unpadded.
/// The last cell of a row is never padded.
pub fn render(rows: &[Vec<String>], layout: Layout<'_>) -> String {
    let full = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..full)
        .map(|i| {
            rows.iter()
                .filter(|r| r.len() == full)
                .map(|r| r[i].chars().count())
                .chain(layout.min_widths.get(i).copied())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let last = r.len().saturating_sub(1);
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == last {
                    c.clone()
                } else {
                    format!("{c:<w$}", w = widths[i])
                }
            })
            .collect();
        let line = cells.join("  ");
        out.push_str(layout.indent);
        out.push_str(if layout.trim { line.trim_end() } else { &line });
        out.push('\n');
    }
    out
}

/// Left-aligned columns, indented, lines trimmed.
pub fn columns(rows: &[Vec<String>], indent: &str) -> String {
    render(
        rows,
        Layout {
            indent,
            trim: true,
            ..Layout::default()
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cells: &[&str]) -> Vec<String> {
        cells.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn widths_from_full_rows_and_least_widths() {
        let rows = [
            row(&["id", "outcome", "detail"]),
            row(&["a-long-id", "ok", ""]),
            row(&["x", "withheld: why"]),
        ];
        assert_eq!(
            columns(&rows, "  "),
            "  id         outcome  detail\n  a-long-id  ok\n  x          withheld: why\n"
        );
        let kept = render(
            &rows[..2],
            Layout {
                min_widths: &[0, 9],
                ..Layout::default()
            },
        );
        assert_eq!(
            kept,
            "id         outcome    detail\na-long-id  ok         \n"
        );
    }
}
