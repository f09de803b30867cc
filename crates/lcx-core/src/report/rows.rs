//! Pure renderers of `lcx query`'s rows: a markdown table, CSV or JSON.
//! Like the report renderers they only serialise: data in, text out.

use super::words::csv_field;
use crate::store::{QueryResult, SqlValue};
use crate::text::markdown_table;

/// A value as a table or CSV cell: NULL is empty, a blob is its size.
fn text(v: &SqlValue) -> String {
    match v {
        SqlValue::Null => String::new(),
        SqlValue::Integer(i) => i.to_string(),
        SqlValue::Real(f) => f.to_string(),
        SqlValue::Text(t) => t.clone(),
        SqlValue::Blob(b) => format!("<blob {} bytes>", b.len()),
    }
}

/// A value in JSON: a non-finite real (which JSON cannot hold) is null.
fn json(v: &SqlValue) -> serde_json::Value {
    match v {
        SqlValue::Null => serde_json::Value::Null,
        SqlValue::Integer(i) => (*i).into(),
        SqlValue::Real(f) => serde_json::Number::from_f64(*f)
            .map(serde_json::Value::Number)
            .unwrap_or(serde_json::Value::Null),
        SqlValue::Text(t) => t.clone().into(),
        SqlValue::Blob(b) => format!("<blob {} bytes>", b.len()).into(),
    }
}

/// The rows as a markdown table.
pub fn table(result: &QueryResult) -> String {
    // A table is read on a terminal: each cell one line, controls visible.
    let cell = |s: &str| crate::escape::terminal_line(s).into_owned();
    let mut t = markdown_table();
    t.set_header(result.columns.iter().map(|c| cell(c)).collect::<Vec<_>>());
    for row in &result.rows {
        t.add_row(row.iter().map(|v| cell(&text(v))).collect::<Vec<_>>());
    }
    t.to_string()
}

/// The rows as CSV, a header line first (no trailing newline).
pub fn csv(result: &QueryResult) -> String {
    let mut lines = vec![result
        .columns
        .iter()
        .map(|c| csv_field(c))
        .collect::<Vec<_>>()
        .join(",")];
    for row in &result.rows {
        lines.push(
            row.iter()
                .map(|v| csv_field(&text(v)))
                .collect::<Vec<_>>()
                .join(","),
        );
    }
    lines.join("\n")
}

/// The rows as a pretty-printed JSON array of objects keyed by column.
pub fn json_array(result: &QueryResult) -> String {
    let rows: Vec<serde_json::Value> = result
        .rows
        .iter()
        .map(|row| {
            let obj: serde_json::Map<String, serde_json::Value> = result
                .columns
                .iter()
                .cloned()
                .zip(row.iter().map(json))
                .collect();
            serde_json::Value::Object(obj)
        })
        .collect();
    // Plain data: cannot fail to serialise.
    let json = serde_json::to_string_pretty(&rows).unwrap_or_default();
    crate::escape::json_visible(&json).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result() -> QueryResult {
        QueryResult {
            columns: vec!["name".into(), "n".into(), "mean".into(), "raw".into()],
            rows: vec![
                vec![
                    SqlValue::Text("a,b".into()),
                    SqlValue::Integer(3),
                    SqlValue::Real(0.5),
                    SqlValue::Blob(vec![1, 2]),
                ],
                vec![
                    SqlValue::Null,
                    SqlValue::Integer(0),
                    SqlValue::Real(f64::NAN),
                    SqlValue::Null,
                ],
            ],
        }
    }

    #[test]
    fn rows_render_as_table_csv_and_json() {
        let r = result();
        let t = table(&r);
        assert!(t.lines().next().unwrap().contains("| name"), "{t}");
        assert!(t.contains("<blob 2 bytes>"), "{t}");
        assert_eq!(t.lines().count(), 4, "header, rule, two rows: {t}");
        let c = csv(&r);
        assert_eq!(c, "name,n,mean,raw\n\"a,b\",3,0.5,<blob 2 bytes>\n,0,NaN,");
        let j: serde_json::Value = serde_json::from_str(&json_array(&r)).unwrap();
        assert_eq!(j[0]["name"], "a,b");
        assert_eq!(j[0]["n"], 3);
        assert!(j[1]["mean"].is_null(), "NaN has no JSON form: {j}");
        assert!(j[1]["name"].is_null());
    }
}
