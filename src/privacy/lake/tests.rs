//! The rewrite of one lake file: the person's rows go, every other row stays as it was, a file
//! that cannot hold them is not read, and a second run changes nothing.

use arrow_array::cast::AsArray;
use object_store::memory::InMemory;

use super::*;
use crate::collector::columns::{Encoder, OpenFile, ROW_GROUP_ROWS};
use crate::collector::event::Event;

const PATH: &str = "lake/events/app_id=a/dt=2026-03-04/hour=05/part-n-0-1.parquet";

/// Rows of 100 visitors over three row groups; every 50th row is the person's (alternating
/// their two anonymousIds, every other one identified).
fn file(person_every: usize) -> (Vec<u8>, usize) {
    let mut f = OpenFile::new(&Encoder::spawn("test-encoder".into()).unwrap());
    let n = ROW_GROUP_ROWS * 2 + 500;
    let mut theirs = 0;
    for i in 0..n {
        let mut e = Event::example(
            "a",
            &format!("m{i:06}"),
            &format!("v-{}", i % 100),
            i as i64,
        );
        if person_every > 0 && i % person_every == 7 {
            theirs += 1;
            e.anonymous_id = Some(if i % 2 == 0 { "p-a1" } else { "p-a2" }.into());
            if i % 3 == 0 {
                e.user_id = Some("p-u".into());
            }
        }
        f.append(&[&e]).unwrap();
    }
    (f.close().unwrap().bytes, theirs)
}

fn person() -> Ids {
    Ids::of(&Person {
        user_id: Some("p-u".into()),
        anonymous_ids: ["p-a1".to_owned(), "p-a2".to_owned()].into(),
        email: None,
    })
}

fn message_ids(bytes: Bytes) -> Vec<String> {
    let r = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .unwrap()
        .build()
        .unwrap();
    r.flat_map(|b| {
        let b = b.unwrap();
        let c = b
            .column_by_name("message_id")
            .unwrap()
            .as_string::<i32>()
            .clone();
        (0..c.len())
            .map(|i| c.value(i).to_owned())
            .collect::<Vec<_>>()
    })
    .collect()
}

async fn setup(bytes: Vec<u8>, part_bytes: usize) -> (Rewriter, Arc<InMemory>, tempfile::TempDir) {
    let lake = Arc::new(InMemory::new());
    lake.put(&Path::from(PATH), PutPayload::from(bytes))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let r = Rewriter {
        lake: lake.clone(),
        scratch: dir.path().join("scratch"),
        part_bytes,
    };
    (r, lake, dir)
}

#[tokio::test]
async fn the_persons_rows_go_and_every_other_row_stays_in_order() {
    let (bytes, theirs) = file(50);
    let before = message_ids(Bytes::from(bytes.clone()));
    // Parts of 16 KiB: the new file goes up as a multipart upload.
    let (r, lake, _dir) = setup(bytes, 16 * 1024).await;
    let path = Path::from(PATH);
    let outcome = r.erase(&path, &person(), "job_1").await.unwrap();
    assert_eq!(
        outcome,
        Outcome::Rewritten {
            rows: theirs as u64
        }
    );
    let after_bytes = lake.get(&path).await.unwrap().bytes().await.unwrap();
    let after = message_ids(after_bytes.clone());
    let expected: Vec<String> = before
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 50 != 7)
        .map(|(_, m)| m.clone())
        .collect();
    assert_eq!(after, expected);
    // Row groups keep the lake's size, and the Bloom filters are written again.
    let meta = ParquetRecordBatchReaderBuilder::try_new(after_bytes.clone())
        .unwrap()
        .metadata()
        .clone();
    assert_eq!(
        meta.num_row_groups(),
        expected.len().div_ceil(ROW_GROUP_ROWS)
    );
    assert!(meta
        .row_group(0)
        .columns()
        .iter()
        .any(|c| c.bloom_filter_offset().is_some()));
    assert_eq!(done_by(&meta, "job_1"), Some(theirs as u64));
    // The same job again (a resume before the file was recorded): counted, not rewritten.
    assert_eq!(
        r.erase(&path, &person(), "job_1").await.unwrap(),
        Outcome::Rewritten {
            rows: theirs as u64
        }
    );
    assert_eq!(
        lake.get(&path).await.unwrap().bytes().await.unwrap(),
        after_bytes
    );
    // Another job finds nothing of theirs left, without reading the file.
    assert_eq!(
        r.erase(&path, &person(), "job_2").await.unwrap(),
        Outcome::Skipped
    );
    assert_eq!(
        std::fs::read_dir(&r.scratch).unwrap().count(),
        0,
        "scratch files removed"
    );
}

