//! Counts a local lake for `benches/load.sh`: rows, distinct messageIds, and (given the body of
//! a collect request) the rows of that batch's messageIds.
//!
//! `lake_count LAKE_DIR [BODY_FILE]`

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;

fn parquet_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = entry.path();
        if p.is_dir() {
            parquet_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "parquet") {
            out.push(p);
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let lake = PathBuf::from(args.next().expect("usage: lake_count LAKE_DIR [BODY_FILE]"));
    let wanted: HashSet<String> = args
        .next()
        .map(|f| {
            let body = std::fs::read_to_string(f).expect("body file");
            body.split("\"messageId\":\"")
                .skip(1)
                .filter_map(|s| s.split('"').next().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let mut files = Vec::new();
    parquet_files(&lake, &mut files);
    let (mut rows, mut of_body) = (0u64, 0u64);
    let mut ids: HashSet<u128> = HashSet::new();
    for f in &files {
        let file = std::fs::File::open(f).expect("open");
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).expect("parquet");
        let col = builder
            .schema()
            .index_of("message_id")
            .expect("message_id column");
        let mask = ProjectionMask::roots(builder.parquet_schema(), [col]);
        for batch in builder.with_projection(mask).build().expect("reader") {
            let batch = batch.expect("batch");
            let ids_col = batch.column(0).as_string::<i32>();
            for i in 0..batch.num_rows() {
                let id = ids_col.value(i);
                rows += 1;
                // 128 bits of two hashes: distinct counting without keeping the strings.
                let h = |salt: u8| {
                    use std::hash::{Hash, Hasher};
                    let mut s = std::collections::hash_map::DefaultHasher::new();
                    (salt, id).hash(&mut s);
                    s.finish() as u128
                };
                ids.insert((h(0) << 64) | h(1));
                if wanted.contains(id) {
                    of_body += 1;
                }
            }
        }
    }
    print!(
        "files={} rows={} distinct_message_ids={}",
        files.len(),
        rows,
        ids.len()
    );
    if !wanted.is_empty() {
        print!(" body_ids={} rows_of_body={}", wanted.len(), of_body);
    }
    println!();
}