#[tokio::test]
async fn a_file_whose_filters_rule_the_person_out_is_not_read() {
    let (bytes, _) = file(0);
    let (r, lake, _dir) = setup(bytes.clone(), 1 << 20).await;
    let path = Path::from(PATH);
    let meta = r.footer(&path).await.unwrap();
    assert!(!r.may_hold(&path, &meta, &person()).await.unwrap());
    // An id within a chunk's min and max and in its Bloom filter may be there.
    let visitor = Ids::of(&Person {
        anonymous_ids: ["v-42".to_owned()].into(),
        ..Person::default()
    });
    assert!(r.may_hold(&path, &meta, &visitor).await.unwrap());
    assert_eq!(
        r.erase(&path, &person(), "job_1").await.unwrap(),
        Outcome::Skipped
    );
    assert!(!r.scratch.exists(), "nothing downloaded");
    assert_eq!(
        lake.get(&path).await.unwrap().bytes().await.unwrap(),
        Bytes::from(bytes)
    );
    // A file gone meanwhile (retention) is skipped.
    let gone = Path::from("lake/events/app_id=a/dt=2026-03-04/hour=05/gone.parquet");
    assert_eq!(
        r.erase(&gone, &person(), "job_1").await.unwrap(),
        Outcome::Skipped
    );
}

#[tokio::test]
async fn files_are_listed_for_the_app_only_in_path_order() {
    let lake = InMemory::new();
    for p in [
        "lake/events/app_id=a/dt=2026-03-05/hour=00/part-2.parquet",
        "lake/events/app_id=a/dt=2026-03-04/hour=05/part-1.parquet",
        "lake/events/app_id=ab/dt=2026-03-04/hour=05/part-3.parquet",
        "lake/events/app_id=a/dt=2026-03-04/hour=05/notes.txt",
    ] {
        lake.put(&Path::from(p), PutPayload::from_static(b"x"))
            .await
            .unwrap();
    }
    let listed: Vec<String> = files(&lake, "lake", "a")
        .await
        .unwrap()
        .iter()
        .map(|p| p.to_string())
        .collect();
    assert_eq!(
        listed,
        [
            "lake/events/app_id=a/dt=2026-03-04/hour=05/part-1.parquet",
            "lake/events/app_id=a/dt=2026-03-05/hour=00/part-2.parquet"
        ]
    );
}

#[tokio::test]
async fn an_unreadable_file_is_counted_and_passed_not_fatal_to_the_erasure() {
    let (r, _lake, _dir) = setup(b"not parquet at all, a damaged upload".to_vec(), 1 << 20).await;
    let path = Path::from(PATH);
    let outcome = r.erase(&path, &person(), "job_1").await;
    assert!(
        matches!(outcome, Err(LakeError::Parquet { .. })),
        "{outcome:?}"
    );
    let mut cursor = crate::jobs::Cursor::default();
    crate::privacy::job::tally(&mut cursor, "job_1", &path, outcome).unwrap();
    assert_eq!(cursor.report.get("lakeFilesUnreadable"), Some(&1));
    assert_eq!(
        cursor.token.as_deref(),
        Some(PATH),
        "the next run goes on past it"
    );
}
